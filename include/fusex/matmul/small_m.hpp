#pragma once
/// \file
/// fusex's own GEMM kernels for the launch-bound regime (M = 1 to 64 rows, as in a batch-16 MLP):
/// one launch computes the product and applies the whole epilogue, whatever it is, per output
/// element through the epilogue's evaluator (the matmul node evaluates to the kernel's
/// accumulator). It launches through detail::launch_kernel, so programmatic dependent launch
/// applies on sm_90: the weight rows are prefetched into L2 before the grid-dependency wait.
///
/// Work split (latency first: a 16 x 256 x 256 layer must spread over the SMs): a block of 1 to
/// 4 warps owns 32 outputs, MT = 4 or 8 rows x 32 / MT columns, and its warps split K, so every
/// row of `a` and of the weights the tile needs is read once per block, all of a thread's loads in
/// flight together; the grid has M * N / 32 blocks (128 for 16 x 256). A warp reduce-scatter (31
/// shuffles) and one exchange through shared memory finish the sums; warp 0 applies the epilogue
/// and stores. Blocks of one column tile are neighbours, so its weight rows come from L2 for all
/// but the first. A right operand contiguous along N instead of K (attention's `p @ v`) takes the
/// N-major variant, threads along N (small_m_n_major_kernel).

#include <fusex/config.hpp>
#include <fusex/core/dtype.hpp>
#include <fusex/core/view.hpp>
#include <fusex/device/launch.hpp>
#include <fusex/device/evaluator.hpp>
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

  // Every matmul node of an expression is the same product (find_matmul checks), so every gemm
  // value is the one accumulator.
  bool same_data(const gemm_value_eval&) const { return true; }

  template <int V, class Index, int R, class Ctx>
  FUSEX_HD FUSEX_FORCEINLINE vec<compute_type, V> load(const coord<Index, R>&, const Ctx& ctx) const {
    static_assert(std::is_base_of_v<gemm_context, Ctx>,
                  "fusex::matmul: evaluate matmul expressions with fusex::eval, fusex::host::eval or "
                  "fusex::explain with <fusex/matmul.hpp> included (tie() and tensor::assign do not take them)");
    vec<compute_type, V> r;
    FUSEX_UNROLL
    for (int l = 0; l < V; ++l) r.v[l] = static_cast<compute_type>(ctx.value);
    return r;
  }
};

// The matmul node's evaluator (the extension point of leaf_strides_source for terminals of other
// layers).
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
  std::int64_t tiles;  ///< output tiles per matrix: m_tiles * n_tiles
  int m_tiles;         ///< tiles along M (MT rows each)
  int m, n, k;
};

/// The most warps a block of the fusex GEMM kernel has (they split K).
inline constexpr int small_m_max_warps = 4;
inline constexpr int small_m_max_threads = small_m_max_warps * 32;

/// The M-tile (rows per block) the kernel uses for M rows: 4 (x 8 columns) up to M = 4, else 8
/// (x 4 columns). A tile of MT x (32 / MT) outputs reads MT + 32 / MT rows of length K; 4 x 8 and
/// 8 x 4 read the fewest (12), and the number of blocks, M * N / 32, does not depend on the tile.
inline int small_m_tile(std::int64_t m) { return m <= 4 ? 4 : 8; }

/// The warps of a block for reduction length K with `vw` elements per load: enough that each
/// thread has at least one load per row, at most small_m_max_warps.
inline int small_m_block_warps(std::int64_t k, int vw) {
  const std::int64_t per_warp = 32 * std::int64_t{vw};
  const std::int64_t w = (k + per_warp - 1) / per_warp;
  return w < 1 ? 1 : (w > small_m_max_warps ? small_m_max_warps : static_cast<int>(w));
}

/// The longest K the N-major variant walks (it does not split K: each thread walks all of it).
inline constexpr std::int64_t small_m_n_major_max_k = 256;

