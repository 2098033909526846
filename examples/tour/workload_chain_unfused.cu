// fusex-tour's chain block unfused: one kernel per operation, as an eager framework runs it.
#include "chain_blocks.hpp"

namespace tour {

void chain_block_unfused(backend& b, const chain_block& k) {
  const std::int64_t rows = k.cur.extent(0), cols = k.cur.extent(1), n = rows * cols;
  temp t1(b, n), t2(b, n), t3(b, n), t4(b, n), t5(b, n), t6(b, n);
  auto a1 = v2(t1.data(), rows, cols), a2 = v2(t2.data(), rows, cols), a3 = v2(t3.data(), rows, cols);
  auto a4 = v2(t4.data(), rows, cols), a5 = v2(t5.data(), rows, cols), a6 = v2(t6.data(), rows, cols);
  b.eval(a1, fusex::layer_norm(k.cur, k.g, k.b));
  b.eval(a2, a1 * k.scale);
  b.eval(a3, a2 + k.shift);
  b.eval(a4, fusex::gelu(a3));
  b.eval(a5, a4 * 0.5f);
  b.eval(a6, k.cur + a5);
  b.eval(k.next, fusex::rms_norm(a6, k.w));
}

}  // namespace tour
