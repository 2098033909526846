#pragma once
/// \file
/// The persistent kernel of fusex::layer_sequence (sequence.hpp): a chain of small linear layers
/// (y = act(x w^T + b), float32) run by one launch, one thread-block cluster per 16 rows.
///
/// Why a cluster: every output of a layer needs every output of the one before, so the layers of a
/// chain are separated by an all-to-all exchange. Across a grid that exchange goes through L2 with
/// a global barrier (about a microsecond per layer); inside a cluster (sm_90) it goes through
/// distributed shared memory, with the hardware cluster barrier. Block r of a cluster of C blocks
/// owns output columns [r N/C, (r+1) N/C) of each layer: it keeps that slice of the weights in
/// shared memory (copied with cp.async one layer ahead, so the copy of layer l+1's weights overlaps
/// layer l's arithmetic), computes its slice for the cluster's 16 rows, and writes it into every
/// block's copy of the next layer's input; one cluster barrier per layer. Rows are independent, so
/// clusters never wait for each other (no grid-wide co-residency is needed).

#include <fusex/config.hpp>
#include <fusex/core/dtype.hpp>
#include <fusex/device/launch.hpp>
#include <fusex/error.hpp>
#include <fusex/expr/ops.hpp>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

namespace fusex {

/// The activation applied after a layer of a fusex::layer_sequence (the same functions as
/// fusex::relu, fusex::gelu and fusex::silu).
enum class activation : int { none, relu, gelu, silu };

namespace detail {

/// Rows of the input one cluster owns (the product's M-tile).
inline constexpr int seq_rows = 16;
/// Threads of a block: each computes a 4 x 4 tile of outputs over 256 / (N/C) of the K range.
inline constexpr int seq_threads = 256;
/// Layers one launch takes (their descriptors are kernel parameters, within CUDA's 4 KiB: larger
/// parameter blocks need CUDA 12.1 and a recent driver).
inline constexpr int seq_max_layers = 112;

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
  std::int32_t act_pitch;  // floats between rows of the shared inputs
  seq_layer<T> layers[seq_max_layers];
};
static_assert(sizeof(seq_params<float>) <= 4096 && sizeof(seq_params<half>) <= 4096,
              "fusex: layer_sequence's kernel parameters must fit CUDA's 4 KiB");

/// Elements between rows of the shared buffers for inputs of up to k_max: 16 bytes past a multiple
/// of 128 bytes of T (rows 16-byte aligned for cp.async; neighbouring rows 4 banks apart, so the
/// loads of eight neighbouring weight rows take all 32 banks once).
inline int seq_pitch(std::int64_t k_max, int elem_bytes) {
  const std::int64_t line = 128 / elem_bytes;
  return static_cast<int>((k_max + line - 1) / line * line + 16 / elem_bytes);
}
/// The shared memory of one block, in bytes, in this order: two input buffers [seq_rows][act_pitch]
/// (float), two weight slices [nc_max][pitch] (T), two bias slices [nc_max] (T, each rounded up to
/// 16 bytes), the K-split partial sums [seq_threads][16] (float).
struct seq_layout {
  std::size_t act, w, bias, red, bytes;  // byte offsets, and the total
  FUSEX_HD seq_layout(int act_pitch, int pitch, int nc_max, int elem_bytes) {
    const auto p = static_cast<std::size_t>(pitch), nc = static_cast<std::size_t>(nc_max);
    const auto e = static_cast<std::size_t>(elem_bytes);
    act = 0;
    w = act + 2 * seq_rows * static_cast<std::size_t>(act_pitch) * sizeof(float);
    bias = w + 2 * nc * p * e;
    red = bias + 2 * ((nc * e + 15) / 16 * 16);
    bytes = red + std::size_t{seq_threads} * 16 * sizeof(float);
  }
  FUSEX_HD std::size_t bias_stride() const { return (red - bias) / 2; }
};

/// Why a layer of N outputs and K inputs cannot run in the persistent kernel with clusters of C
/// blocks ("" when it can): each block owns nc = N / C columns as nc / 4 column groups of four
/// rows x four columns, 256 / nc threads split K in steps of 4, and weight rows are copied in
/// 16-byte pieces.
inline std::string seq_layer_misfit(std::int64_t k, std::int64_t n, int c, int elem_bytes = 4) {
  if (n % c != 0) return "N = " + std::to_string(n) + " is not a multiple of the cluster size " + std::to_string(c);
  const std::int64_t nc = n / c;
  if (nc < 4 || nc > seq_threads || seq_threads % nc != 0) {
    return "N / cluster size = " + std::to_string(nc) + " is not one of 4, 8, 16, ..., 256";
  }
  const std::int64_t split = seq_threads / nc;
  if (k % (4 * split) != 0) {
    return "K = " + std::to_string(k) + " is not a multiple of " + std::to_string(4 * split) + " (4 x the " +
           std::to_string(split) + " threads that split it)";
  }
  if (k % (16 / elem_bytes) != 0) {
    return "K = " + std::to_string(k) + " is not a multiple of " + std::to_string(16 / elem_bytes) +
           " (16-byte pieces of a weight row)";
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

FUSEX_DEVICE FUSEX_FORCEINLINE void seq_cp_async16(void* dst, const void* src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const auto d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d), "l"(src) : "memory");
#else
  *static_cast<float4*>(dst) = *static_cast<const float4*>(src);
#endif
}
FUSEX_DEVICE FUSEX_FORCEINLINE void seq_cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}
template <int Pending>
FUSEX_DEVICE FUSEX_FORCEINLINE void seq_cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;" ::"n"(Pending) : "memory");
#endif
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
// The cluster primitives, as PTX (cooperative_groups' cluster API is the same instructions).
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
/// The address of `p` (this block's shared memory) in block `rank`'s shared memory.
FUSEX_DEVICE FUSEX_FORCEINLINE unsigned seq_map_rank(const float* p, unsigned rank) {
  const auto local = static_cast<unsigned>(__cvta_generic_to_shared(p));
  unsigned remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(rank));
  return remote;
}
/// 16 bytes into another block's shared memory (one packet on the SM-to-SM network, where four
/// 4-byte stores would be four).
FUSEX_DEVICE FUSEX_FORCEINLINE void seq_store_remote(unsigned addr, float4 v) {
  asm volatile("st.shared::cluster.v4.f32 [%0], {%1, %2, %3, %4};" ::"r"(addr), "f"(v.x), "f"(v.y), "f"(v.z),
               "f"(v.w)
               : "memory");
}
#endif

