#pragma once
/// \file
/// The cuBLASLt bridge: fusex::cublas_error, one cuBLASLt handle per device, and one matmul call
/// with cached descriptors and algorithm. Needs cuBLASLt at link time (CMake target
/// fusex::matmul); the elementwise core never includes this header.
///
/// A plan (descriptors, layouts, the heuristic's algorithm and its workspace size) is made once per
/// key (device, dtypes, compute type, epilogue, shapes, leading dimensions, batch strides and the
/// pointers' alignments) and kept for the life of the process. Lookups take a mutex briefly; the
/// bias pointer, the one per-call attribute of a descriptor, is set and the call enqueued under
/// that entry's own mutex, so threads using one plan do not race. The workspace comes from fusex's
/// default resource, ordered on the stream (no host synchronisation); under a raw stream capture
/// (not a fusex::graph_capture) nothing is allocated and an algorithm without workspace runs (see
/// lt_matmul).

#include <fusex/config.hpp>
#include <fusex/device/launch_hook.hpp>
#include <fusex/device/launch.hpp>
#include <fusex/error.hpp>
#include <fusex/graph/capture_rules.hpp>
#include <fusex/matmul/chooser.hpp>
#include <fusex/matmul/epilogue.hpp>
#include <fusex/memory/buffer.hpp>
#include <fusex/memory/resource.hpp>

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace fusex {

/// A cuBLAS(Lt) call failed. Carries the status, its name and the call's text.
class cublas_error : public error {
 public:
  cublas_error(cublasStatus_t status, const char* call, const char* file, int line)
      : error(make_message(status, call, file, line)), status_(status), call_(call) {}

  /// The cuBLAS status returned by the failing call.
  cublasStatus_t status() const noexcept { return status_; }
  /// The status's name, e.g. "CUBLAS_STATUS_NOT_SUPPORTED".
  const char* status_name() const noexcept { return cublasLtGetStatusName(status_); }
  /// The text of the failing call, as written in the source.
  const char* call() const noexcept { return call_; }

 private:
  static std::string make_message(cublasStatus_t s, const char* call, const char* file, int line) {
    return std::string("fusex: cuBLAS call '") + call + "' failed with " + cublasLtGetStatusName(s) + " (" +
           cublasLtGetStatusString(s) + ") at " + file + ":" + std::to_string(line);
  }
  cublasStatus_t status_;
  const char* call_;
};

namespace detail {
inline void cublas_check(cublasStatus_t s, const char* call, const char* file, int line) {
  if (s != CUBLAS_STATUS_SUCCESS) throw cublas_error(s, call, file, line);
}
}  // namespace detail
}  // namespace fusex

/// Checks the cublasStatus_t returned by `call`; throws fusex::cublas_error naming the status and
/// the call on failure.
#define FUSEX_CUBLAS_CHECK(call) ::fusex::detail::cublas_check((call), #call, __FILE__, __LINE__)

