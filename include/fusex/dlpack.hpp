#pragma once
/// \file
/// DLPack interop: fusex::from_dlpack, a view over any DLPack tensor (PyTorch, CuPy, JAX, ...), and
/// fusex::to_dlpack, a fusex::tensor handed to a framework that takes DLPack.
///
/// fusex does not ship dlpack.h (nor copy it): these are templates over the caller's own DLPack
/// types (`DLTensor`, `DLManagedTensor`, `DLManagedTensorVersioned` from dlpack.h, or a framework's
/// copy of it, such as PyTorch's ATen/dlpack.h), reading and writing their fields by name. Only the
/// ABI's numbers (device types, type codes, the read-only flag), which are fixed by the published
/// standard, are written here. Any DLPack header from 0.4 (which named the `device` field) works.

#include <fusex/core/dtype.hpp>
#include <fusex/core/shape.hpp>
#include <fusex/core/view.hpp>
#include <fusex/error.hpp>
#include <fusex/tensor.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

namespace fusex {

/// The numbers of DLPack's ABI that fusex reads (dlpack.h's DLDeviceType and DLDataTypeCode).
namespace dlpack {
inline constexpr int device_cpu = 1;            ///< kDLCPU
inline constexpr int device_cuda = 2;           ///< kDLCUDA
inline constexpr int device_cuda_host = 3;      ///< kDLCUDAHost (pinned host memory)
inline constexpr int device_cuda_managed = 13;  ///< kDLCUDAManaged
inline constexpr int code_int = 0;              ///< kDLInt
inline constexpr int code_uint = 1;             ///< kDLUInt
inline constexpr int code_float = 2;            ///< kDLFloat
inline constexpr int code_bfloat = 4;           ///< kDLBfloat
inline constexpr int code_bool = 6;             ///< kDLBool
inline constexpr std::uint64_t flag_read_only = 1;  ///< DLPACK_FLAG_BITMASK_READ_ONLY
}  // namespace dlpack

namespace detail {
struct dlpack_type {
  int code, bits;
};
/// DLPack's code and bit width of a fusex element type.
template <class T>
constexpr dlpack_type dlpack_type_of() {
  constexpr dtype_id d = dtype_of<T>();
  if constexpr (d == dtype_id::float32) return {dlpack::code_float, 32};
  else if constexpr (d == dtype_id::float64) return {dlpack::code_float, 64};
  else if constexpr (d == dtype_id::float16) return {dlpack::code_float, 16};
  else if constexpr (d == dtype_id::bfloat16) return {dlpack::code_bfloat, 16};
  else if constexpr (d == dtype_id::int8) return {dlpack::code_int, 8};
  else if constexpr (d == dtype_id::uint8) return {dlpack::code_uint, 8};
  else if constexpr (d == dtype_id::int32) return {dlpack::code_int, 32};
  else if constexpr (d == dtype_id::int64) return {dlpack::code_int, 64};
  else return {dlpack::code_bool, 8};  // (is_dtype_v admits nothing else)
}

inline std::string dlpack_type_text(int code, int bits, int lanes) {
  const char* name = code == dlpack::code_int     ? "int"
                     : code == dlpack::code_uint  ? "uint"
                     : code == dlpack::code_float ? "float"
                     : code == dlpack::code_bfloat ? "bfloat"
                     : code == dlpack::code_bool  ? "bool"
                                                  : nullptr;
  std::string s = name ? std::string(name) + std::to_string(bits) : "type code " + std::to_string(code) + ", " +
                                                                          std::to_string(bits) + " bits";
  if (lanes != 1) s += " x " + std::to_string(lanes) + " lanes";
  return s;
}

inline std::string dlpack_device_text(int type, int id) {
  const char* name = type == dlpack::device_cpu            ? "CPU"
                     : type == dlpack::device_cuda         ? "CUDA"
                     : type == dlpack::device_cuda_host    ? "CUDA host (pinned)"
                     : type == dlpack::device_cuda_managed ? "CUDA managed"
                                                           : nullptr;
  return (name ? std::string(name) : "device type " + std::to_string(type)) + " device " + std::to_string(id);
}

template <class M, class = void>
struct dlpack_versioned : std::false_type {};
template <class M>
struct dlpack_versioned<M, std::void_t<decltype(std::declval<const M&>().flags),
                                       decltype(std::declval<const M&>().version.major)>> : std::true_type {};
template <class M, class = void>
struct dlpack_managed : std::false_type {};
template <class M>
struct dlpack_managed<M, std::void_t<decltype(std::declval<const M&>().dl_tensor.data)>> : std::true_type {};
}  // namespace detail

/// A view of a DLPack tensor's elements, as type T (const T for read-only access). `t` is a
/// `DLTensor` (by reference), or a `DLManagedTensor` / `DLManagedTensorVersioned` (by pointer; a
/// versioned tensor marked read-only needs a const T). The view does not own the memory: keep the
/// DLPack tensor (and the framework's tensor behind it) alive while the view is used.
///
/// Throws fusex::invalid_argument when fusex cannot take the tensor, naming what: a dtype other
/// than T's (or vector lanes), memory other than CPU, CUDA (of the calling thread's current
/// device), CUDA host (pinned) or CUDA managed memory, more than fusex::max_rank dimensions, a negative
/// stride (reversed views: make them contiguous first), a data pointer plus byte_offset not aligned
/// for T, a null pointer with elements, or a DLPack major version other than 1 (versioned form).
/// (For CUDA memory it asks for the current device: fusex::cuda_error where that fails.)
/// Views of CPU memory are for fusex::host::eval, the others for fusex::eval.
template <class T, class DLTensorT,
          std::enable_if_t<!std::is_pointer_v<DLTensorT> && !std::is_null_pointer_v<DLTensorT> &&
                               !detail::dlpack_managed<DLTensorT>::value,
                           int> = 0>
view<T> from_dlpack(const DLTensorT& t) {
  using V = std::remove_const_t<T>;
  // (The message's prefix is built only on the way to a throw: a conversion per call stays cheap.)
  const auto what = [] { return "fusex::from_dlpack<" + std::string(dtype_name(dtype_of<V>())) + ">: "; };
  constexpr detail::dlpack_type want = detail::dlpack_type_of<V>();
  const int code = static_cast<int>(t.dtype.code), bits = static_cast<int>(t.dtype.bits);
  const int lanes = static_cast<int>(t.dtype.lanes);
  if (code != want.code || bits != want.bits || lanes != 1) {
    throw invalid_argument(what() + "the tensor holds " + detail::dlpack_type_text(code, bits, lanes) + ", not " +
                           dtype_name(dtype_of<V>()));
  }
  const int dev_type = static_cast<int>(t.device.device_type), dev_id = static_cast<int>(t.device.device_id);
  if (dev_type == dlpack::device_cuda) {
    const int current = detail::current_device();
    if (dev_id != current) {
      throw invalid_argument(what() + "the tensor is in the memory of CUDA device " + std::to_string(dev_id) +
                             ", and this thread's current device is " + std::to_string(current) +
                             " (cudaSetDevice first: fusex evaluates on the current device)");
    }
  } else if (dev_type != dlpack::device_cpu && dev_type != dlpack::device_cuda_host &&
             dev_type != dlpack::device_cuda_managed) {
    throw invalid_argument(what() + "the tensor is on " + detail::dlpack_device_text(dev_type, dev_id) +
                           "; fusex takes CPU, CUDA, CUDA host and CUDA managed memory");
  }
  const int rank = static_cast<int>(t.ndim);
  if (rank < 0 || rank > max_rank) {
    throw invalid_argument(what() + "the tensor has " + std::to_string(rank) + " dimensions; fusex views have 0 to " +
                           std::to_string(max_rank));
  }
  if (rank > 0 && t.shape == nullptr) throw invalid_argument(what() + "the tensor's shape pointer is null");
  shape_t shape;
  strides_t strides;
  for (int d = 0; d < rank; ++d) {
    const std::int64_t e = static_cast<std::int64_t>(t.shape[d]);
    if (e < 0) throw invalid_argument(what() + "dimension " + std::to_string(d) + " has extent " + std::to_string(e));
    shape.push_back(e);
  }
  if (t.strides == nullptr) {  // (DLPack before 1.2: null strides mean compact row-major)
    strides = contiguous_strides(shape);
  } else {
    for (int d = 0; d < rank; ++d) {
      std::int64_t s = static_cast<std::int64_t>(t.strides[d]);
      // A dimension of one element never moves: frameworks leave any stride there.
      if (shape[d] <= 1) s = s < 0 ? 0 : s;
      if (s < 0) {
        throw invalid_argument(what() + "dimension " + std::to_string(d) + " of shape " + shape.str() + " has stride " +
                               std::to_string(s) + "; fusex views take non-negative strides (make it contiguous)");
      }
      strides.push_back(s);
    }
  }
  const auto address = reinterpret_cast<std::uintptr_t>(t.data) + static_cast<std::uintptr_t>(t.byte_offset);
  if (address % alignof(V) != 0) {
    throw invalid_argument(what() + "the data pointer plus byte_offset " + std::to_string(t.byte_offset) +
                           " is not aligned to " + std::to_string(alignof(V)) + " bytes");
  }
  if (t.data == nullptr && numel(shape) > 0) {
    throw invalid_argument(what() + "the tensor of shape " + shape.str() + " has a null data pointer");
  }
  T* p = t.data == nullptr ? nullptr : reinterpret_cast<T*>(address);
  return view<T>(p, shape, strides);
}

/// The same for a `DLManagedTensor*` or `DLManagedTensorVersioned*` (not consumed: its deleter is
/// still the caller's to call when done with the view).
template <class T, class M, std::enable_if_t<detail::dlpack_managed<M>::value, int> = 0>
view<T> from_dlpack(const M* m) {
  if (m == nullptr) throw invalid_argument("fusex::from_dlpack: the managed tensor pointer is null");
  if constexpr (detail::dlpack_versioned<M>::value) {
    if (m->version.major != 1) {
      throw invalid_argument("fusex::from_dlpack: DLPack major version " + std::to_string(m->version.major) +
                             "; fusex reads version 1");
    }
    if ((static_cast<std::uint64_t>(m->flags) & dlpack::flag_read_only) != 0 && !std::is_const_v<T>) {
      throw invalid_argument("fusex::from_dlpack: the tensor is read-only; ask for a view of const elements");
    }
  }
  return from_dlpack<T>(m->dl_tensor);
}

namespace detail {
// What a tensor handed out by to_dlpack keeps alive: the tensor and the shape and strides that its
// DLTensor points to.
template <class T, class M>
struct dlpack_holder {
  M managed{};
  tensor<T> owned;
  std::int64_t shape[max_rank] = {};
  std::int64_t strides[max_rank] = {};
  static void deleter(M* self) noexcept {
    // (The tensor's destructor frees its memory ordered on its stream: set to the consumer's.)
    delete static_cast<dlpack_holder*>(self->manager_ctx);
  }
};
}  // namespace detail

/// Hands the tensor `t` to a framework that takes DLPack: a new `M` (the caller's DLManagedTensor or
/// DLManagedTensorVersioned type) that owns it. The framework calls its deleter when done, which
/// frees the memory ordered on `consumer` (the stream the framework uses, e.g. PyTorch's current
/// stream: it must outlive the tensor, and so must the tensor's memory resource). Its device and
/// kind (device, pinned or managed memory) are asked of CUDA (cudaPointerGetAttributes). Made ready for `consumer` here: work already queued on the
/// tensor's own stream is ordered before `consumer`'s next work (an event, when they differ).
/// Example (PyTorch): `at::fromDLPack(fusex::to_dlpack<DLManagedTensor>(std::move(t), stream))`.
template <class M, class T>
M* to_dlpack(tensor<T>&& t, cudaStream_t consumer) {
  static_assert(detail::dlpack_managed<M>::value, "fusex::to_dlpack<M>: M is DLPack's DLManagedTensor or DLManagedTensorVersioned");
  if (t.stream() != consumer) {
    cudaEvent_t ready = nullptr;
    FUSEX_CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
    cudaError_t e = cudaEventRecord(ready, t.stream());
    if (e == cudaSuccess) e = cudaStreamWaitEvent(consumer, ready, 0);
    const cudaError_t d = cudaEventDestroy(ready);
    FUSEX_CUDA_CHECK(e);
    FUSEX_CUDA_CHECK(d);
  }
  // Where the memory is (the resource's device, or pinned or managed memory), asked before
  // anything is owned here, so that a throw leaves `t` with the caller.
  int dev_type = dlpack::device_cuda, dev_id = 0;
  if (t.data() == nullptr) {  // (no elements)
    dev_id = detail::current_device();
  } else {
    cudaPointerAttributes attr{};
    FUSEX_CUDA_CHECK(cudaPointerGetAttributes(&attr, t.data()));
    dev_id = attr.device;
    if (attr.type == cudaMemoryTypeHost) {
      dev_type = dlpack::device_cuda_host;
      dev_id = 0;
    } else if (attr.type == cudaMemoryTypeManaged) {
      dev_type = dlpack::device_cuda_managed;
    } else if (attr.type != cudaMemoryTypeDevice) {
      throw invalid_argument("fusex::to_dlpack: the tensor's memory is not CUDA memory (cudaPointerGetAttributes)");
    }
  }
  auto holder = std::make_unique<detail::dlpack_holder<T, M>>();
  auto* h = holder.get();
  h->owned = std::move(t);
  h->owned.storage().set_stream(consumer);
  const shape_t& s = h->owned.shape();
  const strides_t st = contiguous_strides(s);
  for (int d = 0; d < s.rank(); ++d) {
    h->shape[d] = s[d];
    h->strides[d] = st[d];
  }
  M& m = h->managed;
  if constexpr (detail::dlpack_versioned<M>::value) {
    m.version.major = 1;
    m.version.minor = 0;
    m.flags = 0;
  }
  auto& dl = m.dl_tensor;
  dl.data = h->owned.data();
  dl.device.device_type = static_cast<decltype(dl.device.device_type)>(dev_type);
  dl.device.device_id = static_cast<decltype(dl.device.device_id)>(dev_id);
  dl.ndim = static_cast<decltype(dl.ndim)>(s.rank());
  constexpr detail::dlpack_type want = detail::dlpack_type_of<T>();
  dl.dtype.code = static_cast<decltype(dl.dtype.code)>(want.code);
  dl.dtype.bits = static_cast<decltype(dl.dtype.bits)>(want.bits);
  dl.dtype.lanes = static_cast<decltype(dl.dtype.lanes)>(1);
  dl.shape = h->shape;
  dl.strides = h->strides;
  dl.byte_offset = 0;
  m.manager_ctx = h;
  m.deleter = &detail::dlpack_holder<T, M>::deleter;
  holder.release();  // now owned by the DLPack tensor: its deleter deletes it
  return &m;
}

}  // namespace fusex
