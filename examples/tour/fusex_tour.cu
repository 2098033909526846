// fusex-tour: what fusex does to launch overhead, on the workloads that motivate it.
//
// Workloads (chain; transformer, in float32 and, on request, in bfloat16; mlp and, on request,
// mlp-persistent), each run four ways and checked against each other:
//   (1) unfused    one kernel per operation, temporaries from cudaMallocAsync (an eager framework)
//   (2) fused      fusex expressions: one kernel per fused step, temporaries from cudaMallocAsync
//   (3) +arena     the same with temporaries from fusex's arena
//   (4) +graph     the same captured once into a CUDA graph (programmatic dependent launch on)
//                  and replayed
// The table shows kernels launched per step (counted by fusex::launch_monitor), host and GPU time
// per step, the speedup over (1) and the largest difference from (1)'s output.
//
// Without a GPU it says so, runs (1) and (2) on fusex's host backend at a small size, prints the
// same table without the GPU columns and exits 0.
#include "tour.hpp"

#include <fusex/fusex.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace {

using namespace tour;

// Exit codes: 0 ok (also when there is no device, unless --require-device), 1 a failed check or
// an error, 2 bad usage, 77 no device with --require-device (CTest's skip code).
constexpr int exit_failure = 1;
constexpr int exit_usage = 2;
constexpr int exit_no_device = 77;

void print_help(std::FILE* out) {
  std::fprintf(out,
               "usage: fusex-tour [options]\n"
               "\n"
               "Shows what fusex does to launch overhead. Each workload runs four ways, checked against\n"
               "each other:\n"
               "  (1) unfused      one kernel per operation, temporaries from cudaMallocAsync, no PDL\n"
               "                   (as an eager framework runs it)\n"
               "  (2) fused        fusex expressions (one kernel per fused step), temporaries from\n"
               "                   cudaMallocAsync\n"
               "  (3) +arena       (2) with temporaries from fusex's stream-ordered arena\n"
               "  (4) +graph       (3) captured once into a CUDA graph and replayed, with programmatic\n"
               "                   dependent launch (PDL)\n"
               "and prints kernels launched per step (fusex::launch_monitor), host us per step (time to\n"
               "submit), GPU us per step (CUDA events around the measured steps), speedup of GPU time\n"
               "over (1), and the largest absolute difference from (1)'s output. A difference above\n"
               "1e-3 x max(1, max|output of (1)|) (3e-2 x for transformer-bf16: bfloat16 rounds to 8\n"
               "significant bits) fails the check (exit code 1).\n"
               "\n"
               "Workloads:\n"
               "  chain        a long chain of small steps on [batch, hidden]; each block is\n"
               "               layer_norm(affine), *scale, +shift, gelu, *0.5, +residual, rms_norm(weight):\n"
               "               7 kernels unfused, 2 fused\n"
               "  transformer  one pre-LN transformer block on [batch*seq, hidden] (one attention head):\n"
               "               layer_norm, QKV linear, scores, scale, softmax, attention, output linear,\n"
               "               residual, layer_norm, linear+bias, gelu, linear, residual\n"
               "  transformer-bf16  the same block in bfloat16 (as inference runs it): parameters and\n"
               "               activations in bfloat16, GEMMs on tensor cores (cuBLASLt), float accumulation\n"
               "               (not in the default set)\n"
               "  mlp          `layers` x (Linear(hidden, hidden) + ReLU) on [batch, hidden]\n"
               "  mlp-persistent  the same MLP, fused versions as one fusex::layer_sequence (one\n"
               "               persistent kernel for the chain where the GPU has thread-block clusters;\n"
               "               not in the default set)\n"
               "Linear layers are fusex::linear (fusex::matmul); weights use PyTorch's default init.\n"
               "\n"
               "Without a usable CUDA device (or with --host) it runs (1) and (2) on fusex's host backend\n"
               "at a small size (batch 4, hidden 32, layers 8, seq 8, blocks 8, steps 3, unless set),\n"
               "prints the table without the GPU columns and exits 0.\n"
               "\n"
               "options:\n"
               "  --workload LIST   comma-separated subset of chain,transformer,transformer-bf16,mlp,\n"
               "                    mlp-persistent or all (default: chain,transformer,mlp)\n"
               "  --batch N         rows per step (default 16)\n"
               "  --hidden N        hidden size (default 256)\n"
               "  --layers N        MLP depth (default 100)\n"
               "  --seq N           transformer sequence length (default 32)\n"
               "  --blocks N        chain blocks (default 50)\n"
               "  --steps N         measured steps per version (default 200)\n"
               "  --warmup N        unmeasured steps first (default 10)\n"
               "  --no-pdl          no programmatic dependent launch in any version\n"
               "  --tf32            let the float32 GEMMs of every version use TF32 tensor cores\n"
               "                    (fusex::matmul_options::allow_tf32; off: float32-accurate products;\n"
               "                    no effect on the host backend)\n"
               "  --chain-one-expression\n"
               "                    write each chain block as one expression (one row kernel; its\n"
               "                    repeated layer_norm is computed once) instead of two\n"
               "  --json FILE       also write the results as JSON to FILE\n"
               "  --device N        the CUDA device to use (default 0)\n"
               "  --host            use the host backend even when a GPU is present\n"
               "  --require-device  exit with 77 instead of running on the host when there is no usable\n"
               "                    device (CTest reports that as skipped)\n"
               "  --version         print fusex's version and exit\n"
               "  -h, --help        print this help and exit\n"
               "\n"
               "exit codes: 0 ok, 1 a check failed or an error, 2 bad usage, 77 no device with\n"
               "--require-device\n");
}

