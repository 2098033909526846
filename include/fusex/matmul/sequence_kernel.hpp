#pragma once
/// \file
/// The persistent kernel of fusex::layer_sequence (sequence.hpp): a chain of small linear layers
/// (y = act(x w^T + b), float32) run by one launch, one thread-block cluster per 16 rows.
///
/// Why a cluster: every output of a layer needs every output of the one before, so the layers of a
/// chain are separated by an all-to-all exchange. Across a grid that exchange goes through L2 with
/// a global barrier (about a microsecond per layer); inside a cluster (sm_90) it goes through
/// distributed shared memory. Block r of a cluster of C blocks owns output columns
/// [r N/C, (r+1) N/C) of each layer: its weight slice is copied into shared memory by the bulk-copy
/// engine one layer ahead (cp.async.bulk on an mbarrier, a few instructions per layer), its
/// products run on the tensor cores (bfloat16 and half: mma m16n8k16; float32: three TF32 products
/// per term, "3xTF32", whose error is of float32's order), and it sends its slice of the output
/// to every other block with st.async, which counts the bytes on the receiver's mbarrier. A block
/// starts layer l+1 once the bytes of all slices of layer l have arrived: the exchange is
/// point-to-point, with no cluster-wide barrier per layer. Two input buffers suffice: a block can
/// only send layer l+1's slice after it has every block's slice of layer l, which each block sends
/// after it has finished reading its own input of layer l. Rows are independent, so clusters never
/// wait for each other (no grid-wide co-residency is needed).

#include <fusex/config.hpp>
#include <fusex/core/dtype.hpp>
#include <fusex/device/launch.hpp>
#include <fusex/error.hpp>
#include <fusex/expr/ops.hpp>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <type_traits>

