// fusex-tour: the main fusex program. For now it reports the CUDA device it would run on; it will
// grow into a tour of fused kernels with timings.
#include <fusex/version.hpp>

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

// Exit codes: 0 ok (also when there is no device, unless --require-device), 2 bad usage,
// 77 no device with --require-device (CTest's skip code), 1 anything else.
constexpr int exit_usage = 2;
constexpr int exit_no_device = 77;

void print_help(std::FILE* out) {
  std::fprintf(out,
               "usage: fusex-tour [options]\n"
               "\n"
               "Reports the CUDA device fusex runs on: name, compute capability, SM count, memory.\n"
               "Without a usable CUDA device it says so and exits 0.\n"
               "\n"
               "options:\n"
               "  --device N        report device N (default 0)\n"
               "  --require-device  exit with 77 instead of 0 when there is no usable device\n"
               "                    (CTest reports that as skipped)\n"
               "  --version         print fusex's version and exit\n"
               "  -h, --help        print this help and exit\n");
}

bool parse_int(const char* s, int& out) {
  char* end = nullptr;
  long v = std::strtol(s, &end, 10);
  if (end == s || *end != '\0' || v < 0 || v > 1 << 20) return false;
  out = static_cast<int>(v);
  return true;
}

}  // namespace

int main(int argc, char* argv[]) {
  int device = 0;
  bool require_device = false;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (std::strcmp(a, "-h") == 0 || std::strcmp(a, "--help") == 0) {
      print_help(stdout);
      return 0;
    } else if (std::strcmp(a, "--version") == 0) {
      std::printf("fusex %s\n", fusex::version_string);
      return 0;
    } else if (std::strcmp(a, "--require-device") == 0) {
      require_device = true;
    } else if (std::strcmp(a, "--device") == 0 || std::strncmp(a, "--device=", 9) == 0) {
      const char* value = a[8] == '=' ? a + 9 : (i + 1 < argc ? argv[++i] : nullptr);
      if (value == nullptr || !parse_int(value, device)) {
        std::fprintf(stderr, "fusex-tour: --device needs a device number, e.g. --device 0\n");
        return exit_usage;
      }
    } else {
      std::fprintf(stderr, "fusex-tour: unknown option '%s'\n", a);
      print_help(stderr);
      return exit_usage;
    }
  }

  int runtime_version = 0;
  int driver_version = 0;
  (void)cudaRuntimeGetVersion(&runtime_version);
  (void)cudaDriverGetVersion(&driver_version);  // 0 when no driver is installed
  std::printf("fusex %s tour\n", fusex::version_string);
  std::printf("CUDA runtime %d.%d, driver %s\n", runtime_version / 1000, runtime_version % 1000 / 10,
              driver_version == 0 ? "not installed"
                                  : (std::to_string(driver_version / 1000) + "." +
                                     std::to_string(driver_version % 1000 / 10)).c_str());

  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    std::printf("No usable CUDA device: %s. fusex needs an NVIDIA GPU to run its kernels; nothing to "
                "show on this machine.\n",
                err != cudaSuccess ? cudaGetErrorString(err) : "no device found");
    return require_device ? exit_no_device : 0;
  }
  if (device >= count) {
    std::fprintf(stderr, "fusex-tour: --device %d, but there %s only %d device%s\n", device,
                 count == 1 ? "is" : "are", count, count == 1 ? "" : "s");
    return exit_usage;
  }

  cudaDeviceProp prop{};
  err = cudaGetDeviceProperties(&prop, device);
  if (err != cudaSuccess) {
    std::fprintf(stderr, "fusex-tour: cudaGetDeviceProperties(%d): %s\n", device, cudaGetErrorString(err));
    return 1;
  }
  std::printf("device %d of %d: %s, sm_%d%d, %d SMs, %.1f GiB\n", device, count, prop.name, prop.major,
              prop.minor, prop.multiProcessorCount,
              static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
  return 0;
}
