// Tensor views: what a request names (TensorDesc) and what a kernel reads (Tensor).
#ifndef KERNELD_KERNELS_TENSOR_H_
#define KERNELD_KERNELS_TENSOR_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kerneld/kernels/dtype.h"

namespace kd {

constexpr int kMaxRank = 4;

enum class BackendKind : uint8_t { kCpu = 0, kCuda = 1, kHip = 2 };
absl::string_view BackendName(BackendKind kind);

// Where memory lives: a backend and a device ordinal of that backend (0 for the CPU).
struct DeviceLoc {
  BackendKind kind = BackendKind::kCpu;
  int device = 0;
  bool operator==(const DeviceLoc& o) const { return kind == o.kind && device == o.device; }
  bool operator!=(const DeviceLoc& o) const { return !(*this == o); }
};

// A tensor as a request names it, before it is bound to memory. Strides are in elements; an
// empty stride list (strides_given == false) means contiguous row-major.
struct TensorDesc {
  bool present = false;
  uint64_t buffer_id = 0;
  uint64_t byte_offset = 0;
  DType dtype = DType::kInvalid;
  int rank = 0;
  int64_t shape[kMaxRank] = {};
  bool strides_given = false;
  int64_t strides[kMaxRank] = {};
};

// A tensor bound to memory a backend can address. `data` is a host pointer on the CPU backend
// and a device pointer on GPU backends. A default-constructed Tensor is "absent".
struct Tensor {
  void* data = nullptr;
  DType dtype = DType::kInvalid;
  int rank = 0;
  int64_t shape[kMaxRank] = {};
  int64_t strides[kMaxRank] = {};
  DeviceLoc loc;

  bool present() const { return rank > 0; }
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < rank; ++i) n *= shape[i];
    return n;
  }
  // Shape as "(8192, 4096)" for messages.
  std::string ShapeString() const;
  template <typename T>
  T* as() const {
    return static_cast<T*>(data);
  }
};

// Checks `desc` against a buffer of `buffer_size` bytes starting at `base` and returns the bound
// tensor. Rules (each failure is INVALID_ARGUMENT naming `field`): a known dtype; rank 1..4; every
// dimension >= 1; strides, when given, one per dimension with the last equal to 1 and each outer
// stride at least the extent of the dimensions inside it (no self-overlap), or, for rank 2, the
// transposed view (1, ld) with ld >= shape[0] (a column-major matrix, which only the fields whose
// op says so accept: Validate refuses it elsewhere); byte_offset a multiple of the element size;
// byte_offset + extent <= buffer_size, computed without overflow.
absl::StatusOr<Tensor> BindTensor(const TensorDesc& desc, void* base, uint64_t buffer_size,
                                  DeviceLoc loc, absl::string_view field);

}  // namespace kd

#endif  // KERNELD_KERNELS_TENSOR_H_
