// The HIP backend (kerneld_hip: the GPU backend's source built by hipcc) through the registry.
// With an AMD GPU: its devices, their gfx architecture, and the FP8 GEMM rule of device_caps.h
// on them. Without one (CI, this project's development machines): the backend reports itself
// unavailable with the runtime's reason, `--backend=hip` fails with FAILED_PRECONDITION saying
// so, and `auto` still starts on the CPU backend. The kernels themselves are checked without a
// device by hip_kernels_isa_test.
#include "kerneld/kernels/hip_backend.h"

#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kerneld/kernels/registry.h"

namespace kd {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(HipBackendTest, IsCompiledIn) { EXPECT_TRUE(BackendCompiledIn(BackendKind::kHip)); }

TEST(HipBackendTest, ReportsItsDevicesOrWhyItHasNone) {
  absl::StatusOr<std::unique_ptr<Backend>> hip = OpenHipBackend(0);
  if (!hip.ok()) {
    EXPECT_EQ(hip.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(std::string(hip.status().message()),
                HasSubstr("the hip backend found no device (hip"));
    EXPECT_THAT(std::string(hip.status().message()), HasSubstr("/dev/kfd"));
    return;
  }
  ASSERT_GT((*hip)->DeviceCount(), 0);
  EXPECT_EQ((*hip)->kind(), BackendKind::kHip);
  for (int d = 0; d < (*hip)->DeviceCount(); ++d) {
    const DeviceProperties p = (*hip)->Properties(d);
    EXPECT_THAT(p.arch, StartsWith("gfx"));
    EXPECT_EQ(p.arch.find(':'), std::string::npos) << "target features are not part of arch";
    EXPECT_FALSE(p.runtime_version.empty());
  }
}

TEST(HipBackendTest, AskingForHipWithoutADeviceFailsAndAutoStillStarts) {
  absl::StatusOr<std::unique_ptr<Backend>> hip = OpenHipBackend(0);
  if (hip.ok()) GTEST_SKIP() << "an AMD GPU is present";
  RegistryOptions options;
  options.preferred = "hip";
  options.cpu_threads = 1;
  absl::StatusOr<std::unique_ptr<BackendRegistry>> asked = BackendRegistry::Create(options);
  ASSERT_FALSE(asked.ok());
  EXPECT_EQ(asked.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(asked.status().message()),
              HasSubstr("backend=hip was asked for but is unavailable: the hip backend found no "
                        "device"));

  options.preferred = "auto";
  absl::StatusOr<std::unique_ptr<BackendRegistry>> any = BackendRegistry::Create(options);
  ASSERT_TRUE(any.ok()) << any.status();
  EXPECT_EQ((*any)->Get(BackendKind::kHip), nullptr);
  ASSERT_NE((*any)->Get(BackendKind::kCpu), nullptr);
  bool hip_reason = false;
  for (const std::string& why : (*any)->Unavailable()) {
    hip_reason = hip_reason || why.find("the hip backend found no device") != std::string::npos;
  }
  EXPECT_TRUE(hip_reason);
}

}  // namespace
}  // namespace kd