struct usage_error {
  std::string message;
};

std::int64_t parse_count(const std::string& flag, const char* s, std::int64_t lo, std::int64_t hi) {
  if (s == nullptr) throw usage_error{flag + " needs a value"};
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s, &end, 10);
  if (end == s || *end != '\0' || errno != 0 || v < lo || v > hi) {
    throw usage_error{flag + " needs a whole number from " + std::to_string(lo) + " to " + std::to_string(hi) +
                      ", got '" + s + "'"};
  }
  return v;
}

options parse(int argc, char** argv, bool& exit_now, int& exit_code) {
  options o;
  exit_now = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    const char* value = nullptr;
    const auto eq = a.find('=');
    if (a.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = argv[i] + eq + 1;
      a = a.substr(0, eq);
    }
    auto take = [&]() -> const char* {
      if (value != nullptr) return value;
      if (i + 1 < argc) return argv[++i];
      return nullptr;
    };
    auto no_value = [&] {
      if (value != nullptr) throw usage_error{a + " takes no value"};
    };
    if (a == "-h" || a == "--help") {
      print_help(stdout);
      exit_now = true;
      exit_code = 0;
      return o;
    } else if (a == "--version") {
      std::printf("fusex %s\n", fusex::version_string);
      exit_now = true;
      exit_code = 0;
      return o;
    } else if (a == "--require-device") {
      no_value();
      o.require_device = true;
    } else if (a == "--host") {
      no_value();
      o.force_host = true;
    } else if (a == "--no-pdl") {
      no_value();
      o.pdl = false;
    } else if (a == "--tf32") {
      no_value();
      o.tf32 = true;
    } else if (a == "--chain-one-expression") {
      no_value();
      o.chain_one_expression = true;
    } else if (a == "--device") {
      o.device = static_cast<int>(parse_count(a, take(), 0, 1023));
    } else if (a == "--batch") {
      o.batch = parse_count(a, take(), 1, 1 << 20);
      o.set_batch = true;
    } else if (a == "--hidden") {
      o.hidden = parse_count(a, take(), 1, 1 << 16);
      o.set_hidden = true;
    } else if (a == "--layers") {
      o.layers = parse_count(a, take(), 1, 100000);
      o.set_layers = true;
    } else if (a == "--seq") {
      o.seq = parse_count(a, take(), 1, 1 << 14);
      o.set_seq = true;
    } else if (a == "--blocks") {
      o.blocks = parse_count(a, take(), 1, 100000);
      o.set_blocks = true;
    } else if (a == "--steps") {
      o.steps = static_cast<int>(parse_count(a, take(), 1, 1000000));
      o.set_steps = true;
    } else if (a == "--warmup") {
      o.warmup = static_cast<int>(parse_count(a, take(), 0, 1000000));
      o.set_warmup = true;
    } else if (a == "--json") {
      const char* v = take();
      if (v == nullptr || *v == '\0') throw usage_error{"--json needs a file name"};
      o.json = v;
    } else if (a == "--workload") {
      const char* v = take();
      if (v == nullptr || *v == '\0') throw usage_error{"--workload needs a list, e.g. --workload chain,mlp"};
      o.workloads.clear();
      std::string list = v;
      std::size_t start = 0;
      while (start <= list.size()) {
        const std::size_t comma = list.find(',', start);
        const std::string w = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        if (w == "all") {
          o.workloads = {"chain", "transformer", "transformer-bf16", "mlp", "mlp-persistent"};
        } else if (w == "chain" || w == "transformer" || w == "transformer-bf16" || w == "mlp" ||
                   w == "mlp-persistent") {
          if (std::find(o.workloads.begin(), o.workloads.end(), w) == o.workloads.end()) o.workloads.push_back(w);
        } else {
          throw usage_error{"unknown workload '" + w +
                            "' (choose from chain, transformer, transformer-bf16, mlp, mlp-persistent, all)"};
        }
        if (comma == std::string::npos) break;
        start = comma + 1;
      }
    } else {
      throw usage_error{"unknown option '" + a + "'"};
    }
  }
  return o;
}