/// Whether the fusex GEMM kernel runs with its threads along N instead of splitting K: when B
/// [K, N] is contiguous along N but not along K (the `v` of attention, `p @ v`, or any row-major
/// right operand that is not a transposed weight) and K is short. Splitting K there would make
/// every lane's load a separate row of B (one memory transaction each); with lanes along N a
/// warp's load of a row of B is coalesced and A's element is the same address for all lanes. Its
/// grid is ceil(M/4) x ceil(N/128) blocks per matrix, so for a long K (a 16 x 8192 x 256 product:
/// 8 blocks walking 8192 steps) the K split's M*N/32 blocks win despite their scattered loads.
inline bool small_m_threads_along_n(std::int64_t b_sk, std::int64_t b_sn, std::int64_t n, std::int64_t k) {
  return n > 1 && b_sn == 1 && b_sk != 1 && k <= small_m_n_major_max_k;
}

/// Rows per thread of the N-major variant (one instantiation: in the launch-bound regime more,
/// smaller tiles fill the SMs sooner than fewer, larger ones).
inline constexpr int small_m_n_major_rows = 4;

/// Threads per block of the N-major variant: one per column, at most small_m_max_threads.
inline int small_m_n_major_threads(std::int64_t n) {
  const std::int64_t w = (n + 31) / 32;
  return 32 * static_cast<int>(w > small_m_max_warps ? small_m_max_warps : w);
}

#if defined(__CUDACC__)
// One step of warp_reduce_scatter: lanes with bit Off set keep the upper half of the first 2*Off
// values, the others the lower half, each adding its partner's copy.
template <int Off>
FUSEX_DEVICE FUSEX_FORCEINLINE void reduce_scatter_step(float (&acc)[32], int lane) {
  const bool upper = (lane & Off) != 0;
  FUSEX_UNROLL
  for (int i = 0; i < Off; ++i) {
    const float send = upper ? acc[i] : acc[i + Off];
    const float keep = upper ? acc[i + Off] : acc[i];
    acc[i] = keep + __shfl_xor_sync(0xffffffffu, send, Off);
  }
}

// Sum over the warp of 32 values per lane, scattered: lane l returns the total of value l. The
// steps are spelled out (compile-time offsets) so that `acc` stays in registers.
FUSEX_DEVICE FUSEX_FORCEINLINE float warp_reduce_scatter(float (&acc)[32], int lane) {
  reduce_scatter_step<16>(acc, lane);
  reduce_scatter_step<8>(acc, lane);
  reduce_scatter_step<4>(acc, lane);
  reduce_scatter_step<2>(acc, lane);
  reduce_scatter_step<1>(acc, lane);
  return acc[0];
}

template <class T, int VW>
FUSEX_DEVICE FUSEX_FORCEINLINE void load_vec(const T* p, float (&out)[VW]) {
  const aligned_vec<T, VW> raw = *reinterpret_cast<const aligned_vec<T, VW>*>(p);
  FUSEX_UNROLL
  for (int l = 0; l < VW; ++l) out[l] = convert<float>(raw.v[l]);
}

