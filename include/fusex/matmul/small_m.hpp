#pragma once
/// \file
/// fusex's own GEMM kernel for the launch-bound regime (M = 1 to 64 rows, as in a batch-16 MLP):
/// one launch computes the product and applies the whole epilogue, whatever it is, per output
/// element through the epilogue's evaluator (the matmul node evaluates to the kernel's
/// accumulator). It launches through detail::launch_kernel, so programmatic dependent launch
/// applies on sm_90: the weight rows are prefetched into L2 before the grid-dependency wait.
///
/// Work split: a warp owns 32 outputs, MT rows x CW = 32 / MT columns, for all K; each lane
/// accumulates a K-slice of all 32 (16-byte loads of the weight rows and of the rows of a, which
/// every warp of the block shares through L1), then a reduce-scatter across the warp (31
/// shuffles) leaves each lane with one finished output, to which it applies the epilogue. A
/// block is 8 warps (8 * CW columns); the grid covers N, and the batch along y. The weights are
/// read once per M-tile of MT rows (once in all when M <= MT, the intended case).

#include <fusex/config.hpp>
#include <fusex/core/dtype.hpp>
#include <fusex/core/view.hpp>
#include <fusex/device/launch.hpp>
#include <fusex/expr/detail/evaluator.hpp>
#include <fusex/matmul/node.hpp>
#include <fusex/plan/elementwise_plan.hpp>

#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <type_traits>

namespace fusex::detail {

/// The evaluation context of a fused GEMM kernel: the current output element's accumulator.
struct gemm_context {
  float value;
};

/// The matmul node inside a fused GEMM kernel: the value the kernel computed for this element.
template <class T>
struct gemm_value_eval {
  using value_type = T;
  using compute_type = compute_t<T>;

  template <class F>
  FUSEX_HD FUSEX_FORCEINLINE void visit_reductions(F&) const {}

