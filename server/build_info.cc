#include "server/build_info.h"

#include "absl/strings/str_cat.h"
#include "kd_git_commit.h"
#include "server/daemon.h"

namespace kd {

const char* BuildCommit() { return KD_GIT_COMMIT; }

bool BuiltWithCuda() {
#ifdef KD_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

std::string VersionText() {
  return absl::StrCat("kerneld ", KerneldVersion(), "\ncommit: ", BuildCommit(),
                      "\ncuda backend: ", BuiltWithCuda() ? "yes" : "no",
                      "\nbuild type: ", KD_BUILD_TYPE, "\ncompiler: ", __VERSION__, "\n");
}

}  // namespace kd
