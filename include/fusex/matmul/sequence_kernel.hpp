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
/// Layers one launch takes (their descriptors are kernel parameters, within CUDA's 4 KiB).
inline constexpr int seq_max_layers = 112;

/// One layer as the kernel reads it: w [n, k] with rows `w_ld` apart (16-byte aligned rows),
/// bias [n] or null.
struct seq_layer {
  const float* w;
  const float* bias;
  std::int64_t w_ld;
  std::int32_t k, n;
  std::int32_t act;
  std::int32_t pad_;
};
struct seq_params {
  const float* x;
  float* y;
  std::int64_t x_ld, y_ld, m;
  std::int32_t n_layers;
  std::int32_t pitch;   // floats between rows of the shared input and weight buffers (k_max + 4)
  std::int32_t nc_max;  // the widest slice a block owns (max over layers of n / C)
  std::int32_t pad_;
  seq_layer layers[seq_max_layers];
};

/// Shared memory of one block, in floats: two input buffers [seq_rows][pitch], two weight slices
/// [nc_max][pitch], two bias slices [nc_max], and the K-split partial sums [seq_threads][16].
inline std::size_t seq_shared_floats(int pitch, int nc_max) {
  return std::size_t{2} * seq_rows * static_cast<std::size_t>(pitch) +
         std::size_t{2} * static_cast<std::size_t>(nc_max) * static_cast<std::size_t>(pitch) +
         std::size_t{2} * static_cast<std::size_t>(nc_max) + std::size_t{seq_threads} * 16;
}

/// Why a layer of N outputs and K inputs cannot run in the persistent kernel with clusters of C
/// blocks ("" when it can): each block owns nc = N / C columns as nc / 4 column groups of four
/// rows x four columns, 256 / nc threads split K in steps of 4, and weight rows are copied in
/// 16-byte pieces.
inline std::string seq_layer_misfit(std::int64_t k, std::int64_t n, int c) {
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
  return {};
}

#if defined(__CUDACC__)

FUSEX_DEVICE FUSEX_FORCEINLINE float seq_activate(float v, int act) {
  switch (act) {
    case static_cast<int>(activation::relu):
      return ops::relu{}(v);
    case static_cast<int>(activation::gelu):
      return ops::gelu{}(v);
    case static_cast<int>(activation::silu):
      return ops::silu{}(v);
    default:
      return v;
  }
}

FUSEX_DEVICE FUSEX_FORCEINLINE void seq_cp_async16(float* dst, const float* src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const auto d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d), "l"(src) : "memory");
#else
  *reinterpret_cast<float4*>(dst) = *reinterpret_cast<const float4*>(src);
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
FUSEX_DEVICE FUSEX_FORCEINLINE void seq_store_remote(unsigned addr, float v) {
  asm volatile("st.shared::cluster.f32 [%0], %1;" ::"r"(addr), "f"(v) : "memory");
}
#endif

/// Issues the copy of block `rank`'s slice of layer `l` (weights and bias) into `w_s` and `b_s`.
FUSEX_DEVICE FUSEX_FORCEINLINE void seq_load_slice(const seq_layer& L, int nc, int rank, int pitch, float* w_s,
                                                   float* b_s) {
  const int chunks = L.k / 4;  // 16-byte pieces per weight row
  const float* w0 = L.w + static_cast<std::int64_t>(rank) * nc * L.w_ld;
  for (int i = static_cast<int>(threadIdx.x); i < nc * chunks; i += seq_threads) {
    const int row = i / chunks, q = i % chunks;
    seq_cp_async16(w_s + row * pitch + 4 * q, w0 + row * L.w_ld + 4 * q);
  }
  if (L.bias != nullptr && static_cast<int>(threadIdx.x) < nc / 4) {
    seq_cp_async16(b_s + 4 * threadIdx.x, L.bias + static_cast<std::int64_t>(rank) * nc + 4 * threadIdx.x);
  }
}