namespace fusex::detail {

template <class T>
constexpr cudaDataType_t cuda_data_type() {
  if constexpr (std::is_same_v<T, float>) return CUDA_R_32F;
  else if constexpr (std::is_same_v<T, half>) return CUDA_R_16F;
  else if constexpr (std::is_same_v<T, bfloat16>) return CUDA_R_16BF;
  else if constexpr (std::is_same_v<T, double>) return CUDA_R_64F;
  else {
    static_assert(std::is_same_v<T, float>, "fusex: internal: no cudaDataType_t for this type");
    return CUDA_R_32F;
  }
}

/// The cuBLASLt handle of `device`, made on first use and kept for the life of the process
/// (handles are thread-safe; destroying one at exit could outlive the CUDA context).
inline cublasLtHandle_t lt_handle(int device) {
  static cublasLtHandle_t handles[max_cached_devices] = {};
  static std::once_flag once[max_cached_devices];
  if (device < 0 || device >= max_cached_devices) {
    throw invalid_argument("fusex: device ordinal " + std::to_string(device) + " is out of range");
  }
  std::call_once(once[device], [device] { FUSEX_CUBLAS_CHECK(cublasLtCreate(&handles[device])); });
  return handles[device];
}

/// One cuBLASLt matmul, fully described: D (rows x cols) = act(alpha op(A) op(B) + beta C + bias),
/// column-major, `batch` matrices.
struct lt_gemm {
  cudaDataType_t ab_type = CUDA_R_32F, cd_type = CUDA_R_32F;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  lt_operand a, b;
  lt_matrix_desc c, d;
  std::int64_t k = 0, batch = 1;
  const void* a_ptr = nullptr;
  const void* b_ptr = nullptr;
  const void* c_ptr = nullptr;
  void* d_ptr = nullptr;
  const void* bias_ptr = nullptr;
  float alpha = 1, beta = 0;
};

inline std::int64_t pointer_alignment(const void* p) {
  const auto v = reinterpret_cast<std::uintptr_t>(p);
  std::int64_t a = 256;
  while (a > 1 && v % static_cast<std::uintptr_t>(a) != 0) a /= 2;
  return a;
}

using lt_key = std::array<std::int64_t, 32>;
struct lt_key_hash {
  std::size_t operator()(const lt_key& k) const noexcept {
    std::uint64_t h = 1469598103934665603ull;  // FNV-1a over the fields
    for (std::int64_t x : k) {
      h ^= static_cast<std::uint64_t>(x);
      h *= 1099511628211ull;
    }
    return static_cast<std::size_t>(h);
  }
};

inline lt_key make_lt_key(int device, const lt_gemm& g, std::size_t max_workspace) {
  return lt_key{device,
                g.ab_type,
                g.cd_type,
                g.compute,
                g.epilogue,
                g.a.trans,
                g.b.trans,
                g.a.m.rows,
                g.a.m.cols,
                g.a.m.ld,
                g.a.m.batch_stride,
                g.b.m.rows,
                g.b.m.cols,
                g.b.m.ld,
                g.b.m.batch_stride,
                g.c.ld,
                g.c.batch_stride,
                g.d.rows,
                g.d.cols,
                g.d.ld,
                g.d.batch_stride,
                g.k,
                g.batch,
                pointer_alignment(g.a_ptr),
                pointer_alignment(g.b_ptr),
                pointer_alignment(g.c_ptr),
                pointer_alignment(g.d_ptr),
                g.bias_ptr != nullptr ? pointer_alignment(g.bias_ptr) : 0,
                static_cast<std::int64_t>(max_workspace),
                g.c_ptr == g.d_ptr,
                0,
                0};
}

/// A cached plan: descriptors, layouts and the chosen algorithm.
struct lt_plan {
  bool ok = false;  ///< the heuristic found an algorithm
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  std::size_t workspace = 0;
  std::mutex call;  ///< held while the bias pointer is set and the call enqueued
};

inline cublasLtMatrixLayout_t make_lt_layout(cudaDataType_t type, const lt_matrix_desc& m, std::int64_t batch) {
  cublasLtMatrixLayout_t L = nullptr;
  FUSEX_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&L, type, static_cast<std::uint64_t>(m.rows),
                                                static_cast<std::uint64_t>(m.cols), m.ld));
  if (batch > 1) {
    const std::int32_t count = static_cast<std::int32_t>(batch);
    const std::int64_t stride = m.batch_stride;
    FUSEX_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(L, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
    FUSEX_CUBLAS_CHECK(
        cublasLtMatrixLayoutSetAttribute(L, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
  }
  return L;
}

// Builds a plan (descriptors, heuristic). Called once per key, under the cache lock.
inline void build_lt_plan(lt_plan& p, cublasLtHandle_t handle, const lt_gemm& g, std::size_t max_workspace) {
  FUSEX_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.op, g.compute, CUDA_R_32F));
  const cublasOperation_t ta = g.a.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = g.b.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  FUSEX_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  FUSEX_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  FUSEX_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &g.epilogue, sizeof(g.epilogue)));
  if (g.bias_ptr != nullptr) {
    // The heuristic reads the pointer's alignment from it (the key includes that alignment).
    FUSEX_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias_ptr, sizeof(g.bias_ptr)));
  }
  p.a = make_lt_layout(g.ab_type, g.a.m, g.batch);
  p.b = make_lt_layout(g.ab_type, g.b.m, g.batch);
  lt_matrix_desc cm = g.d;
  cm.ld = g.c.ld;
  cm.batch_stride = g.c.batch_stride;
  p.c = make_lt_layout(g.cd_type, cm, g.batch);
  p.d = make_lt_layout(g.cd_type, g.d, g.batch);

  cublasLtMatmulPreference_t pref = nullptr;
  FUSEX_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  struct pref_guard {
    cublasLtMatmulPreference_t p;
    ~pref_guard() { cublasLtMatmulPreferenceDestroy(p); }
  } guard{pref};
  const std::uint64_t ws = max_workspace;
  FUSEX_CUBLAS_CHECK(
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  const std::uint32_t align[4] = {
      static_cast<std::uint32_t>(pointer_alignment(g.a_ptr)), static_cast<std::uint32_t>(pointer_alignment(g.b_ptr)),
      static_cast<std::uint32_t>(pointer_alignment(g.c_ptr)), static_cast<std::uint32_t>(pointer_alignment(g.d_ptr))};
  FUSEX_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align[0],
                                                          sizeof(align[0])));
  FUSEX_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align[1],
                                                          sizeof(align[1])));
  FUSEX_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align[2],
                                                          sizeof(align[2])));
  FUSEX_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align[3],
                                                          sizeof(align[3])));
  constexpr int wanted = 8;
  cublasLtMatmulHeuristicResult_t results[wanted] = {};
  int found = 0;
  const cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(handle, p.op, p.a, p.b, p.c, p.d, pref, wanted, results, &found);
  // NOT_SUPPORTED (no algorithm for this epilogue, dtype or layout) is an answer, not an error:
  // the caller falls back to a plain GEMM and an elementwise kernel.
  if (st == CUBLAS_STATUS_NOT_SUPPORTED || (st == CUBLAS_STATUS_SUCCESS && found == 0)) return;
  FUSEX_CUBLAS_CHECK(st);
  // The best-ranked algorithm without split-K, else the heuristic's first. On the H200 at batch 16
  // the heuristic's split-K picks take 31 us per fp32 256x256 layer (bench_matmul's bm_mlp through
  // cuBLASLt: 3170 us per 100 layers eagerly against 770 us with this rule). The price: fusex-tour's
  // transformer step in a graph takes 76.6 us with this rule against 69.3 us with the heuristic's
  // picks (two kernel nodes fewer, but slower GEMMs at [512 x 1024 x 256]). Under a raw capture with
  // no workspace cuBLASLt may still split K (3 kernel nodes seen for GEMM + epilogue kernel).
  int pick = 0;
  for (int i = 0; i < found; ++i) {
    std::int32_t splits = 1;
    std::size_t written = 0;
    if (results[i].state == CUBLAS_STATUS_SUCCESS &&
        cublasLtMatmulAlgoConfigGetAttribute(&results[i].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits, sizeof(splits),
                                             &written) == CUBLAS_STATUS_SUCCESS &&
        splits <= 1) {
      pick = i;
      break;
    }
  }
  p.algo = results[pick].algo;
  p.workspace = results[pick].workspaceSize;
  p.ok = true;
}