/// One block computes a tile of MT rows x CW = 32 / MT columns of one matrix of the batch (then
/// the next tile, grid-stride). Its warps split K: thread t accumulates all 32 outputs over
/// k = t*VW + j*threads*VW (VW > 1: 16-byte loads along K, unit K stride and aligned rows; VW ==
/// 1: element loads with any strides), so the block reads its MT rows of `a` and CW rows of `b`
/// once, each load of all of them in flight together. A warp reduce-scatter (31 shuffles) leaves
/// each lane one output of its warp's partial sums; warp 0 adds the other warps' (shared memory,
/// fixed order: results do not depend on timing), applies the epilogue and stores.
template <int MT, int VW, class T, class Out, class Epi>
__global__ void __launch_bounds__(small_m_max_threads)
    small_m_kernel(const small_m_params<T> p, const Out out, const Epi epi) {
  constexpr int CW = 32 / MT;
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int threads = static_cast<int>(blockDim.x);
  const int warps = threads >> 5;
  __shared__ float partial[small_m_max_warps - 1][32];
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // Before the grid-dependency wait, only an L2 prefetch of this block's first weight rows: the
  // weights usually do not depend on the previous kernel, but they may (an optimiser step just
  // before), and a prefetch is coherent with that kernel's writes where a load into registers
  // would not be. The loads after the wait then hit L2, in the same round trip as the loads of a.
  if (p.b_sk == 1 && static_cast<std::int64_t>(blockIdx.x) < p.tiles) {
    const int n0 = static_cast<int>(static_cast<std::int64_t>(blockIdx.x) / p.m_tiles) * CW;
    const std::int64_t row_bytes = std::int64_t{p.k} * static_cast<std::int64_t>(sizeof(T));
    const T* B = p.b + static_cast<std::int64_t>(blockIdx.z) * p.b_bs;
    FUSEX_UNROLL
    for (int c = 0; c < CW; ++c) {
      if (n0 + c >= p.n) break;
      const char* row = reinterpret_cast<const char*>(B + std::int64_t{n0 + c} * p.b_sn);
      for (std::int64_t off = std::int64_t{tid} * 128; off < row_bytes; off += std::int64_t{threads} * 128)
        asm volatile("prefetch.global.L2 [%0];" ::"l"(row + off));
    }
  }
#endif
  pdl_begin();
  for (std::int64_t bz = blockIdx.z; bz < p.batch; bz += gridDim.z) {
    const T* A = p.a + bz * p.a_bs;
    const T* B = p.b + bz * p.b_bs;
    for (std::int64_t tile = blockIdx.x; tile < p.tiles; tile += gridDim.x) {
      // Neighbouring blocks take the M-tiles of one column tile: they share its weight rows in L2.
      const int m0 = static_cast<int>(tile % p.m_tiles) * MT;
      const int n0 = static_cast<int>(tile / p.m_tiles) * CW;
      // Out-of-range rows and columns read the last valid one (no branches in the loop); their
      // results are not stored.
      const T* arow[MT];
      const T* brow[CW];
      FUSEX_UNROLL
      for (int i = 0; i < MT; ++i) arow[i] = A + std::int64_t{m0 + i < p.m ? m0 + i : p.m - 1} * p.a_sm;
      FUSEX_UNROLL
      for (int c = 0; c < CW; ++c) brow[c] = B + std::int64_t{n0 + c < p.n ? n0 + c : p.n - 1} * p.b_sn;
      float acc[32];
      FUSEX_UNROLL
      for (int i = 0; i < 32; ++i) acc[i] = 0.0f;
      if constexpr (VW > 1) {
        for (int k = tid * VW; k < p.k; k += threads * VW) {
          float w[CW][VW];
          float x[MT][VW];
          FUSEX_UNROLL
          for (int c = 0; c < CW; ++c) load_vec<T, VW>(brow[c] + k, w[c]);
          FUSEX_UNROLL
          for (int i = 0; i < MT; ++i) load_vec<T, VW>(arow[i] + k, x[i]);
          FUSEX_UNROLL
          for (int i = 0; i < MT; ++i) FUSEX_UNROLL
          for (int c = 0; c < CW; ++c) FUSEX_UNROLL
          for (int l = 0; l < VW; ++l) acc[i * CW + c] = fmaf(x[i][l], w[c][l], acc[i * CW + c]);
        }
      } else {
        for (int k = tid; k < p.k; k += threads) {
          float w[CW];
          float x[MT];
          FUSEX_UNROLL
          for (int c = 0; c < CW; ++c) w[c] = convert<float>(brow[c][std::int64_t{k} * p.b_sk]);
          FUSEX_UNROLL
          for (int i = 0; i < MT; ++i) x[i] = convert<float>(arow[i][std::int64_t{k} * p.a_sk]);
          FUSEX_UNROLL
          for (int i = 0; i < MT; ++i) FUSEX_UNROLL
          for (int c = 0; c < CW; ++c) acc[i * CW + c] = fmaf(x[i], w[c], acc[i * CW + c]);
        }
      }
      float v = warp_reduce_scatter(acc, lane);
      if (warps > 1) {
        if (warp > 0) partial[warp - 1][lane] = v;
        __syncthreads();
        if (warp == 0)
          for (int j = 1; j < warps; ++j) v += partial[j - 1][lane];
      }
      const int m = m0 + lane / CW, n = n0 + lane % CW;
      if (warp == 0 && m < p.m && n < p.n) {
        coord<std::uint64_t, 3> co;
        co.rank = 3;
        co.c[0] = static_cast<std::uint64_t>(bz);
        co.c[1] = static_cast<std::uint64_t>(m);
        co.c[2] = static_cast<std::uint64_t>(n);
        out.template store<1>(co, load_scope<1>(epi, co, gemm_context{v}));
      }
      if (warps > 1) __syncthreads();  // `partial` is rewritten for the next tile
    }
  }
}

