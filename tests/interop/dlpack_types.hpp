// The DLPack types as a framework's copy of dlpack.h declares them (the tests' stand-in: fusex
// ships no dlpack.h and reads the caller's types by their field names). Written from the published
// ABI: DLPack 1.x (DLManagedTensorVersioned) and the legacy DLManagedTensor.
#pragma once
#include <cstdint>

namespace fxt_dl {
enum DLDeviceType : std::int32_t { kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3, kDLROCM = 10, kDLCUDAManaged = 13 };
struct DLDevice {
  DLDeviceType device_type;
  std::int32_t device_id;
};
enum DLDataTypeCode : std::uint8_t { kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBfloat = 4, kDLBool = 6 };
struct DLDataType {
  std::uint8_t code;
  std::uint8_t bits;
  std::uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  std::int32_t ndim;
  DLDataType dtype;
  std::int64_t* shape;
  std::int64_t* strides;
  std::uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};
struct DLPackVersion {
  std::uint32_t major;
  std::uint32_t minor;
};
struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(DLManagedTensorVersioned* self);
  std::uint64_t flags;
  DLTensor dl_tensor;
};

// A DLTensor over `data` (host memory unless `device` says otherwise).
inline DLTensor make_tensor(void* data, DLDataType t, std::int64_t* shape, int ndim, std::int64_t* strides = nullptr,
                            std::uint64_t byte_offset = 0, DLDevice device = {kDLCPU, 0}) {
  return DLTensor{data, device, ndim, t, shape, strides, byte_offset};
}
}  // namespace fxt_dl
