#include "kerneld/kernels/tensor.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kd {

absl::string_view BackendName(BackendKind kind) {
  switch (kind) {
    case BackendKind::kCpu:
      return "cpu";
    case BackendKind::kCuda:
      return "cuda";
    case BackendKind::kHip:
      return "hip";
  }
  return "unknown";
}

std::string Tensor::ShapeString() const {
  return absl::StrCat("(", absl::StrJoin(shape, shape + rank, ", "), ")");
}

absl::StatusOr<Tensor> BindTensor(const TensorDesc& desc, void* base, uint64_t buffer_size,
                                  DeviceLoc loc, absl::string_view field) {
  auto invalid = [&](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".", parts...));
  };
  const size_t elem = DTypeSize(desc.dtype);
  if (elem == 0) return invalid("dtype is unspecified or unknown");
  if (desc.rank < 1 || desc.rank > kMaxRank) {
    return invalid("shape has rank ", desc.rank, "; must be 1..", kMaxRank);
  }
  Tensor t;
  t.dtype = desc.dtype;
  t.rank = desc.rank;
  t.loc = loc;
  for (int i = 0; i < desc.rank; ++i) {
    if (desc.shape[i] < 1) return invalid("shape[", i, "]=", desc.shape[i], " must be >= 1");
    t.shape[i] = desc.shape[i];
  }
  // A 2-D view whose dimensions are transposed in memory (strides (1, ld), ld >= shape[0]): how a
  // client names a K-block-major scale tensor as the (rows, blocks) view a GEMM takes. Which
  // fields accept it is the op's rule (Validate); here it only has to stay in bounds.
  const bool transposed_2d = desc.strides_given && desc.rank == 2 && desc.strides[0] == 1 &&
                             desc.strides[1] != 1 && desc.strides[1] >= desc.shape[0];
  if (transposed_2d) {
    for (int i = 0; i < 2; ++i) t.strides[i] = desc.strides[i];
  } else if (desc.strides_given) {
    if (desc.strides[desc.rank - 1] != 1) {
      return invalid("strides[", desc.rank - 1, "]=", desc.strides[desc.rank - 1],
                     " must be 1 (the innermost dimension is contiguous)");
    }
    // Each outer stride must step over everything inside it, so no element is reachable twice.
    int64_t inner_extent = desc.shape[desc.rank - 1];
    for (int i = desc.rank - 2; i >= 0; --i) {
      if (desc.strides[i] < inner_extent) {
        return invalid("strides[", i, "]=", desc.strides[i], " must be >= ", inner_extent,
                       " (the extent of the dimensions inside it)");
      }
      int64_t next;
      if (__builtin_mul_overflow(desc.strides[i], desc.shape[i] - 1, &next) ||
          __builtin_add_overflow(next, inner_extent, &inner_extent)) {
        return invalid("strides[", i, "]=", desc.strides[i], " overflows 64 bits");
      }
      inner_extent = std::max(inner_extent, desc.strides[i]);
    }
    for (int i = 0; i < desc.rank; ++i) t.strides[i] = desc.strides[i];
  } else {
    int64_t stride = 1;
    for (int i = desc.rank - 1; i >= 0; --i) {
      t.strides[i] = stride;
      if (__builtin_mul_overflow(stride, desc.shape[i], &stride)) {
        return invalid("shape ", t.ShapeString(), " has more than 2^63 elements");
      }
    }
  }
  if (desc.byte_offset % elem != 0) {
    return invalid("byte_offset=", desc.byte_offset, " is not a multiple of the ",
                   DTypeName(desc.dtype), " element size ", elem);
  }
  // Extent in elements: 1 + sum((shape[i]-1) * strides[i]).
  uint64_t last = 0;
  for (int i = 0; i < desc.rank; ++i) {
    uint64_t step;
    if (__builtin_mul_overflow(static_cast<uint64_t>(t.shape[i] - 1),
                               static_cast<uint64_t>(t.strides[i]), &step) ||
        __builtin_add_overflow(last, step, &last)) {
      return invalid("shape ", t.ShapeString(), " with its strides overflows 64 bits");
    }
  }
  uint64_t bytes, end;
  if (__builtin_mul_overflow(last + 1, static_cast<uint64_t>(elem), &bytes) ||
      __builtin_add_overflow(bytes, desc.byte_offset, &end)) {
    return invalid("byte_offset + extent overflows 64 bits");
  }
  if (end > buffer_size) {
    return invalid("byte_offset=", desc.byte_offset, " + extent=", bytes, " bytes of ",
                   t.ShapeString(), " ", DTypeName(desc.dtype), " exceeds the buffer size ",
                   buffer_size);
  }
  t.data = static_cast<char*>(base) + desc.byte_offset;
  return t;
}

}  // namespace kd
