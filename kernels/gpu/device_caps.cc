#include "kernels/gpu/device_caps.h"

#include "absl/strings/str_cat.h"

namespace kd {
namespace {

// NOTE: gfx940 and gfx941 are MI300 engineering targets with gfx942's FP8 (fnuz) instructions;
// gfx950 reads the same opcodes as the OCP formats (llvm/llvm-project#106160).
constexpr GpuArchCaps kArchs[] = {
    {"sm_70", "NVIDIA Volta", 32, Fp8MatrixFormats::kNone},
    {"sm_75", "NVIDIA Turing", 32, Fp8MatrixFormats::kNone},
    {"sm_80", "NVIDIA Ampere", 32, Fp8MatrixFormats::kNone},
    {"sm_86", "NVIDIA Ampere", 32, Fp8MatrixFormats::kNone},
    {"sm_87", "NVIDIA Ampere", 32, Fp8MatrixFormats::kNone},
    {"sm_89", "NVIDIA Ada", 32, Fp8MatrixFormats::kOcp},
    {"sm_90", "NVIDIA Hopper", 32, Fp8MatrixFormats::kOcp},
    {"sm_100", "NVIDIA Blackwell", 32, Fp8MatrixFormats::kOcp},
    {"sm_103", "NVIDIA Blackwell", 32, Fp8MatrixFormats::kOcp},
    {"sm_120", "NVIDIA Blackwell", 32, Fp8MatrixFormats::kOcp},
    {"gfx908", "AMD Instinct MI100", 64, Fp8MatrixFormats::kNone},
    {"gfx90a", "AMD Instinct MI200", 64, Fp8MatrixFormats::kNone},
    {"gfx940", "AMD Instinct MI300", 64, Fp8MatrixFormats::kFnuz},
    {"gfx941", "AMD Instinct MI300", 64, Fp8MatrixFormats::kFnuz},
    {"gfx942", "AMD Instinct MI300", 64, Fp8MatrixFormats::kFnuz},
    {"gfx950", "AMD Instinct MI350", 64, Fp8MatrixFormats::kOcp},
};

bool Takes(Fp8MatrixFormats formats, DType t) {
  if (formats == Fp8MatrixFormats::kOcp) return t == DType::kE4M3FN || t == DType::kE5M2;
  if (formats == Fp8MatrixFormats::kFnuz) return t == DType::kE4M3FNUZ;
  return false;
}

absl::string_view FormatsName(Fp8MatrixFormats formats) {
  return formats == Fp8MatrixFormats::kOcp ? "e4m3fn or e5m2 (OCP FP8)" : "e4m3fnuz";
}

}  // namespace

absl::Span<const GpuArchCaps> GpuArchTable() { return kArchs; }

const GpuArchCaps* FindGpuArch(absl::string_view arch) {
  arch = arch.substr(0, arch.find(':'));
  for (const GpuArchCaps& caps : kArchs) {
    if (caps.arch == arch) return &caps;
  }
  return nullptr;
}

absl::Status CheckFp8MatrixOperands(absl::string_view arch, absl::string_view device, DType a,
                                    DType b) {
  const GpuArchCaps* caps = FindGpuArch(arch);
  if (caps == nullptr) {
    return absl::UnimplementedError(
        absl::StrCat("the fp8 gemm does not know the architecture ", arch, " of ", device));
  }
  if (caps->fp8 == Fp8MatrixFormats::kNone) {
    return absl::UnimplementedError(absl::StrCat(device, " (", caps->arch, ", ", caps->family,
                                                 ") has no FP8 matrix instructions; the fp8 gemm "
                                                 "does not run on it"));
  }
  const struct {
    const char* field;
    DType dtype;
  } operands[] = {{"a", a}, {"b", b}};
  for (const auto& op : operands) {
    if (IsFp8(op.dtype) && !Takes(caps->fp8, op.dtype)) {
      return absl::FailedPreconditionError(
          absl::StrCat(op.field, "=", DTypeName(op.dtype), ": the matrix cores of ", device, " (",
                       caps->arch, ", ", caps->family, ") take ", FormatsName(caps->fp8),
                       " operands; quantize to that format"));
    }
  }
  return absl::OkStatus();
}

}  // namespace kd