std::unique_ptr<workload> make_workload(const std::string& name, bool host, const options& o) {
  if (name == "chain") return make_chain(host, o);
  if (name == "transformer" || name == "transformer-bf16") return make_transformer(host, o, name == "transformer-bf16");
  return make_mlp(host, o, name == "mlp-persistent");
}

// ---------------------------------------------------------------------------------------------
// Measuring

struct result {
  std::string version;
  bool measured = true;  // false: not run on this backend
  double kernels = 0;    // kernels launched per step (host backend: evaluations per step)
  double host_us = 0;    // host time per step
  double gpu_us = -1;    // GPU time per step (negative: not measured)
  double speedup = 0;    // over (1), GPU time (host time on the host backend)
  double max_diff = 0;   // largest |output - output of (1)|
  bool launch_bound = false;
  bool ok = true;
};

struct workload_result {
  std::string name, shape;
  double relative_tolerance = 1e-3;  // the workload's: tolerance / max(1, max|output of (1)|)
  double tolerance = 0;
  std::vector<result> versions;
};

const char* const version_names[4] = {"(1) unfused", "(2) fused", "(3) fused+arena", "(4) fused+arena+graph"};

void progress(const std::string& workload, int version, int total) {
  std::fprintf(stderr, "\rmeasuring %-11s %d/%d %-24s", workload.c_str(), version + 1, total, version_names[version]);
  std::fflush(stderr);
}
void progress_done() {
  std::fprintf(stderr, "\r%-72s\r", "");
  std::fflush(stderr);
}

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, static_cast<double>(std::fabs(x)));
  return m;
}
double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i]));
    if (!(d <= m)) m = d;  // NaN propagates
  }
  return m;
}