namespace fusex {

/// The activation applied after a layer of a fusex::layer_sequence (the same functions as
/// fusex::relu, fusex::gelu and fusex::silu).
enum class activation : int { none, relu, gelu, silu };

namespace detail {

/// Rows of the input one cluster owns (the product's M-tile, the tensor-core instructions' M).
inline constexpr int seq_rows = 16;
/// Threads of a block: 8 warps, each one 8-column tile of the block's slice over a part of K.
inline constexpr int seq_threads = 256;
inline constexpr int seq_warps = seq_threads / 32;
/// Layers one launch takes (their descriptors are kernel parameters, within CUDA's 4 KiB: larger
/// parameter blocks need CUDA 12.1 and a recent driver).
inline constexpr int seq_max_layers = 112;
/// The K of one tensor-core step for an element of `elem_bytes` bytes (TF32 m16n8k8, 16-bit m16n8k16).
FUSEX_HD constexpr int seq_kstep(int elem_bytes) { return elem_bytes == 4 ? 8 : 16; }

/// One layer as the kernel reads it: w [n, k] with rows `w_ld` apart (16-byte aligned rows),
/// bias [n] or null; T is float, half or bfloat16.
template <class T>
struct seq_layer {
  const T* w;
  const T* bias;
  std::int32_t w_ld;  // (the host takes the per-layer path where it does not fit)
  std::int32_t k, n;
  std::int32_t act;
};
template <class T>
struct seq_params {
  const T* x;
  T* y;
  std::int64_t x_ld, y_ld, m;
  std::int32_t n_layers;
  std::int32_t pitch;      // elements between rows of the shared weight slices (T)
  std::int32_t nc_max;     // the widest slice a block owns (max over layers of n / C)
  std::int32_t act_pitch;  // floats between rows of the shared inputs (seq_act_pitch)
  seq_layer<T> layers[seq_max_layers];
};
static_assert(sizeof(seq_params<float>) <= 4096 && sizeof(seq_params<half>) <= 4096,
              "fusex: layer_sequence's kernel parameters must fit CUDA's 4 KiB");

/// Elements between rows of the shared buffers for inputs of up to k_max: 16 bytes past a multiple
/// of 128 bytes of T (rows 16-byte aligned for the bulk copies; neighbouring rows 4 banks apart, so
/// a tensor-core fragment's eight rows x four 4-byte words take all 32 banks once).
inline int seq_pitch(std::int64_t k_max, int elem_bytes) {
  const std::int64_t line = 128 / elem_bytes;
  return static_cast<int>((k_max + line - 1) / line * line + 16 / elem_bytes);
}
/// Floats between rows of the shared inputs: as seq_pitch for float32 products; for 16-bit ones,
/// whose fragments read pairs of floats (8 bytes), rows 8 banks apart.
inline int seq_act_pitch(std::int64_t k_max, int elem_bytes) {
  return seq_pitch(k_max, 4) + (elem_bytes == 4 ? 0 : 4);
}
/// The shared memory of one block, in bytes, in this order: two input buffers [seq_rows][act_pitch]
/// (float), two weight slices [nc_max][pitch] (T), the K-split partial sums (seq_warps / (nc / 8)
/// parts of [seq_rows][nc] floats: 4 KiB whatever nc).
struct seq_layout {
  std::size_t act, w, red, bytes;  // byte offsets, and the total
  FUSEX_HD seq_layout(int act_pitch, int pitch, int nc_max, int elem_bytes) {
    const auto p = static_cast<std::size_t>(pitch), nc = static_cast<std::size_t>(nc_max);
    const auto e = static_cast<std::size_t>(elem_bytes);
    act = 0;
    w = act + 2 * seq_rows * static_cast<std::size_t>(act_pitch) * sizeof(float);
    red = w + 2 * nc * p * e;
    bytes = red + std::size_t{seq_rows} * 8 * seq_warps * sizeof(float);
  }
};

/// Why a layer of N outputs and K inputs cannot run in the persistent kernel with clusters of C
/// blocks ("" when it can): each block owns nc = N / C columns, one 8-column tensor-core tile per
/// warp (nc of 8, 16, 32 or 64; the warps of a tile split K), K in whole tensor-core steps.
inline std::string seq_layer_misfit(std::int64_t k, std::int64_t n, int c, int elem_bytes = 4) {
  if (n % c != 0) return "N = " + std::to_string(n) + " is not a multiple of the cluster size " + std::to_string(c);
  const std::int64_t nc = n / c;
  if (nc != 8 && nc != 16 && nc != 32 && nc != 64) {
    return "N / cluster size = " + std::to_string(nc) + " is not one of 8, 16, 32, 64";
  }
  const int kstep = seq_kstep(elem_bytes);
  if (k % kstep != 0) {
    return "K = " + std::to_string(k) + " is not a multiple of " + std::to_string(kstep) +
           " (the K of one tensor-core step)";
  }
  return {};
}

#if defined(__CUDACC__)

FUSEX_DEVICE FUSEX_FORCEINLINE float seq_activate(float v, int act) {
  switch (act) {
    case static_cast<int>(activation::relu): return ops::relu{}(v);
    case static_cast<int>(activation::gelu): return ops::gelu{}(v);
    case static_cast<int>(activation::silu): return ops::silu{}(v);
    default: return v;
  }
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
// The sm_90 primitives, as PTX (cooperative_groups' cluster API and cuda::barrier are the same
// instructions behind heavier headers).
FUSEX_DEVICE FUSEX_FORCEINLINE unsigned seq_smem(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
FUSEX_DEVICE FUSEX_FORCEINLINE unsigned seq_cluster_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
FUSEX_DEVICE FUSEX_FORCEINLINE unsigned seq_cluster_size() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(r));
  return r;
}
/// All threads of all blocks of the cluster: writes before (to any block's shared memory) are
/// visible to reads after.
FUSEX_DEVICE FUSEX_FORCEINLINE void seq_cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
/// The shared-memory address `local` (this block's) in block `rank`'s shared memory.
FUSEX_DEVICE FUSEX_FORCEINLINE unsigned seq_map_rank(unsigned local, unsigned rank) {
  unsigned remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(rank));
  return remote;
}
FUSEX_DEVICE FUSEX_FORCEINLINE void seq_mbar_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
/// This block's one arrival on `bar` for the phase, which then also waits for `bytes` more bytes.
FUSEX_DEVICE FUSEX_FORCEINLINE void seq_mbar_expect(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
/// Waits for the phase of `bar` with this parity to complete; what was written into this block's
/// shared memory for it (by any block of the cluster, or a bulk copy) is then visible.
FUSEX_DEVICE FUSEX_FORCEINLINE void seq_mbar_wait(unsigned bar, unsigned parity) {
  asm volatile(
      "{\n\t.reg .pred p;\n"
      "SEQ_WAIT:\n\t"
      "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%0], %1;\n\t"
      "@!p bra SEQ_WAIT;\n}" ::"r"(bar),
      "r"(parity)
      : "memory");
}
/// `bytes` (a multiple of 16) from global `src` to this block's shared `dst` by the bulk-copy
/// engine, counted on `bar`.
FUSEX_DEVICE FUSEX_FORCEINLINE void seq_bulk_copy(unsigned dst, const void* src, unsigned bytes, unsigned bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(bar)
               : "memory");
}
/// 16 bytes into another block's shared memory (`addr`), counted on its mbarrier `bar`.
FUSEX_DEVICE FUSEX_FORCEINLINE void seq_store_remote(unsigned addr, float4 v, unsigned bar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], {%1, %2, %3, %4}, [%5];" ::"r"(addr),
               "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w), "r"(bar)
               : "memory");
}