struct lt_cache {
  std::mutex mutex;
  std::unordered_map<lt_key, std::unique_ptr<lt_plan>, lt_key_hash> plans;
};
inline lt_cache& lt_plans() {
  static lt_cache* c = new lt_cache;  // never destroyed (plans may be used until the process ends)
  return *c;
}

// The cached plan for `g` with at most `max_ws` bytes of workspace (built on first use).
inline lt_plan* find_lt_plan(int device, cublasLtHandle_t handle, const lt_gemm& g, std::size_t max_ws) {
  const lt_key key = make_lt_key(device, g, max_ws);
  lt_cache& c = lt_plans();
  std::lock_guard<std::mutex> lock(c.mutex);
  auto it = c.plans.find(key);
  if (it == c.plans.end()) {
    auto p = std::make_unique<lt_plan>();
    build_lt_plan(*p, handle, g, max_ws);
    it = c.plans.emplace(key, std::move(p)).first;
  }
  return it->second.get();
}

/// Whether `stream` is being captured by someone other than a fusex::graph_capture (a raw
/// cudaStreamBeginCapture): fusex's resource must not allocate for it (no graph-private pool).
inline bool foreign_capture(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  unsigned long long id = 0;
  FUSEX_CUDA_CHECK(cudaStreamGetCaptureInfo(stream, &status, &id));
  if (status == cudaStreamCaptureStatusNone) return false;
  return !capture_registry::instance().find_id(id, nullptr);
}