// The four versions on the GPU.
workload_result run_device(workload& w, const options& o, cudaStream_t stream) {
  workload_result wr;
  wr.name = w.name();
  wr.shape = w.shape();
  wr.relative_tolerance = w.relative_tolerance();
  static fusex::cuda_async_resource async_resource;
  fusex::arena& ar = fusex::default_arena();
  std::vector<float> reference;
  for (int v = 0; v < 4; ++v) {
    progress(w.name(), v, 4);
    result r;
    r.version = version_names[v];
    const bool fused = v > 0;
    const bool use_arena = v >= 2;
    // (1) launches as an eager framework does, without PDL; fusex's versions with its default.
    fusex::set_programmatic_dependent_launch(o.pdl && fused);
    // Temporaries, fusex's internal ones included, from cudaMallocAsync or from the arena.
    if (use_arena) {
      fusex::set_default_resource(fusex::device_resource_ref(ar));
    } else {
      fusex::set_default_resource(fusex::device_resource_ref(async_resource));
    }
    backend b;
    b.stream = stream;
    b.resource = fusex::get_default_resource();
    w.output().poison(stream);
    fusex::launch_report rep;
    if (v < 3) {
      for (int i = 0; i < o.warmup; ++i) w.step(b, fused);
      FUSEX_CUDA_CHECK(cudaStreamSynchronize(stream));
      if (o.warmup == 0) w.step(b, fused);  // at least the output
      fusex::launch_monitor mon(stream);
      for (int i = 0; i < o.steps; ++i) w.step(b, fused);
      rep = mon.report();
      r.kernels = static_cast<double>(rep.kernel_launches) / o.steps;
    } else {
      w.step(b, true);  // eager warm-up: lazy initialisation (plans, cuBLASLt handles) before capture
      FUSEX_CUDA_CHECK(cudaStreamSynchronize(stream));
      fusex::graph_exec g;
      {
        fusex::graph_capture cap(stream);
        w.step(b, true);
        g = cap.finish();
      }
      g.upload(stream);
      for (int i = 0; i < std::max(1, o.warmup); ++i) g.launch(stream);
      FUSEX_CUDA_CHECK(cudaStreamSynchronize(stream));
      fusex::launch_monitor mon(stream);
      for (int i = 0; i < o.steps; ++i) g.launch(stream);
      rep = mon.report();
      r.kernels = static_cast<double>(rep.kernel_launches) / o.steps +
                  static_cast<double>(rep.graph_launches) * static_cast<double>(g.kernel_node_count()) / o.steps;
    }
    FUSEX_CUDA_CHECK(cudaStreamSynchronize(stream));
    r.host_us = rep.host_us / o.steps;
    r.gpu_us = rep.gpu_us / o.steps;
    r.launch_bound = rep.launch_bound();
    const std::vector<float> out = w.output().download_values();
    if (v == 0) {
      reference = out;
      wr.tolerance = wr.relative_tolerance * std::max(1.0, max_abs(reference));
    }
    r.max_diff = max_abs_diff(out, reference);
    r.ok = r.max_diff <= wr.tolerance;
    wr.versions.push_back(r);
  }
  for (auto& r : wr.versions) r.speedup = wr.versions[0].gpu_us / r.gpu_us;
  fusex::set_programmatic_dependent_launch(o.pdl);
  fusex::set_default_resource(fusex::device_resource_ref(ar));
  progress_done();
  return wr;
}

// (1) and (2) on the host backend.
workload_result run_host(workload& w, const options& o) {
  workload_result wr;
  wr.name = w.name();
  wr.shape = w.shape();
  wr.relative_tolerance = w.relative_tolerance();
  std::vector<float> reference;
  for (int v = 0; v < 4; ++v) {
    result r;
    r.version = version_names[v];
    if (v >= 2) {
      r.measured = false;  // the arena and graphs are GPU features
      wr.versions.push_back(r);
      continue;
    }
    progress(w.name(), v, 2);
    backend b;
    b.host = true;
    const bool fused = v == 1;
    for (int i = 0; i < o.warmup; ++i) w.step(b, fused);
    b.evals = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < o.steps; ++i) w.step(b, fused);
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    r.kernels = static_cast<double>(b.evals) / o.steps;
    r.host_us = us / o.steps;
    const std::vector<float> out = w.output().download_values();
    if (v == 0) {
      reference = out;
      wr.tolerance = wr.relative_tolerance * std::max(1.0, max_abs(reference));
    }
    r.max_diff = max_abs_diff(out, reference);
    r.ok = r.max_diff <= wr.tolerance;
    wr.versions.push_back(r);
  }
  for (auto& r : wr.versions)
    if (r.measured) r.speedup = wr.versions[0].host_us / r.host_us;
  progress_done();
  return wr;
}

// ---------------------------------------------------------------------------------------------
// Reporting

// 1e-3 rather than printf's 1e-03 (a relative tolerance is a round power of ten times a digit).
std::string short_exponent(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0e", v);
  std::string s = buf;
  const std::size_t e = s.find("e-0");
  if (e != std::string::npos && e + 3 < s.size()) s.erase(e + 2, 1);
  return s;
}

