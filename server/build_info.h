// What this kerneld binary is: version, source commit and the backends compiled in. Shown by
// `kerneld --version`, logged at start and exported as kerneld_build_info.
#ifndef KERNELD_SERVER_BUILD_INFO_H_
#define KERNELD_SERVER_BUILD_INFO_H_

#include <string>

namespace kd {

// The git commit the binary was built from ("0123456789ab", with "-dirty" for uncommitted
// changes), or "unknown" outside a git checkout.
const char* BuildCommit();
// Whether the CUDA backend was compiled in (it still needs a device at run time).
bool BuiltWithCuda();
// Whether the HIP backend was compiled in (it still needs an AMD device at run time).
bool BuiltWithHip();
// "kerneld 0.1.0\ncommit ...\ncuda: yes\n...": the text of `kerneld --version`.
std::string VersionText();

}  // namespace kd

#endif  // KERNELD_SERVER_BUILD_INFO_H_