/// Enqueues one cuBLASLt matmul on `stream`. Returns false, having enqueued nothing, when cuBLASLt
/// has no algorithm for the problem (an unsupported epilogue/dtype/layout combination). Throws
/// fusex::cublas_error on any other cuBLAS failure.
///
/// Workspace: eagerly and under fusex::graph_capture, the plan's workspace comes from the default
/// resource, ordered on the stream (under a fusex capture: the capture's graph-private pool, so the
/// graph may be replayed on any stream). Under a raw cudaStreamBeginCapture nothing is allocated:
/// the call uses the plan for the same problem without workspace (cached separately; cuBLASLt
/// always has such algorithms, possibly slower ones, whose results may differ from the eager
/// call's in the last bits).
inline bool lt_matmul(const lt_gemm& g, cudaStream_t stream) {
  const int device = current_device();
  const bool no_workspace = foreign_capture(stream);
  const std::size_t max_ws = no_workspace ? 0 : matmul_chooser().max_workspace_bytes;
  const cublasLtHandle_t handle = lt_handle(device);
  lt_plan* plan = find_lt_plan(device, handle, g, max_ws);
  if (!plan->ok) return false;
  buffer<unsigned char> workspace;
  if (plan->workspace > 0) workspace = buffer<unsigned char>(plan->workspace, stream);
  std::lock_guard<std::mutex> lock(plan->call);
  if (g.bias_ptr != nullptr) {
    FUSEX_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias_ptr, sizeof(g.bias_ptr)));
  }
  FUSEX_CUBLAS_CHECK(cublasLtMatmul(handle, plan->op, &g.alpha, g.a_ptr, plan->a, g.b_ptr, plan->b, &g.beta,
                                    g.c_ptr != nullptr ? g.c_ptr : g.d_ptr, plan->c, g.d_ptr, plan->d, &plan->algo,
                                    workspace.data(), plan->workspace, stream));
  note_launch();  // fusex::launch_monitor counts the cuBLASLt call as one launch
  return true;
}

/// cuBLASLt's epilogue for an activation with or without a bias.
inline cublasLtEpilogue_t lt_epilogue_of(epilogue_activation act, bool bias) {
  switch (act) {
    case epilogue_activation::relu: return bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
    case epilogue_activation::gelu_tanh: return bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
    default: return bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
  }
}

inline const char* lt_epilogue_name(cublasLtEpilogue_t e) {
  switch (e) {
    case CUBLASLT_EPILOGUE_RELU_BIAS: return "CUBLASLT_EPILOGUE_RELU_BIAS";
    case CUBLASLT_EPILOGUE_RELU: return "CUBLASLT_EPILOGUE_RELU";
    case CUBLASLT_EPILOGUE_GELU_BIAS: return "CUBLASLT_EPILOGUE_GELU_BIAS";
    case CUBLASLT_EPILOGUE_GELU: return "CUBLASLT_EPILOGUE_GELU";
    case CUBLASLT_EPILOGUE_BIAS: return "CUBLASLT_EPILOGUE_BIAS";
    default: return "CUBLASLT_EPILOGUE_DEFAULT";
  }
}

}  // namespace fusex::detail
