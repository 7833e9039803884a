// Reading an AMD GPU code object the way the ISA tests check it: each kernel's instructions from
// llvm-objdump's disassembly, counted by mnemonic, and its numeric metadata (register counts,
// spills, segment sizes, wavefront size) from llvm-readelf's amdhsa.kernels note. Only symbols the
// metadata names are kernels. Header-only, for the tests that include it.
#ifndef KERNELD_TESTS_GPU_AMD_CODE_OBJECT_H_
#define KERNELD_TESTS_GPU_AMD_CODE_OBJECT_H_

#include <cctype>
#include <cstdio>
#include <map>
#include <memory>
#include <regex>
#include <sstream>
#include <string>

namespace kd {
namespace testing {

// Everything `command` writes to stdout; empty on failure.
inline std::string RunCommand(const std::string& command) {
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  if (!pipe) return "";
  std::string out;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe.get())) > 0) out.append(buf, n);
  return out;
}

struct AmdKernel {
  std::map<std::string, int> mnemonics;  // instruction name -> count
  std::map<std::string, int> meta;       // ".vgpr_count" -> value
  // Instructions whose mnemonic starts with `prefix`.
  int Count(const std::string& prefix) const {
    int n = 0;
    for (const auto& [name, count] : mnemonics) {
      if (name.rfind(prefix, 0) == 0) n += count;
    }
    return n;
  }
  // A metadata value, -1 when absent.
  int Meta(const std::string& key) const { return meta.count(key) ? meta.at(key) : -1; }
};

// The kernels of the code object at `path` for `arch`, by symbol.
inline std::map<std::string, AmdKernel> ReadAmdCodeObject(const std::string& objdump,
                                                          const std::string& readelf,
                                                          const std::string& path,
                                                          const std::string& arch) {
  // NOTE: gfx940, gfx941 and gfx942 share one instruction encoding (LLVM's GFX940 subtarget);
  // Debian's llvm-objdump-15 decodes gfx942 code objects only when told it is gfx940.
  const std::string mcpu = arch == "gfx90a" ? "gfx90a" : "gfx940";
  std::istringstream dis(
      RunCommand(objdump + " -d --triple=amdgcn-amd-amdhsa --mcpu=" + mcpu + " " + path));
  const std::regex label(R"(^[0-9a-f]+ <([^>]+)>:)");
  const std::regex instruction(R"(^\s+([a-z_][a-z0-9_]*)\b)");
  std::map<std::string, AmdKernel> symbols;
  AmdKernel* current = nullptr;
  std::smatch m;
  for (std::string line; std::getline(dis, line);) {
    if (std::regex_search(line, m, label)) {
      current = m[1].str() == ".text" ? nullptr : &symbols[m[1].str()];
    } else if (current != nullptr && std::regex_search(line, m, instruction)) {
      ++current->mnemonics[m[1].str()];
    }
  }
  std::istringstream notes(RunCommand(readelf + " --notes " + path));
  const std::regex field(R"(^\s+-?\s*(\.[a-z_]+):\s+(\S+))");
  std::map<std::string, AmdKernel> kernels;
  std::map<std::string, std::string> block;
  auto flush = [&] {
    auto name = block.find(".name");
    if (name != block.end() && symbols.count(name->second)) {
      AmdKernel& k = kernels[name->second] = symbols[name->second];
      for (const auto& [key, value] : block) {
        if (key != ".name" && !value.empty() && isdigit(static_cast<unsigned char>(value[0])))
          k.meta[key] = std::stoi(value);
      }
    }
    block.clear();
  };
  for (std::string line; std::getline(notes, line);) {
    if (line.rfind("  - .", 0) == 0) flush();  // a new kernel's entry in amdhsa.kernels
    if (std::regex_search(line, m, field)) block[m[1].str()] = m[2].str();
  }
  flush();
  return kernels;
}

}  // namespace testing
}  // namespace kd

#endif  // KERNELD_TESTS_GPU_AMD_CODE_OBJECT_H_