  template <int V, class Index, int R, class Ctx>
  FUSEX_HD FUSEX_FORCEINLINE vec<compute_type, V> load(const coord<Index, R>&, const Ctx& ctx) const {
    static_assert(std::is_same_v<Ctx, gemm_context>,
                  "fusex::matmul: evaluate matmul expressions with fusex::eval, fusex::host::eval or "
                  "fusex::explain with <fusex/matmul.hpp> included (tie() and tensor::assign do not take them)");
    vec<compute_type, V> r;
    FUSEX_UNROLL
    for (int l = 0; l < V; ++l) r.v[l] = static_cast<compute_type>(ctx.value);
    return r;
  }
};

template <class T, class Index>
struct evaluator_of<matmul_node<T>, Index> { using type = gemm_value_eval<T>; };

template <class Index, class T>
gemm_value_eval<T> make_evaluator(const matmul_node<T>&, leaf_strides_source<Index>&) {
  return {};
}

/// The operands of the fusex GEMM kernel, in elements: a[batch, m, k], b[batch, k, n].
template <class T>
struct small_m_params {
  const T* a;
  const T* b;
  std::int64_t a_bs, a_sm, a_sk;
  std::int64_t b_bs, b_sk, b_sn;
  std::int64_t batch;
  int m, n, k;
};

inline constexpr int small_m_warps = 8;
inline constexpr int small_m_block = small_m_warps * 32;

/// The M-tile the kernel uses for M rows: 4 (8 columns per warp), 16 (2) or 32 (1).
inline int small_m_tile(std::int64_t m) { return m <= 4 ? 4 : (m <= 16 ? 16 : 32); }

#if defined(__CUDACC__)
// Sum over the warp of 32 values per lane, scattered: lane l returns the total of value l.
FUSEX_DEVICE FUSEX_FORCEINLINE float warp_reduce_scatter(float (&acc)[32], int lane) {
  FUSEX_UNROLL
  for (int off = 16; off >= 1; off >>= 1) {
    const bool upper = (lane & off) != 0;
    FUSEX_UNROLL
    for (int i = 0; i < off; ++i) {
      const float send = upper ? acc[i] : acc[i + off];
      const float keep = upper ? acc[i + off] : acc[i];
      acc[i] = keep + __shfl_xor_sync(0xffffffffu, send, off);
    }
  }
  return acc[0];
}

template <class T, int VW>
FUSEX_DEVICE FUSEX_FORCEINLINE void load_vec(const T* p, float (&out)[VW]) {
  const aligned_vec<T, VW> raw = *reinterpret_cast<const aligned_vec<T, VW>*>(p);
  FUSEX_UNROLL
  for (int l = 0; l < VW; ++l) out[l] = convert<float>(raw.v[l]);
}

/// VW > 1: 16-byte loads along K (unit K stride, aligned rows); VW == 1: any strides.
template <int MT, int VW, class T, class Out, class Epi>
__global__ void __launch_bounds__(small_m_block) small_m_kernel(const small_m_params<T> p, const Out out, const Epi epi) {
  constexpr int CW = 32 / MT;
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int warp = static_cast<int>(threadIdx.x) >> 5;
  const int n0 = (static_cast<int>(blockIdx.x) * small_m_warps + warp) * CW;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // The weights rarely depend on the previous kernel, but they may: prefetch them into L2 (coherent
  // with that kernel's writes) rather than into registers before the wait.
  if constexpr (VW > 1) {
    if (n0 < p.n) {
      const std::int64_t row_bytes = std::int64_t{p.k} * static_cast<std::int64_t>(sizeof(T));
      FUSEX_UNROLL
      for (int c = 0; c < CW; ++c) {
        const int n = n0 + c < p.n ? n0 + c : p.n - 1;
        const char* row = reinterpret_cast<const char*>(p.b + static_cast<std::int64_t>(blockIdx.y) * p.b_bs + n * p.b_sn);
        for (std::int64_t off = std::int64_t{lane} * 128; off < row_bytes; off += 32 * 128)
          asm volatile("prefetch.global.L2 [%0];" ::"l"(row + off));
      }
    }
  }
#endif
  pdl_begin();
  if (n0 >= p.n) return;  // whole warps only: the shuffles below need every lane
  for (std::int64_t bz = blockIdx.y; bz < p.batch; bz += gridDim.y) {
    const T* A = p.a + bz * p.a_bs;
    const T* B = p.b + bz * p.b_bs;
    for (int m0 = 0; m0 < p.m; m0 += MT) {
      float acc[32];
      FUSEX_UNROLL
      for (int i = 0; i < 32; ++i) acc[i] = 0.0f;
      // Out-of-range rows and columns read the last valid one (no branches in the loop); their
      // results are not stored.
      if constexpr (VW > 1) {
        for (int k = lane * VW; k < p.k; k += 32 * VW) {
          float w[CW][VW];
          FUSEX_UNROLL
          for (int c = 0; c < CW; ++c) {
            const int n = n0 + c < p.n ? n0 + c : p.n - 1;
            load_vec<T, VW>(B + n * p.b_sn + k, w[c]);
          }
          FUSEX_UNROLL
          for (int i = 0; i < MT; ++i) {
            const int m = m0 + i < p.m ? m0 + i : p.m - 1;
            float x[VW];
            load_vec<T, VW>(A + m * p.a_sm + k, x);
            FUSEX_UNROLL
            for (int c = 0; c < CW; ++c)
              FUSEX_UNROLL
              for (int l = 0; l < VW; ++l) acc[i * CW + c] = fmaf(x[l], w[c][l], acc[i * CW + c]);
          }
        }
      } else {
        for (int k = lane; k < p.k; k += 32) {
          float w[CW];
          FUSEX_UNROLL
          for (int c = 0; c < CW; ++c) {
            const int n = n0 + c < p.n ? n0 + c : p.n - 1;
            w[c] = convert<float>(B[k * p.b_sk + n * p.b_sn]);
          }
          FUSEX_UNROLL
          for (int i = 0; i < MT; ++i) {
            const int m = m0 + i < p.m ? m0 + i : p.m - 1;
            const float x = convert<float>(A[m * p.a_sm + k * p.a_sk]);
            FUSEX_UNROLL
            for (int c = 0; c < CW; ++c) acc[i * CW + c] = fmaf(x, w[c], acc[i * CW + c]);
          }
        }
      }
      const float v = warp_reduce_scatter(acc, lane);
      const int m = m0 + lane / CW, n = n0 + lane % CW;
      if (m < p.m && n < p.n) {
        coord<std::uint64_t, 3> co;
        co.rank = 3;
        co.c[0] = static_cast<std::uint64_t>(bz);
        co.c[1] = static_cast<std::uint64_t>(m);
        co.c[2] = static_cast<std::uint64_t>(n);
        out.template store<1>(co, epi.template load<1>(co, gemm_context{v}));
      }
    }
  }
}

/// Launches the fusex GEMM kernel for `dst = e` where e's matmul node is `mm`. `ops` holds the
/// destination then the epilogue's leaves, with strides (`s`) in the space [batch, M, N].
template <class T, class D, class E, std::size_t N>
void launch_small_m(const view<D>& dst, const E& e, const matmul_node<T>& mm, const std::array<operand_layout, N>& ops,
                    cudaStream_t stream) {
  const gemm_dims& g = mm.dims;
  const matrix_layout la = matrix_of(mm.a), lb = matrix_of(mm.b);
  small_m_params<T> p{};
  p.a = mm.a.data();
  p.b = mm.b.data();
  p.a_bs = la.batch > 1 ? la.batch_stride : 0;
  p.a_sm = la.row_stride;
  p.a_sk = la.col_stride;
  p.b_bs = lb.batch > 1 ? lb.batch_stride : 0;
  p.b_sk = lb.row_stride;
  p.b_sn = lb.col_stride;
  p.batch = g.batch;
  p.m = static_cast<int>(g.m);
  p.n = static_cast<int>(g.n);
  p.k = static_cast<int>(g.k);
  constexpr int VW = 16 / static_cast<int>(sizeof(T));
  auto aligned = [](const void* ptr) { return reinterpret_cast<std::uintptr_t>(ptr) % 16 == 0; };
  const bool vec = (g.k == 0 || (p.a_sk == 1 && p.b_sk == 1)) && g.k % VW == 0 && aligned(p.a) && aligned(p.b) &&
                   (g.m <= 1 || p.a_sm % VW == 0) && (g.n <= 1 || p.b_sn % VW == 0) && p.a_bs % VW == 0 &&
                   p.b_bs % VW == 0;
  const auto o = make_out_evaluator<std::uint64_t>(dst, ops[0]);
  leaf_strides_source<std::uint64_t> src{ops.data() + 1, 0, 0};
  const auto ev = make_evaluator(e, src);
  using O = std::decay_t<decltype(o)>;
  using V = std::decay_t<decltype(ev)>;
  const int mt = small_m_tile(g.m);
  const int cw = 32 / mt;
  const std::int64_t per_block = std::int64_t{small_m_warps} * cw;
  const dim3 grid(static_cast<unsigned>((g.n + per_block - 1) / per_block),
                  static_cast<unsigned>(g.batch < 65535 ? g.batch : 65535));
  const device_properties& dev = current_device_info();
  const dim3 block(small_m_block);
  if (vec) {
    if (mt == 4) launch_kernel("matmul_small_m_kernel", &small_m_kernel<4, VW, T, O, V>, grid, block, 0, stream, dev, p, o, ev);
    else if (mt == 16) launch_kernel("matmul_small_m_kernel", &small_m_kernel<16, VW, T, O, V>, grid, block, 0, stream, dev, p, o, ev);
    else launch_kernel("matmul_small_m_kernel", &small_m_kernel<32, VW, T, O, V>, grid, block, 0, stream, dev, p, o, ev);
  } else {
    if (mt == 4) launch_kernel("matmul_small_m_kernel", &small_m_kernel<4, 1, T, O, V>, grid, block, 0, stream, dev, p, o, ev);
    else if (mt == 16) launch_kernel("matmul_small_m_kernel", &small_m_kernel<16, 1, T, O, V>, grid, block, 0, stream, dev, p, o, ev);
    else launch_kernel("matmul_small_m_kernel", &small_m_kernel<32, 1, T, O, V>, grid, block, 0, stream, dev, p, o, ev);
  }
}
#endif

}  // namespace fusex::detail