/// The kernel: launched with clusters of C blocks along x (C divides every layer's N; see
/// seq_layer_misfit), gridDim.x / C clusters of seq_rows rows each. (A template only so that a
/// header may define it: several translation units of one program may include it.)
template <class = void>
__global__ void __launch_bounds__(seq_threads) layer_sequence_kernel(const __grid_constant__ seq_params p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ float4 seq_smem4[];
  float* const smem = reinterpret_cast<float*>(seq_smem4);
  const int pitch = p.pitch;
  // Buffer b of each pair at base + b * size (arithmetic, not arrays: those would live in local memory).
  float* const act_s = smem;                                     // 2 x [seq_rows][pitch]
  float* const w_s = act_s + 2 * seq_rows * pitch;               // 2 x [nc_max][pitch]
  float* const b_s = w_s + 2 * p.nc_max * pitch;                 // 2 x [nc_max]
  float* const red = b_s + 2 * p.nc_max;                         // [seq_threads][16]
  const int act_size = seq_rows * pitch, w_size = p.nc_max * pitch;
  const int t = static_cast<int>(threadIdx.x);
  const int C = static_cast<int>(seq_cluster_size());
  const int rank = static_cast<int>(seq_cluster_rank());
  const std::int64_t m0 = static_cast<std::int64_t>(blockIdx.x / C) * seq_rows;

  // Before the grid-dependency wait only an L2 prefetch of the first weights: the kernel before
  // this one may still be writing them (a load into shared memory now could read stale values).
  {
    const seq_layer& L0 = p.layers[0];
    const int nc = L0.n / C;
    const float* w0 = L0.w + static_cast<std::int64_t>(rank) * nc * L0.w_ld;
    for (int row = t; row < nc; row += seq_threads) {
      for (int off = 0; off < L0.k; off += 32) asm volatile("prefetch.global.L2 [%0];" ::"l"(w0 + row * L0.w_ld + off));
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
      act_s[r * pitch + kk] = m0 + r < p.m ? p.x[(m0 + r) * p.x_ld + kk] : 0.0f;
    }
  }
  // Every block of the cluster has started before any writes into another's shared memory.
  seq_cluster_sync();

  for (int l = 0; l < p.n_layers; ++l) {
    const seq_layer& L = p.layers[l];
    const int nc = L.n / C;
    const bool last = l + 1 == p.n_layers;
    if (!last) {
      // Layer l+1's slice goes to the buffers layer l-1 used (every thread of this block is done
      // with them: it passed the barrier after layer l-1's sums).
      const seq_layer& N = p.layers[l + 1];
      const int nb = (l + 1) & 1;
      seq_load_slice(N, N.n / C, rank, pitch, w_s + nb * w_size, b_s + nb * p.nc_max);
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
    const float* const w = w_s + cur * w_size;
    const int g = nc / 4;
    const int u = t % nc, part = t / nc, split = seq_threads / nc;
    const int rg = u / g, cg = u % g;
    const int kn = L.k / split, kb = part * kn;
    float acc[4][4] = {};
    for (int kk = kb; kk < kb + kn; kk += 4) {
      float4 av[4], wv[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) av[i] = *reinterpret_cast<const float4*>(a + (4 * rg + i) * pitch + kk);
#pragma unroll
      for (int j = 0; j < 4; ++j) wv[j] = *reinterpret_cast<const float4*>(w + (cg + g * j) * pitch + kk);
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
    const float* const bias = b_s + cur * p.nc_max;
    float* const next = act_s + (1 - cur) * act_size;
    for (int o = t; o < seq_rows * nc; o += seq_threads) {
      const int r = o / nc, c = o % nc;
      const int uu = (r / 4) * g + c % g, ij = (r % 4) * 4 + c / g;
      float s = 0.0f;
      for (int q = 0; q < split; ++q) s += red[(q * nc + uu) * 16 + ij];
      if (L.bias != nullptr) s += bias[c];
      const float v = seq_activate(s, L.act);
      const int col = rank * nc + c;
      if (last) {
        if (m0 + r < p.m) p.y[(m0 + r) * p.y_ld + col] = v;
      } else {
        for (int dst = 0; dst < C; ++dst) seq_store_remote(seq_map_rank(next + r * pitch + col, static_cast<unsigned>(dst)), v);
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

/// Launches the kernel: `clusters` clusters of `c` blocks, `shared` bytes of dynamic shared memory
/// each, with the PDL attribute where enabled.
inline void launch_layer_sequence(const seq_params& p, int c, std::int64_t clusters, std::size_t shared,
                                  cudaStream_t stream, const device_properties& dev) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(clusters * c));
  cfg.blockDim = dim3(seq_threads);
  cfg.dynamicSmemBytes = shared;
  cfg.stream = stream;
  cudaLaunchAttribute attr[2];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = static_cast<unsigned>(c);
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  if (programmatic_dependent_launch()) {
    attr[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[1].val.programmaticStreamSerializationAllowed = 1;
    cfg.numAttrs = 2;
  }
  (void)dev;
  const cudaError_t err = cudaLaunchKernelEx(&cfg, layer_sequence_kernel<>, p);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    throw cuda_error(err, "cudaLaunchKernelEx(layer_sequence_kernel, thread-block clusters)", __FILE__, __LINE__);
  }
  note_launch();
}

/// Whether the current device runs clusters of `c` blocks with `shared` bytes each (16 is beyond
/// CUDA's portable 8 and must be allowed per kernel). The kernel's shared-memory limit is raised
/// to the device's `opt_in` maximum (one setting for every sequence, whatever its size).
inline bool seq_cluster_fits(int c, std::size_t shared, int opt_in) {
  FUSEX_CUDA_CHECK(cudaFuncSetAttribute(layer_sequence_kernel<>, cudaFuncAttributeMaxDynamicSharedMemorySize, opt_in));
  FUSEX_CUDA_CHECK(cudaFuncSetAttribute(layer_sequence_kernel<>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(c));
  cfg.blockDim = dim3(seq_threads);
  cfg.dynamicSmemBytes = shared;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = static_cast<unsigned>(c);
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  int clusters = 0;
  const cudaError_t err = cudaOccupancyMaxActiveClusters(&clusters, layer_sequence_kernel<>, &cfg);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();  // not supported at this size
    return false;
  }
  return clusters > 0;
}

#endif  // __CUDACC__

}  // namespace detail
}  // namespace fusex