FUSEX_DEVICE FUSEX_FORCEINLINE void seq_cp_async4(void* dst, const void* src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const auto d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(d), "l"(src) : "memory");
#else
  *static_cast<unsigned*>(dst) = *static_cast<const unsigned*>(src);
#endif
}

/// Issues the copy of block `rank`'s slice of a layer (weights in 16-byte pieces, bias in 4-byte
/// pieces: nc * sizeof(T) is a multiple of 8) into `w_s` and `b_s`.
template <class T>
FUSEX_DEVICE FUSEX_FORCEINLINE void seq_load_slice(const seq_layer<T>& L, int nc, int rank, int pitch, T* w_s, T* b_s) {
  constexpr int per = 16 / static_cast<int>(sizeof(T));
  const int chunks = L.k / per;
  const T* w0 = L.w + static_cast<std::int64_t>(rank) * nc * L.w_ld;
  for (int i = static_cast<int>(threadIdx.x); i < nc * chunks; i += seq_threads) {
    const int row = i / chunks, q = i % chunks;
    seq_cp_async16(w_s + row * pitch + per * q, w0 + row * L.w_ld + per * q);
  }
  const int words = nc * static_cast<int>(sizeof(T)) / 4;
  if (L.bias != nullptr && static_cast<int>(threadIdx.x) < words) {
    const T* b0 = L.bias + static_cast<std::int64_t>(rank) * nc;
    seq_cp_async4(reinterpret_cast<char*>(b_s) + 4 * threadIdx.x, reinterpret_cast<const char*>(b0) + 4 * threadIdx.x);
  }
}

/// Four consecutive elements of a shared weight row as floats.
FUSEX_DEVICE FUSEX_FORCEINLINE float4 seq_load4(const float* p) { return *reinterpret_cast<const float4*>(p); }
template <class T>
FUSEX_DEVICE FUSEX_FORCEINLINE float4 seq_load4(const T* p) {
  const uint2 u = *reinterpret_cast<const uint2*>(p);
  const T* h = reinterpret_cast<const T*>(&u);
  return make_float4(convert<float>(h[0]), convert<float>(h[1]), convert<float>(h[2]), convert<float>(h[3]));
}

