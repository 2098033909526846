#pragma once
/// \file
/// Kernel launch plumbing shared by every fusex kernel: cached device properties, the
/// programmatic-dependent-launch switch, and the one function through which fusex launches (so
/// that every launch is checked, can carry the PDL attribute, and is counted by the launch
/// monitor).

#include <fusex/config.hpp>
#include <fusex/device/launch_hook.hpp>
#include <fusex/error.hpp>

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

namespace fusex {

namespace detail {
struct device_properties {
  int ordinal = 0;
  int sm_count = 0;
  int max_threads_per_sm = 0;
  int cc_major = 0;
  int cc_minor = 0;
};

inline constexpr int max_cached_devices = 64;

inline const device_properties& device_info(int device) {
  static device_properties cache[max_cached_devices];
  static std::once_flag once[max_cached_devices];
  if (device < 0 || device >= max_cached_devices) {
    throw invalid_argument("fusex: device ordinal " + std::to_string(device) + " is out of range");
  }
  std::call_once(once[device], [device] {
    device_properties& p = cache[device];
    p.ordinal = device;
    FUSEX_CUDA_CHECK(cudaDeviceGetAttribute(&p.sm_count, cudaDevAttrMultiProcessorCount, device));
    FUSEX_CUDA_CHECK(cudaDeviceGetAttribute(&p.max_threads_per_sm, cudaDevAttrMaxThreadsPerMultiProcessor, device));
    FUSEX_CUDA_CHECK(cudaDeviceGetAttribute(&p.cc_major, cudaDevAttrComputeCapabilityMajor, device));
    FUSEX_CUDA_CHECK(cudaDeviceGetAttribute(&p.cc_minor, cudaDevAttrComputeCapabilityMinor, device));
  });
  return cache[device];
}

inline const device_properties& current_device_info() { return device_info(current_device()); }

inline std::atomic<bool>& pdl_flag() {
  static std::atomic<bool> enabled{true};
  return enabled;
}
}  // namespace detail

/// Enables or disables programmatic dependent launch (PDL) for fusex kernels (default: enabled).
/// With PDL on sm_90 and newer, a fusex kernel may begin launching while the previous kernel in
/// its stream finishes; each fusex kernel waits for its predecessor's results before touching
/// memory, so results are identical either way.
inline void set_programmatic_dependent_launch(bool enabled) noexcept {
  detail::pdl_flag().store(enabled, std::memory_order_relaxed);
}
/// Whether programmatic dependent launch is enabled for fusex kernels.
inline bool programmatic_dependent_launch() noexcept { return detail::pdl_flag().load(std::memory_order_relaxed); }

}  // namespace fusex

#if defined(__CUDACC__)
#include <cuda_runtime.h>

#include <utility>

namespace fusex::detail {

/// Called first in every fusex kernel: wait until the previous kernel's memory operations are
/// visible (a no-op unless launched with PDL), then let the next kernel start launching.
FUSEX_DEVICE FUSEX_FORCEINLINE void pdl_begin() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/// Launches `kernel` on `stream`, with the PDL attribute where enabled and supported, and checks
/// the launch.
template <class... Params, class... Args>
void launch_kernel(const char* what, void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t shared_bytes,
                   cudaStream_t stream, const device_properties& dev, Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = shared_bytes;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  if (dev.cc_major >= 9 && programmatic_dependent_launch()) {
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
  }
  const cudaError_t err = cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    throw cuda_error(err, what, __FILE__, __LINE__);
  }
  note_launch();  // fusex::launch_monitor
}

/// Blocks of `Block` threads (no dynamic shared memory) of `Kernel` that fit on one SM of `dev`,
/// which must be the current device (the runtime answers for that one): queried once per kernel
/// and device (a split count sized to one wave needs the kernel's real occupancy, which depends
/// on its register count).
template <auto Kernel, int Block>
int resident_blocks_per_sm(const device_properties& dev) {
  static std::atomic<int> cache[max_cached_devices];  // 0: not queried yet
  std::atomic<int>& slot = cache[dev.ordinal];
  int blocks = slot.load(std::memory_order_relaxed);
  if (blocks == 0) {
    FUSEX_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, Kernel, Block, 0));
    if (blocks < 1) blocks = 1;
    slot.store(blocks, std::memory_order_relaxed);
  }
  return blocks;
}

}  // namespace fusex::detail
#endif