/// The N-major variant: thread t of a block owns column n0 + t and MT rows m0..m0+MT-1 of one
/// matrix of the batch, and walks K; per step it loads B[k, n] (lanes adjacent along N: one
/// coalesced load per warp) and A[m, k] for its MT rows (the same address in every lane: a
/// broadcast). Four steps of K are unrolled so that their loads are in flight together. No
/// cross-thread reduction: each thread applies the epilogue to its own MT outputs.
template <int MT, class T, class Out, class Epi>
__global__ void __launch_bounds__(small_m_max_threads)
    small_m_n_major_kernel(const small_m_params<T> p, const Out out, const Epi epi, const int n_blocks) {
  pdl_begin();
  const int tid = static_cast<int>(threadIdx.x);
  for (std::int64_t bz = blockIdx.z; bz < p.batch; bz += gridDim.z) {
    const T* A = p.a + bz * p.a_bs;
    const T* B = p.b + bz * p.b_bs;
    for (std::int64_t tile = blockIdx.x; tile < p.tiles; tile += gridDim.x) {
      // Neighbouring blocks take the column blocks of one M-tile: they share its rows of A.
      const int m0 = static_cast<int>(tile / n_blocks) * MT;
      const int n = static_cast<int>(tile % n_blocks) * static_cast<int>(blockDim.x) + tid;
      // Out-of-range rows and columns read the last valid one (no branches in the loop); their
      // results are not stored.
      const T* arow[MT];
      FUSEX_UNROLL
      for (int i = 0; i < MT; ++i) arow[i] = A + std::int64_t{m0 + i < p.m ? m0 + i : p.m - 1} * p.a_sm;
      const T* bcol = B + (n < p.n ? n : p.n - 1);
      float acc[MT];
      FUSEX_UNROLL
      for (int i = 0; i < MT; ++i) acc[i] = 0.0f;
      constexpr int U = 4;
      int k = 0;
      for (; k + U <= p.k; k += U) {
        float w[U];
        float x[MT][U];
        FUSEX_UNROLL
        for (int u = 0; u < U; ++u) w[u] = convert<float>(bcol[std::int64_t{k + u} * p.b_sk]);
        FUSEX_UNROLL
        for (int i = 0; i < MT; ++i) FUSEX_UNROLL
        for (int u = 0; u < U; ++u) x[i][u] = convert<float>(arow[i][std::int64_t{k + u} * p.a_sk]);
        FUSEX_UNROLL
        for (int u = 0; u < U; ++u) FUSEX_UNROLL
        for (int i = 0; i < MT; ++i) acc[i] = fmaf(x[i][u], w[u], acc[i]);
      }
      for (; k < p.k; ++k) {
        const float w = convert<float>(bcol[std::int64_t{k} * p.b_sk]);
        FUSEX_UNROLL
        for (int i = 0; i < MT; ++i) acc[i] = fmaf(convert<float>(arow[i][std::int64_t{k} * p.a_sk]), w, acc[i]);
      }
      if (n < p.n) {
        FUSEX_UNROLL
        for (int i = 0; i < MT; ++i) {
          if (m0 + i >= p.m) break;
          coord<std::uint64_t, 3> co;
          co.rank = 3;
          co.c[0] = static_cast<std::uint64_t>(bz);
          co.c[1] = static_cast<std::uint64_t>(m0 + i);
          co.c[2] = static_cast<std::uint64_t>(n);
          out.template store<1>(co, load_scope<1>(epi, co, gemm_context{acc[i]}));
        }
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
  const auto o = make_out_evaluator<std::uint64_t>(dst, ops[0]);
  leaf_strides_source<std::uint64_t> src{ops.data() + 1, 0, 0};
  const auto ev = build_evaluator(e, src);
  using O = std::decay_t<decltype(o)>;
  using V = std::decay_t<decltype(ev)>;
  const device_properties& dev = current_device_info();
  constexpr std::int64_t max_grid_x = std::int64_t{1} << 30;  // more tiles: grid-stride
  const auto grid_z = static_cast<unsigned>(g.batch < 65535 ? g.batch : 65535);
  if (small_m_threads_along_n(p.b_sk, p.b_sn, g.n, g.k)) {
    const std::int64_t m_tiles = (g.m + small_m_n_major_rows - 1) / small_m_n_major_rows;
    p.m_tiles = static_cast<int>(m_tiles);
    const int threads = small_m_n_major_threads(g.n);
    const std::int64_t n_blocks = (g.n + threads - 1) / threads;
    p.tiles = m_tiles * n_blocks;
    const dim3 grid(static_cast<unsigned>(p.tiles < max_grid_x ? p.tiles : max_grid_x), 1u, grid_z);
    const dim3 block(static_cast<unsigned>(threads));
    const int nb = static_cast<int>(n_blocks);
    launch_kernel("matmul_small_m_n_major_kernel", &small_m_n_major_kernel<small_m_n_major_rows, T, O, V>, grid, block,
                  0, stream, dev, p, o, ev, nb);
    return;
  }
  constexpr int VW = 16 / static_cast<int>(sizeof(T));
  auto aligned = [](const void* ptr) { return reinterpret_cast<std::uintptr_t>(ptr) % 16 == 0; };
  const bool vec = (g.k == 0 || (p.a_sk == 1 && p.b_sk == 1)) && g.k % VW == 0 && aligned(p.a) && aligned(p.b) &&
                   (g.m <= 1 || p.a_sm % VW == 0) && (g.n <= 1 || p.b_sn % VW == 0) && p.a_bs % VW == 0 &&
                   p.b_bs % VW == 0;
  const int mt = small_m_tile(g.m);
  const std::int64_t m_tiles = (g.m + mt - 1) / mt;
  p.m_tiles = static_cast<int>(m_tiles);
  const int cw = 32 / mt;
  const std::int64_t n_tiles = (g.n + cw - 1) / cw;
  p.tiles = m_tiles * n_tiles;
  const dim3 grid(static_cast<unsigned>(p.tiles < max_grid_x ? p.tiles : max_grid_x), 1u, grid_z);
  const dim3 block(static_cast<unsigned>(32 * small_m_block_warps(g.k, vec ? VW : 1)));
  if (vec) {
    if (mt == 4)
      launch_kernel("matmul_small_m_kernel", &small_m_kernel<4, VW, T, O, V>, grid, block, 0, stream, dev, p, o, ev);
    else launch_kernel("matmul_small_m_kernel", &small_m_kernel<8, VW, T, O, V>, grid, block, 0, stream, dev, p, o, ev);
  } else {
    if (mt == 4)
      launch_kernel("matmul_small_m_kernel", &small_m_kernel<4, 1, T, O, V>, grid, block, 0, stream, dev, p, o, ev);
    else launch_kernel("matmul_small_m_kernel", &small_m_kernel<8, 1, T, O, V>, grid, block, 0, stream, dev, p, o, ev);
  }
}
#endif

}  // namespace fusex::detail
