// What a GPU architecture's matrix cores can do with FP8, in one table keyed by the architecture
// name the backends report (DeviceProperties::arch: "sm_90", "gfx942"). Host-only and free of any
// vendor runtime, so that the rule is tested where no GPU is present and every GPU backend (and the
// GEMM dispatch) asks the same question.
//
// FP8 comes in two encodings that share nothing but the width: the OCP formats e4m3fn (max 448)
// and e5m2, which NVIDIA (sm_89 on) and AMD's gfx950 (MI350/MI355) feed to their matrix cores, and
// the "fnuz" formats (e4m3fnuz, max 240: one more exponent bias, no negative zero, 0x80 is NaN),
// which gfx940-gfx942 (MI300) compute in. A matrix core reads only its own encoding: an operand of
// the other one is a precondition the caller must meet (quantize to the device's format), not a
// missing kernel. gfx90a (MI250X) and NVIDIA parts before sm_89 have no FP8 matrix instructions.
#ifndef KERNELD_KERNELS_GPU_DEVICE_CAPS_H_
#define KERNELD_KERNELS_GPU_DEVICE_CAPS_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "kerneld/kernels/dtype.h"

namespace kd {

enum class Fp8MatrixFormats {
  kNone,  // no FP8 matrix instructions
  kOcp,   // e4m3fn and e5m2
  kFnuz,  // e4m3fnuz (and e5m2fnuz, which kerneld has no dtype for)
};

struct GpuArchCaps {
  absl::string_view arch;    // "sm_90", "gfx942"
  absl::string_view family;  // what the architecture is sold as, for messages
  int wave_size;             // lanes of a warp / wavefront
  Fp8MatrixFormats fp8;      // the FP8 operands its matrix cores take
};

// Every entry of the table: NVIDIA by compute capability, then AMD by gfx target.
absl::Span<const GpuArchCaps> GpuArchTable();

// The entry of `arch` (a gfx target's feature suffix such as ":sramecc+:xnack-" is ignored);
// nullptr for an architecture the table does not know.
const GpuArchCaps* FindGpuArch(absl::string_view arch);

// Whether an FP8 GEMM with operands `a` and `b` can run on the matrix cores of `arch`
// (`device` names the device in messages):
//   OK                    both operands are the architecture's FP8 encoding;
//   FAILED_PRECONDITION   an operand is FP8 of the other encoding ("a=e4m3fn: the matrix cores of
//                         AMD Instinct MI300X (gfx942) take e4m3fnuz ...");
//   UNIMPLEMENTED         the architecture has no FP8 matrix instructions, or is not in the table.
// An operand that is not FP8 at all is left to the kernel's own check.
absl::Status CheckFp8MatrixOperands(absl::string_view arch, absl::string_view device, DType a,
                                    DType b);

}  // namespace kd

#endif  // KERNELD_KERNELS_GPU_DEVICE_CAPS_H_
