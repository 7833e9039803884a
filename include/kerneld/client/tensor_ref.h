// Building the TensorRef messages that name tensors inside registered buffers.
#ifndef KERNELD_CLIENT_TENSOR_REF_H_
#define KERNELD_CLIENT_TENSOR_REF_H_

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kerneld/v1/kerneld.pb.h"

namespace kd {
namespace client {

namespace v1 = ::kerneld::v1;

// Bytes per element of a wire dtype; 0 for DTYPE_UNSPECIFIED and values this client does not
// know.
size_t DTypeSize(v1::DType dtype);

// Fluent builder of a TensorRef:
//
//   v1::TensorRef x = TensorRefBuilder(buffer_id).Dtype(v1::DTYPE_BF16).Shape({m, k}).Build();
//
// Offset defaults to 0 and strides to "contiguous row-major" (the empty list). The builder does
// not validate; the daemon does (see the TensorRef comment in kerneld.proto), and TensorEndByte()
// checks the same rules on the client side when a caller wants to size a buffer.
class TensorRefBuilder {
 public:
  explicit TensorRefBuilder(uint64_t buffer_id) { ref_.set_buffer_id(buffer_id); }

  TensorRefBuilder& Offset(uint64_t byte_offset) {
    ref_.set_byte_offset(byte_offset);
    return *this;
  }
  TensorRefBuilder& Dtype(v1::DType dtype) {
    ref_.set_dtype(dtype);
    return *this;
  }
  TensorRefBuilder& Shape(absl::Span<const int64_t> shape);
  TensorRefBuilder& Shape(std::initializer_list<int64_t> shape) {
    return Shape(absl::MakeConstSpan(shape.begin(), shape.size()));
  }
  // Strides in elements, one per dimension, the last equal to 1.
  TensorRefBuilder& Strides(absl::Span<const int64_t> strides);
  TensorRefBuilder& Strides(std::initializer_list<int64_t> strides) {
    return Strides(absl::MakeConstSpan(strides.begin(), strides.size()));
  }

  const v1::TensorRef& Build() const { return ref_; }

 private:
  v1::TensorRef ref_;
};

// A contiguous row-major tensor: the common case in one call.
v1::TensorRef MakeTensorRef(uint64_t buffer_id, v1::DType dtype,
                            std::initializer_list<int64_t> shape, uint64_t byte_offset = 0);

// One past the last byte `ref` touches (byte_offset + extent), the buffer size it needs.
// A tensor with a zero dimension touches nothing and ends at byte_offset (the proto allows 0
// only where an op says so; the daemon checks that). INVALID_ARGUMENT, naming the field, for:
// an unknown dtype, rank outside 1..4, a negative dimension, strides given but not one per
// dimension or with the last != 1 or an outer stride smaller than the extent inside it, a
// byte_offset that is not a multiple of the element size, or a result that overflows 64 bits.
absl::StatusOr<uint64_t> TensorEndByte(const v1::TensorRef& ref);

// Bytes of a contiguous tensor of `shape`; the same errors as TensorEndByte.
absl::StatusOr<uint64_t> ContiguousBytes(v1::DType dtype, absl::Span<const int64_t> shape);

// The row-major strides of `shape`, in elements.
std::vector<int64_t> RowMajorStrides(absl::Span<const int64_t> shape);

}  // namespace client
}  // namespace kd

#endif  // KERNELD_CLIENT_TENSOR_REF_H_