/// The kernel: launched with clusters of C blocks along x (C divides every layer's N; see
/// seq_layer_misfit), gridDim.x / C clusters of seq_rows rows each, T the dtype of x, y, the
/// weights and biases (the sums and the activations between layers are float32, rounded to T as
/// each layer's output).
template <class T>
__global__ void __launch_bounds__(seq_threads) layer_sequence_kernel(const __grid_constant__ seq_params<T> p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ float4 seq_smem4[];
  char* const smem = reinterpret_cast<char*>(seq_smem4);
  const int pitch = p.pitch, apitch = p.act_pitch;
  const seq_layout lay(apitch, pitch, p.nc_max, static_cast<int>(sizeof(T)));
  // Buffer b of each pair at base + b * size (arithmetic, not arrays: those would live in local memory).
  float* const act_s = reinterpret_cast<float*>(smem + lay.act);  // 2 x [seq_rows][apitch]
  T* const w_s = reinterpret_cast<T*>(smem + lay.w);              // 2 x [nc_max][pitch]
  T* const b_s = reinterpret_cast<T*>(smem + lay.bias);           // 2 x [bias_stride bytes]
  float* const red = reinterpret_cast<float*>(smem + lay.red);    // [seq_threads][16]
  const int act_size = seq_rows * apitch, w_size = p.nc_max * pitch;
  const int b_size = static_cast<int>(lay.bias_stride() / sizeof(T));
  const int t = static_cast<int>(threadIdx.x);
  const int C = static_cast<int>(seq_cluster_size());
  const int rank = static_cast<int>(seq_cluster_rank());
  const std::int64_t m0 = static_cast<std::int64_t>(blockIdx.x / C) * seq_rows;

  // Before the grid-dependency wait only an L2 prefetch of the first weights: the kernel before
  // this one may still be writing them (a load into shared memory now could read stale values).
  {
    const seq_layer<T>& L0 = p.layers[0];
    const int nc = L0.n / C;
    const T* w0 = L0.w + static_cast<std::int64_t>(rank) * nc * L0.w_ld;
    constexpr int line = 128 / static_cast<int>(sizeof(T));
    for (int row = t; row < nc; row += seq_threads) {
      for (int off = 0; off < L0.k; off += line)
        asm volatile("prefetch.global.L2 [%0];" ::"l"(w0 + row * L0.w_ld + off));
    }
  }
  pdl_begin();
  seq_load_slice(p.layers[0], p.layers[0].n / C, rank, pitch, w_s, b_s);
  seq_cp_async_commit();
  // This cluster's rows of x (rows past M are zeros: their outputs are computed and dropped).
  {
    const int k0 = p.layers[0].k;
    for (int i = t; i < seq_rows * k0; i += seq_threads) {
      const int r = i / k0, kk = i % k0;
      act_s[r * apitch + kk] = m0 + r < p.m ? convert<float>(p.x[(m0 + r) * p.x_ld + kk]) : 0.0f;
    }
  }
  // Every block of the cluster has started before any writes into another's shared memory.
  seq_cluster_sync();

  for (int l = 0; l < p.n_layers; ++l) {
    const seq_layer<T>& L = p.layers[l];
    const int nc = L.n / C;
    const bool last = l + 1 == p.n_layers;
    if (!last) {
      // Layer l+1's slice goes to the buffers layer l-1 used (every thread of this block is done
      // with them: it passed the barrier after layer l-1's sums).
      const seq_layer<T>& N = p.layers[l + 1];
      const int nb = (l + 1) & 1;
      seq_load_slice(N, N.n / C, rank, pitch, w_s + nb * w_size, b_s + nb * b_size);
      seq_cp_async_commit();
      seq_cp_async_wait<1>();
    } else {
      seq_cp_async_wait<0>();
    }
    __syncthreads();

    // Thread t: column group u of nc (four rows x four columns, columns u % g + g j so that eight
    // neighbouring threads read eight consecutive weight rows: no bank conflicts), K part t / nc.
    const int cur = l & 1;
    const float* const a = act_s + cur * act_size;
    const T* const w = w_s + cur * w_size;
    const int g = nc / 4;
    const int u = t % nc, part = t / nc, split = seq_threads / nc;
    const int rg = u / g, cg = u % g;
    const int kn = L.k / split, kb = part * kn;
    float acc[4][4] = {};
    for (int kk = kb; kk < kb + kn; kk += 4) {
      float4 av[4], wv[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) av[i] = *reinterpret_cast<const float4*>(a + (4 * rg + i) * apitch + kk);
#pragma unroll
      for (int j = 0; j < 4; ++j) wv[j] = seq_load4(w + (cg + g * j) * pitch + kk);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          acc[i][j] = fmaf(av[i].x, wv[j].x, acc[i][j]);
          acc[i][j] = fmaf(av[i].y, wv[j].y, acc[i][j]);
          acc[i][j] = fmaf(av[i].z, wv[j].z, acc[i][j]);
          acc[i][j] = fmaf(av[i].w, wv[j].w, acc[i][j]);
        }
      }
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      *reinterpret_cast<float4*>(red + t * 16 + 4 * i) = make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
    }
    __syncthreads();

    // Output (r, c) of the slice: the K parts' sums in order, then bias and activation.
    const T* const bias = b_s + cur * b_size;
    float* const next = act_s + (1 - cur) * act_size;
    for (int o = t; o < seq_rows * nc; o += seq_threads) {
      const int r = o / nc, c = o % nc;
      const int uu = (r / 4) * g + c % g, ij = (r % 4) * 4 + c / g;
      float s = 0.0f;
      for (int q = 0; q < split; ++q) s += red[(q * nc + uu) * 16 + ij];
      if (L.bias != nullptr) s += convert<float>(bias[c]);
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
      const int quads = nc / 4, pieces = seq_rows * quads;
      for (int i = t; i < (C - 1) * pieces; i += seq_threads) {
        const int dst = (rank + 1 + i / pieces) % C, q = i % pieces;
        const float* src = next + (q / quads) * apitch + rank * nc + 4 * (q % quads);
        seq_store_remote(seq_map_rank(src, static_cast<unsigned>(dst)), *reinterpret_cast<const float4*>(src));
      }
    }
    // Every block's slice of layer l+1's input is in place (and every block is done reading
    // layer l's input and the partial sums) before anyone goes on.
    if (!last) seq_cluster_sync();
  }
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

/// Whether the current device runs clusters of `c` blocks with `shared` bytes each (16 is beyond
/// CUDA's portable 8 and must be allowed per kernel). The kernel's shared-memory limit is raised
/// to the device's `opt_in` maximum (one setting for every sequence, whatever its size).
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