void print_table(const workload_result& wr, bool gpu) {
  std::printf("\n%s: %s\n", wr.name.c_str(), wr.shape.c_str());
  if (gpu) {
    std::printf("  %-22s %12s %13s %12s %9s %14s  %s\n", "version", "kernels/step", "host us/step", "GPU us/step",
                "speedup", "max abs diff", "");
  } else {
    std::printf("  %-22s %12s %13s %9s %14s  %s\n", "version", "evals/step", "host us/step", "speedup", "max abs diff",
                "");
  }
  for (const result& r : wr.versions) {
    if (!r.measured) {
      std::printf("  %-22s %12s %13s %s%9s %14s  (GPU only)\n", r.version.c_str(), "-", "-", gpu ? "           - " : "",
                  "-", "-");
      continue;
    }
    const char* check = r.ok ? "" : "  MISMATCH";
    if (gpu) {
      std::printf("  %-22s %12.1f %13.1f %12.1f %8.1fx %14.3g  %s%s\n", r.version.c_str(), r.kernels, r.host_us,
                  r.gpu_us, r.speedup, r.max_diff, r.launch_bound ? "launch-bound" : "", check);
    } else {
      std::printf("  %-22s %12.1f %13.1f %8.1fx %14.3g%s\n", r.version.c_str(), r.kernels, r.host_us, r.speedup,
                  r.max_diff, check);
    }
  }
  std::printf("  tolerance: max abs diff <= %.3g (%s x max(1, max|output of (1)|))\n", wr.tolerance,
              short_exponent(wr.relative_tolerance).c_str());
}

