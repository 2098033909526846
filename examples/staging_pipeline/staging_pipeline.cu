// staging_pipeline: input batches reach the GPU while the previous batch computes.
//
// Each batch is staged from pageable host memory into a pinned buffer (fusex::pinned_buffer), chunk
// by chunk, each chunk copied to a device buffer from the default arena on a copy stream as soon as
// it is staged, and reduced on a compute stream; a ring of three slots of each, ordered by events
// (see staging_pipeline.cuh).
// The program times staging + copies alone, kernels alone, the overlapped pipeline and the same
// loop on a single stream, and checks every batch's result against a reference.
//
//   staging_pipeline [--batch-mib N] [--batches N] [--work N] [--slots N] [--chunk-mib N] [--require-device]
//
// Exit codes: 0 results correct (or no device, without --require-device), 1 a wrong result or a
// CUDA error, 2 bad usage, 77 no device with --require-device.
#include "staging_pipeline.cuh"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

namespace {

bool parse(const char* s, long lo, long hi, long& out) {
  char* end = nullptr;
  const long v = std::strtol(s, &end, 10);
  if (end == s || *end != '\0' || v < lo || v > hi) return false;
  out = v;
  return true;
}

void usage(std::FILE* f) {
  std::fprintf(f,
               "usage: staging_pipeline [options]\n"
               "  --batch-mib N      MiB per batch (default 16)\n"
               "  --batches N        batches through the pipeline (default 32)\n"
               "  --work N           FMA steps per element (default: calibrated so that compute ~ copy)\n"
               "  --slots N          pinned + device buffers in the ring (default 3, at least 2)\n"
               "  --chunk-mib N      MiB staged per H2D copy (default 4; 0: the whole batch at once)\n"
               "  --require-device   exit 77 instead of 0 when there is no CUDA device\n");
}

}  // namespace

int main(int argc, char** argv) {
  staging::config c;
  bool require_device = false;
  for (int i = 1; i < argc; ++i) {
    long v = 0;
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      usage(stdout);
      return 0;
    } else if (a == "--require-device") {
      require_device = true;
    } else if (a == "--batch-mib" && i + 1 < argc && parse(argv[i + 1], 1, 4096, v)) {
      c.batch_elems = static_cast<std::size_t>(v) << 18;  // floats in v MiB
      ++i;
    } else if (a == "--batches" && i + 1 < argc && parse(argv[i + 1], 2, 100000, v)) {
      c.batches = static_cast<int>(v);
      ++i;
    } else if (a == "--work" && i + 1 < argc && parse(argv[i + 1], 1, 1 << 24, v)) {
      c.work = static_cast<int>(v);
      ++i;
    } else if (a == "--slots" && i + 1 < argc && parse(argv[i + 1], 2, 64, v)) {
      c.slots = static_cast<int>(v);
      ++i;
    } else if (a == "--chunk-mib" && i + 1 < argc && parse(argv[i + 1], 0, 4096, v)) {
      c.chunk_elems = static_cast<std::size_t>(v) << 18;  // floats in v MiB
      ++i;
    } else {
      usage(stderr);
      return 2;
    }
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("staging_pipeline: no usable CUDA device\n");
    return require_device ? 77 : 0;
  }
  try {
    const std::vector<float> dataset = staging::make_dataset(c);
    const int work = c.work != 0 ? c.work : staging::calibrate(c, dataset);
    const std::vector<double> ref = staging::device_reference(c, dataset, work);
    // The kernel itself, against the host, on one dataset batch (when that is cheap enough).
    if (static_cast<double>(c.batch_elems) * work <= 4e8) {
      const double h = staging::host_reference(dataset, c, 0, work);
      if (std::abs(h - ref[0]) > 1e-9 * std::abs(h)) {
        std::printf("staging_pipeline: device reference %.17g differs from host %.17g\n", ref[0], h);
        return 1;
      }
    }
    (void)staging::run(c, staging::mode::overlapped, dataset, work);  // warm-up: arena, pinned cache
    const auto copy = staging::run(c, staging::mode::copy_only, dataset, work);
    const auto compute = staging::run(c, staging::mode::compute_only, dataset, work);
    const auto overlapped = staging::run(c, staging::mode::overlapped, dataset, work);
    const auto single = staging::run(c, staging::mode::single_stream, dataset, work);
    const double bound = std::max(copy.seconds, compute.seconds);
    const double mib = static_cast<double>(c.batch_elems * sizeof(float)) / (1 << 20);
    std::printf("staging pipeline: %d batches of %.0f MiB, %d FMA steps per element, %d slots, %s\n", c.batches, mib,
                work, c.slots,
                c.chunk_elems == 0 || c.chunk_elems >= c.batch_elems ? "whole-batch copies" : "chunked copies");
    std::printf("  staging + copies only   %9.3f ms\n", copy.seconds * 1e3);
    std::printf("  kernels only            %9.3f ms\n", compute.seconds * 1e3);
    std::printf("  overlapped (2 streams)  %9.3f ms   %.3f x max(copy, compute)%s\n", overlapped.seconds * 1e3,
                overlapped.seconds / bound, overlapped.seconds <= 1.10 * bound ? "  (within 10%)" : "");
    std::printf("  single stream           %9.3f ms   %.3f x max(copy, compute)\n", single.seconds * 1e3,
                single.seconds / bound);
    // Where the overlapped loop's time goes (one more run, with timing events).
    staging::config pc = c;
    pc.profile = true;
    const auto prof = staging::run(pc, staging::mode::overlapped, dataset, work);
    std::printf(
        "  overlapped, profiled    %9.3f ms: host staging %.3f ms, host waiting %.3f ms, GPU copies %.3f ms, "
        "GPU kernels %.3f ms\n",
        prof.seconds * 1e3, prof.host_stage_seconds * 1e3, prof.host_wait_seconds * 1e3, prof.gpu_copy_seconds * 1e3,
        prof.gpu_compute_seconds * 1e3);
    const int bad = staging::mismatches(overlapped, ref) + staging::mismatches(single, ref) +
                    staging::mismatches(compute, ref) + staging::mismatches(prof, ref);
    if (bad != 0) {
      std::printf("staging_pipeline: %d batch result(s) differ from the reference\n", bad);
      return 1;
    }
    std::printf("  all %d batch results of each run match the reference\n", c.batches);
    return 0;
  } catch (const fusex::error& e) {
    std::fprintf(stderr, "staging_pipeline: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "staging_pipeline: %s\n", e.what());
    return 1;
  }
}
