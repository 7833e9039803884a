// kctl: the kerneld admin CLI. `kctl --help` lists the commands; commands.h says how to add one.
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "client/kctl/commands.h"

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  const char* env = std::getenv("KERNELD_ADMIN_SOCKET");
  return kd::kctl::RunKctl(args, env != nullptr ? env : "", std::cout, std::cerr);
}