std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}
std::string num(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

bool write_json(const std::string& file, const options& o, const std::string& device, bool gpu,
                const std::vector<workload_result>& results) {
  std::FILE* f = std::fopen(file.c_str(), "w");
  if (f == nullptr) {
    std::fprintf(stderr, "fusex-tour: cannot write %s: %s\n", file.c_str(), std::strerror(errno));
    return false;
  }
  std::string s = "{\n";
  s += "  \"program\": \"fusex-tour\",\n";
  s += "  \"fusex_version\": \"" + std::string(fusex::version_string) + "\",\n";
  s += "  \"backend\": \"" + std::string(gpu ? "gpu" : "host") + "\",\n";
  s += "  \"device\": \"" + json_escape(device) + "\",\n";
  s += "  \"config\": {\"batch\": " + std::to_string(o.batch) + ", \"hidden\": " + std::to_string(o.hidden) +
       ", \"layers\": " + std::to_string(o.layers) + ", \"seq\": " + std::to_string(o.seq) +
       ", \"blocks\": " + std::to_string(o.blocks) + ", \"steps\": " + std::to_string(o.steps) +
       ", \"warmup\": " + std::to_string(o.warmup) + ", \"pdl\": " + (o.pdl ? "true" : "false") +
       ", \"tf32\": " + (o.tf32 && gpu ? "true" : "false") + "},\n";
  s += "  \"workloads\": [\n";
  for (std::size_t i = 0; i < results.size(); ++i) {
    const workload_result& wr = results[i];
    s += "    {\"name\": \"" + wr.name + "\", \"shape\": \"" + json_escape(wr.shape) +
         "\", \"tolerance\": " + num(wr.tolerance) + ", \"relative_tolerance\": " + num(wr.relative_tolerance) +
         ", \"versions\": [\n";
    for (std::size_t j = 0; j < wr.versions.size(); ++j) {
      const result& r = wr.versions[j];
      s += "      {\"version\": \"" + r.version + "\", \"measured\": " + (r.measured ? "true" : "false");
      if (r.measured) {
        s += ", \"kernels_per_step\": " + num(r.kernels) + ", \"host_us_per_step\": " + num(r.host_us) +
             ", \"gpu_us_per_step\": " + (gpu ? num(r.gpu_us) : std::string("null")) +
             ", \"speedup\": " + num(r.speedup) + ", \"max_abs_diff\": " + num(r.max_diff) +
             ", \"launch_bound\": " + (r.launch_bound ? "true" : "false") + ", \"ok\": " + (r.ok ? "true" : "false");
      }
      s += j + 1 < wr.versions.size() ? "},\n" : "}\n";
    }
    s += i + 1 < results.size() ? "    ]},\n" : "    ]}\n";
  }
  s += "  ]\n}\n";
  const bool ok = std::fwrite(s.data(), 1, s.size(), f) == s.size();
  return (std::fclose(f) == 0) && ok;
}

int run(int argc, char** argv) {
  bool exit_now = false;
  int exit_code = 0;
  options o;
  try {
    o = parse(argc, argv, exit_now, exit_code);
  } catch (const usage_error& e) {
    std::fprintf(stderr, "fusex-tour: %s\nRun 'fusex-tour --help' for the options.\n", e.message.c_str());
    return exit_usage;
  }
  if (exit_now) return exit_code;

  std::printf("fusex %s tour\n", fusex::version_string);
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  const bool have_gpu = err == cudaSuccess && count > 0;
  std::string device;
  if (!have_gpu) {
    // Without any driver CUDA answers cudaErrorInsufficientDriver, whose text ("driver version is
    // insufficient for CUDA runtime version") reads as "upgrade your driver": say what is likely.
    if (err == cudaErrorInsufficientDriver) {
      std::printf(
          "No usable CUDA device: no NVIDIA GPU or driver was found (CUDA reports "
          "cudaErrorInsufficientDriver: no driver is loaded, or it is older than this CUDA %d.%d "
          "runtime needs). fusex needs an NVIDIA GPU to run its kernels.\n",
          CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10);
    } else if (err == cudaErrorNoDevice || err == cudaSuccess) {
      std::printf(
          "No usable CUDA device: no NVIDIA GPU was found. fusex needs an NVIDIA GPU to run its "
          "kernels.\n");
    } else {
      std::printf("No usable CUDA device (%s: %s): fusex needs an NVIDIA GPU to run its kernels.\n",
                  cudaGetErrorName(err), cudaGetErrorString(err));
    }
    (void)cudaGetLastError();
    if (o.require_device) return exit_no_device;
  } else if (o.device >= count) {
    std::fprintf(stderr, "fusex-tour: --device %d, but there %s only %d device%s\n", o.device,
                 count == 1 ? "is" : "are", count, count == 1 ? "" : "s");
    return exit_usage;
  }
  const bool gpu = have_gpu && !o.force_host;
  if (!gpu) {
    // The host backend computes element by element: a small size keeps this quick.
    if (!o.set_batch) o.batch = 4;
    if (!o.set_hidden) o.hidden = 32;
    if (!o.set_layers) o.layers = 8;
    if (!o.set_seq) o.seq = 8;
    if (!o.set_blocks) o.blocks = 8;
    if (!o.set_steps) o.steps = 3;
    if (!o.set_warmup) o.warmup = 1;
    device = "host backend (CPU)";
    std::printf(
        "Running fusex's host backend on the CPU instead, at a small size: the same expressions, planned\n"
        "by the same planner, computed by the same operation functors. No GPU timings; versions (3)\n"
        "and (4) need a GPU.\n");
  } else {
    FUSEX_CUDA_CHECK(cudaSetDevice(o.device));
    cudaDeviceProp prop{};
    FUSEX_CUDA_CHECK(cudaGetDeviceProperties(&prop, o.device));
    device = prop.name;
    std::printf("device %d: %s, sm_%d%d, %d SMs\n", o.device, prop.name, prop.major, prop.minor,
                prop.multiProcessorCount);
    std::printf(
        "%d measured steps per version after %d warm-up steps; PDL %s for the fusex versions; float32 GEMMs %s\n",
        o.steps, o.warmup, o.pdl ? "on" : "off", o.tf32 ? "on TF32 tensor cores (--tf32)" : "in float32 (no TF32)");
  }

  std::vector<workload_result> results;
  cudaStream_t stream = nullptr;
  if (gpu) FUSEX_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (const std::string& name : o.workloads) {
    std::unique_ptr<workload> w = make_workload(name, !gpu, o);
    results.push_back(gpu ? run_device(*w, o, stream) : run_host(*w, o));
    print_table(results.back(), gpu);
  }
  if (gpu) {
    FUSEX_CUDA_CHECK(cudaStreamSynchronize(stream));
    FUSEX_CUDA_CHECK(cudaStreamDestroy(stream));
  }
  if (gpu) {
    std::printf(
        "\nkernels/step: counted by fusex::launch_monitor (graph replays: the graph's kernel nodes).\n"
        "speedup: over (1), by GPU time per step.\n");
  } else {
    std::printf(
        "\nevals/step: fusex evaluations per step (on a GPU, the kernels fusex::launch_monitor counts).\n"
        "speedup: over (1), by host time per step (the host backend; not a GPU measurement).\n");
  }
  if (!o.json.empty()) {
    if (!write_json(o.json, o, device, gpu, results)) return exit_failure;
    std::printf("wrote %s\n", o.json.c_str());
  }
  bool ok = true;
  for (const auto& wr : results)
    for (const auto& r : wr.versions) ok = ok && r.ok;
  if (!ok) {
    std::printf("A version's output differs from (1)'s beyond the tolerance (MISMATCH above).\n");
    return exit_failure;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "\nfusex-tour: %s\n", e.what());
    return exit_failure;
  }
}
