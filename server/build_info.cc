#include "server/build_info.h"

#include "absl/strings/str_cat.h"
#include "kd_git_commit.h"
#include "kerneld/kernels/registry.h"
#include "server/daemon.h"

namespace kd {

const char* BuildCommit() { return KD_GIT_COMMIT; }

bool BuiltWithCuda() { return BackendCompiledIn(BackendKind::kCuda); }

bool BuiltWithHip() { return BackendCompiledIn(BackendKind::kHip); }

std::string VersionText() {
  return absl::StrCat("kerneld ", KerneldVersion(), "\ncommit: ", BuildCommit(),
                      "\ncuda backend: ", BuiltWithCuda() ? "yes" : "no",
                      "\nhip backend: ", BuiltWithHip() ? "yes" : "no",
                      "\nbuild type: ", KD_BUILD_TYPE, "\ncompiler: ", __VERSION__, "\n");
}

}  // namespace kd