FUSEX_DEVICE FUSEX_FORCEINLINE unsigned seq_tf32(float x) {
  unsigned r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}
/// x = big + small, both TF32. Where big is not finite (x infinite or NaN) small is 0, so that the
/// products are those of x (inf - inf would make small, and the sum, NaN).
FUSEX_DEVICE FUSEX_FORCEINLINE void seq_split_tf32(float x, unsigned& big, unsigned& small) {
  big = seq_tf32(x);
  const float r = x - __uint_as_float(big);
  small = seq_tf32(r - r == 0.0f ? r : 0.0f);
}
/// Two floats (exactly representable in T) as T's packed pair, the lower k in the low half.
template <class T>
FUSEX_DEVICE FUSEX_FORCEINLINE unsigned seq_pack(float2 v) {
  unsigned r;
  if constexpr (std::is_same_v<T, bfloat16>) asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(v.y), "f"(v.x));
  else asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(v.y), "f"(v.x));
  return r;
}

/// One warp's product for an 8-column tile: d (the m16n8 accumulator fragment) += rows a0 (row g)
/// and a1 (row g + 8) of the input times the tile's weight row wr (column g), k-steps [s0, s1);
/// g = lane / 4, q = lane % 4 (PTX's fragment layouts).
FUSEX_DEVICE FUSEX_FORCEINLINE void seq_tile_product(const float* a0, const float* a1, const float* wr, int s0, int s1,
                                                     int q, float (&d)[4]) {
  // 3xTF32: x = big + small (both TF32); big*big + big*small + small*big leaves out small*small
  // (2^-22 of the product) and is as accurate as float32's FMAs for these sums. The three
  // products go to three accumulators (independent chains of tensor-core instructions, not one
  // three times as long), the small terms added first at the end.
  float e[4] = {0.0f, 0.0f, 0.0f, 0.0f}, f[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#define FUSEX_SEQ_MMA(D, A, B)                                                                                 \
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, " \
               "{%0, %1, %2, %3};"                                                                             \
               : "+f"(D[0]), "+f"(D[1]), "+f"(D[2]), "+f"(D[3])                                                \
               : "r"(A[0]), "r"(A[1]), "r"(A[2]), "r"(A[3]), "r"(B[0]), "r"(B[1]))
  for (int s = s0; s < s1; ++s) {
    const int k = 8 * s + q;
    const float av[4] = {a0[k], a1[k], a0[k + 4], a1[k + 4]};
    const float bv[2] = {wr[k], wr[k + 4]};
    unsigned ab[4], as[4], bb[2], bs[2];
#pragma unroll
    for (int i = 0; i < 4; ++i) seq_split_tf32(av[i], ab[i], as[i]);
#pragma unroll
    for (int i = 0; i < 2; ++i) seq_split_tf32(bv[i], bb[i], bs[i]);
    FUSEX_SEQ_MMA(e, as, bb);
    FUSEX_SEQ_MMA(f, ab, bs);
    FUSEX_SEQ_MMA(d, ab, bb);
  }
#undef FUSEX_SEQ_MMA
#pragma unroll
  for (int i = 0; i < 4; ++i) d[i] += e[i] + f[i];
}
template <class T>
FUSEX_DEVICE FUSEX_FORCEINLINE void seq_tile_product(const float* a0, const float* a1, const T* wr, int s0, int s1,
                                                     int q, float (&d)[4]) {
  for (int s = s0; s < s1; ++s) {
    const int k = 16 * s + 2 * q;
    const unsigned a[4] = {seq_pack<T>(*reinterpret_cast<const float2*>(a0 + k)),
                           seq_pack<T>(*reinterpret_cast<const float2*>(a1 + k)),
                           seq_pack<T>(*reinterpret_cast<const float2*>(a0 + k + 8)),
                           seq_pack<T>(*reinterpret_cast<const float2*>(a1 + k + 8))};
    const unsigned b0 = *reinterpret_cast<const unsigned*>(wr + k), b1 = *reinterpret_cast<const unsigned*>(wr + k + 8);
    if constexpr (std::is_same_v<T, bfloat16>) {
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
          "{%0, %1, %2, %3};"
          : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
          : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    } else {
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
          "{%0, %1, %2, %3};"
          : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
          : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
  }
}

/// Warp 0 issues the bulk copies of block `rank`'s slice of a layer's weights (nc rows of K) into
/// `w_s`, counted on `bar` (lane 0 arms it with the slice's bytes first).
template <class T>
FUSEX_DEVICE FUSEX_FORCEINLINE void seq_load_slice(const seq_layer<T>& L, int nc, int rank, int pitch, T* w_s,
                                                   unsigned bar, int lane) {
  const unsigned row_bytes = static_cast<unsigned>(L.k) * sizeof(T);
  if (lane == 0) seq_mbar_expect(bar, row_bytes * static_cast<unsigned>(nc));
  __syncwarp();
  // The slice's previous contents were read through the generic proxy (ordered before by a block
  // barrier); the bulk copy writes through the async proxy.
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  const T* w0 = L.w + static_cast<std::int64_t>(rank) * nc * L.w_ld;
  for (int row = lane; row < nc; row += 32)
    seq_bulk_copy(seq_smem(w_s + row * pitch), w0 + static_cast<std::int64_t>(row) * L.w_ld, row_bytes, bar);
}
#endif

/// The kernel: launched with clusters of C blocks along x (C a power of two dividing every layer's
/// N; see seq_layer_misfit), gridDim.x / C clusters of seq_rows rows each, T the dtype of x, y,
/// the weights and biases (the sums and the activations between layers are float32, rounded to T
/// as each layer's output).
template <class T>
__global__ void __launch_bounds__(seq_threads) layer_sequence_kernel(const __grid_constant__ seq_params<T> p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ float4 seq_smem4[];
  // [b]: weight slice b has arrived; [2 + b]: the other blocks' slices of input buffer b have.
  __shared__ alignas(8) unsigned long long bars[4];
  char* const smem = reinterpret_cast<char*>(seq_smem4);
  const int pitch = p.pitch, apitch = p.act_pitch;
  const seq_layout lay(apitch, pitch, p.nc_max, static_cast<int>(sizeof(T)));
  // Buffer b of each pair at base + b * size (arithmetic, not arrays: those would live in local memory).
  float* const act_s = reinterpret_cast<float*>(smem + lay.act);  // 2 x [seq_rows][apitch]
  T* const w_s = reinterpret_cast<T*>(smem + lay.w);              // 2 x [nc_max][pitch]
  float* const red = reinterpret_cast<float*>(smem + lay.red);    // parts x [seq_rows][nc]
  const int act_size = seq_rows * apitch, w_size = p.nc_max * pitch;
  const int t = static_cast<int>(threadIdx.x), lane = t & 31, warp = t >> 5;
  const int C = static_cast<int>(seq_cluster_size()), log_c = __ffs(C) - 1;
  const int rank = static_cast<int>(seq_cluster_rank());
  const std::int64_t m0 = static_cast<std::int64_t>(blockIdx.x >> log_c) * seq_rows;
  const unsigned bar0 = seq_smem(&bars[0]);
  const auto bar = [&](int i) { return bar0 + 8u * static_cast<unsigned>(i); };
  // Bytes of the other blocks' slices of layer l's output (the input of layer l + 1).
  const auto exchange_bytes = [&](int l) {
    return static_cast<unsigned>((C - 1) * seq_rows * (p.layers[l].n >> log_c)) * 4u;
  };

  // Before the grid-dependency wait only an L2 prefetch of the first weights: the kernel before
  // this one may still be writing them (a copy into shared memory now could read stale values).
  {
    const seq_layer<T>& L0 = p.layers[0];
    const int nc = L0.n >> log_c;
    const T* w0 = L0.w + static_cast<std::int64_t>(rank) * nc * L0.w_ld;
    constexpr int line = 128 / static_cast<int>(sizeof(T));
    for (int row = t; row < nc; row += seq_threads) {
      for (int off = 0; off < L0.k; off += line)
        asm volatile("prefetch.global.L2 [%0];" ::"l"(w0 + static_cast<std::int64_t>(row) * L0.w_ld + off));
    }
  }
  if (t == 0) {
    for (int i = 0; i < 4; ++i) seq_mbar_init(bar(i), 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    // Armed for the inputs of layers 1 (buffer 1) and 2 (buffer 0) before any block can send.
    if (p.n_layers > 1) seq_mbar_expect(bar(3), exchange_bytes(0));
    if (p.n_layers > 2) seq_mbar_expect(bar(2), exchange_bytes(1));
  }
  pdl_begin();
  __syncthreads();
  if (warp == 0) seq_load_slice(p.layers[0], p.layers[0].n >> log_c, rank, pitch, w_s, bar(0), lane);
  // This cluster's rows of x (rows past M are zeros: their outputs are computed and dropped).
  {
    const int k0 = p.layers[0].k;
    for (int i = t; i < seq_rows * k0; i += seq_threads) {
      const int r = i / k0, kk = i - r * k0;
      act_s[r * apitch + kk] = m0 + r < p.m ? convert<float>(p.x[(m0 + r) * p.x_ld + kk]) : 0.0f;
    }
  }
  // Every block of the cluster has started, with its barriers armed, before anyone sends to it.
  seq_cluster_sync();

  const int g = lane >> 2, q = lane & 3;
  unsigned w_parity = 0, x_parity = 0;  // bit b: the parity of the next wait on weight / input buffer b
  for (int l = 0; l < p.n_layers; ++l) {
    const seq_layer<T>& L = p.layers[l];
    const int nc = L.n >> log_c, log_nc = __ffs(nc) - 1;
    const int cur = l & 1;
    const bool last = l + 1 == p.n_layers;
    if (!last && warp == 0) {
      // Layer l+1's slice goes to the buffer layer l-1 used (every thread of this block is done
      // with it: it passed the block barrier after layer l-1's products).
      const seq_layer<T>& N = p.layers[l + 1];
      seq_load_slice(N, N.n >> log_c, rank, pitch, w_s + (1 - cur) * w_size, bar(1 - cur), lane);
    }
    // This thread's first output's bias, loaded while the products run.
    const int outs = seq_rows * nc;
    const float bias0 = L.bias != nullptr && t < outs ? convert<float>(L.bias[rank * nc + (t & (nc - 1))]) : 0.0f;
    seq_mbar_wait(bar(cur), (w_parity >> cur) & 1u);
    w_parity ^= 1u << cur;
    if (l > 0) {
      seq_mbar_wait(bar(2 + cur), (x_parity >> cur) & 1u);
      x_parity ^= 1u << cur;
      // Re-armed for layer l+2's input before this block sends layer l's slice (which the others
      // need before they can send theirs of layer l+1).
      if (t == 0 && l + 2 < p.n_layers) seq_mbar_expect(bar(2 + cur), exchange_bytes(l + 1));
    }

    // Warp w: 8-column tile w % tiles, part w / tiles of the K-steps.
    const int tiles = nc >> 3, tile = warp & (tiles - 1), parts = seq_warps / tiles, part = warp / tiles;
    const int steps = L.k / seq_kstep(static_cast<int>(sizeof(T)));
    const float* const a = act_s + cur * act_size;
    const T* const wr = w_s + cur * w_size + (8 * tile + g) * pitch;
    float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    seq_tile_product(a + g * apitch, a + (g + 8) * apitch, wr, part * steps / parts, (part + 1) * steps / parts, q, d);
    float* const rp = red + part * outs;
    *reinterpret_cast<float2*>(rp + g * nc + 8 * tile + 2 * q) = make_float2(d[0], d[1]);
    *reinterpret_cast<float2*>(rp + (g + 8) * nc + 8 * tile + 2 * q) = make_float2(d[2], d[3]);
    __syncthreads();

    // Output (r, c) of the slice: the K parts' sums in order, then bias and activation.
    float* const next = act_s + (1 - cur) * act_size;
    for (int o = t; o < outs; o += seq_threads) {
      const int r = o >> log_nc, c = o & (nc - 1);
      float s = 0.0f;
      for (int i = 0; i < parts; ++i) s += red[i * outs + o];
      if (L.bias != nullptr) s += o == t ? bias0 : convert<float>(L.bias[rank * nc + c]);
      // Rounded to T as the per-layer path stores each layer's output.
      const T v = convert<T>(seq_activate(s, L.act));
      const int col = rank * nc + c;
      if (last) {
        if (m0 + r < p.m) p.y[(m0 + r) * p.y_ld + col] = v;
      } else {
        next[r * apitch + col] = convert<float>(v);
      }
    }
    if (!last) {
      // The slice goes to the other blocks in 16-byte pieces, each block starting with a different
      // destination (so that the cluster's stores spread over its blocks rather than queue at one).
      __syncthreads();
      const int log_quads = log_nc - 2, log_pieces = log_nc + 2;
      const unsigned next_bar = bar(2 + (1 - cur));
      for (int i = t; i < (C - 1) << log_pieces; i += seq_threads) {
        const auto dst = static_cast<unsigned>((rank + 1 + (i >> log_pieces)) & (C - 1));
        const int piece = i & ((1 << log_pieces) - 1);
        const float* src = next + (piece >> log_quads) * apitch + rank * nc + 4 * (piece & ((1 << log_quads) - 1));
        seq_store_remote(seq_map_rank(seq_smem(src), dst), *reinterpret_cast<const float4*>(src),
                         seq_map_rank(next_bar, dst));
      }
    }
  }
  // No block leaves while stores it sent may still be in flight.
  seq_cluster_sync();
#else
  (void)p;
  __trap();  // the host never launches it below sm_90 (layer_sequence falls back)
#endif
}

/// A configuration of `blocks` blocks of the kernel in clusters of `c`, `shared` bytes of dynamic
/// shared memory each: attr[0] is the cluster dimension (attr[1] is free for the caller).
inline cudaLaunchConfig_t seq_cluster_config(std::int64_t blocks, int c, std::size_t shared,
                                             cudaLaunchAttribute (&attr)[2]) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(blocks));
  cfg.blockDim = dim3(seq_threads);
  cfg.dynamicSmemBytes = shared;
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = static_cast<unsigned>(c);
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cfg;
}

/// Launches the kernel: `clusters` clusters of `c` blocks, `shared` bytes of dynamic shared memory
/// each, with the PDL attribute where enabled.
template <class T>
void launch_layer_sequence(const seq_params<T>& p, int c, std::int64_t clusters, std::size_t shared,
                           cudaStream_t stream) {
  cudaLaunchAttribute attr[2];
  cudaLaunchConfig_t cfg = seq_cluster_config(clusters * c, c, shared, attr);
  cfg.stream = stream;
  if (programmatic_dependent_launch()) {
    attr[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[1].val.programmaticStreamSerializationAllowed = 1;
    cfg.numAttrs = 2;
  }
  const cudaError_t err = cudaLaunchKernelEx(&cfg, layer_sequence_kernel<T>, p);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    throw cuda_error(err, "cudaLaunchKernelEx(layer_sequence_kernel, thread-block clusters)", __FILE__, __LINE__);
  }
  note_launch();
}

/// The architecture the kernel for T was compiled for on the current device (e.g. 90), 0 where it
/// has no image there: an sm_80 or PTX-only build runs the kernel's sm_80 body, which traps.
template <class T>
int seq_kernel_arch() {
  cudaFuncAttributes a{};
  const cudaError_t err = cudaFuncGetAttributes(&a, layer_sequence_kernel<T>);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return a.ptxVersion < a.binaryVersion ? a.ptxVersion : a.binaryVersion;
}

/// The dynamic shared memory a block of the kernel may ask for on a device that allows `opt_in`
/// bytes per block: less the kernel's static shared memory (its mbarriers).
template <class T>
int seq_dynamic_shared_limit(int opt_in) {
  cudaFuncAttributes a{};
  FUSEX_CUDA_CHECK(cudaFuncGetAttributes(&a, layer_sequence_kernel<T>));
  return opt_in - static_cast<int>(a.sharedSizeBytes);
}

/// Whether the current device runs clusters of `c` blocks with `shared` bytes each (16 is beyond
/// CUDA's portable 8 and must be allowed per kernel). The kernel's shared-memory limit is raised
/// to `opt_in` (seq_dynamic_shared_limit) (one setting for every sequence, whatever its size).
template <class T>
bool seq_cluster_fits(int c, std::size_t shared, int opt_in) {
  FUSEX_CUDA_CHECK(cudaFuncSetAttribute(layer_sequence_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, opt_in));
  FUSEX_CUDA_CHECK(cudaFuncSetAttribute(layer_sequence_kernel<T>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  cudaLaunchAttribute attr[2];
  const cudaLaunchConfig_t cfg = seq_cluster_config(c, c, shared, attr);
  int clusters = 0;
  const cudaError_t err = cudaOccupancyMaxActiveClusters(&clusters, layer_sequence_kernel<T>, &cfg);
  if (err == cudaErrorInvalidClusterSize || err == cudaErrorInvalidValue) {
    (void)cudaGetLastError();  // this size is not supported: the caller tries the next
    return false;
  }
  FUSEX_CUDA_CHECK(err);
  return clusters > 0;
}

#endif  // __CUDACC__

}  // namespace detail
}  // namespace fusex
