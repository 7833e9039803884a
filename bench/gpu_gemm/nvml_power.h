// NvmlPower: the GPU's energy counter, SM clock and clock-event reasons through NVML, loaded at
// run time (dlopen of libnvidia-ml.so.1, which ships with the driver), so that the benchmark
// builds where no NVML headers or libraries exist (the dev VM) and still runs without NVML (it
// then reports that power is not available).
//
// Why: an H100 running FP8 GEMMs sits at its power limit (nvidia-smi shows clock-event reason
// 0x4, software power cap, and SM clocks from 1.2 to 1.8 GHz instead of 1.98), so two kernels
// of the same FLOPs compete on energy per GEMM, and cycles per K block alone do not predict
// their speed (bench/README.md, "FP8 GEMM": the sustained figures).
//
// The prototypes below are NVML's C API (nvml.h, NVML API reference): all return nvmlReturn_t,
// 0 on success.
#pragma once

#include <dlfcn.h>

#include <cstdint>
#include <string>

namespace kd {

class NvmlPower {
 public:
  // `pci_bus_id` as cudaDeviceGetPCIBusId writes it (e.g. "0000:19:00.0").
  explicit NvmlPower(const std::string& pci_bus_id) {
    lib_ = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib_ == nullptr) return;
    auto sym = [&](const char* name) { return dlsym(lib_, name); };
    auto init = reinterpret_cast<int (*)()>(sym("nvmlInit_v2"));
    auto by_pci =
        reinterpret_cast<int (*)(const char*, void**)>(sym("nvmlDeviceGetHandleByPciBusId_v2"));
    energy_ = reinterpret_cast<int (*)(void*, unsigned long long*)>(
        sym("nvmlDeviceGetTotalEnergyConsumption"));
    clock_ = reinterpret_cast<int (*)(void*, int, unsigned*)>(sym("nvmlDeviceGetClockInfo"));
    reasons_ = reinterpret_cast<int (*)(void*, unsigned long long*)>(
        sym("nvmlDeviceGetCurrentClocksEventReasons"));
    if (reasons_ == nullptr) {
      reasons_ = reinterpret_cast<int (*)(void*, unsigned long long*)>(
          sym("nvmlDeviceGetCurrentClocksThrottleReasons"));
    }
    limit_ = reinterpret_cast<int (*)(void*, unsigned*)>(sym("nvmlDeviceGetEnforcedPowerLimit"));
    if (init == nullptr || by_pci == nullptr || energy_ == nullptr || clock_ == nullptr ||
        init() != 0 || by_pci(pci_bus_id.c_str(), &device_) != 0) {
      device_ = nullptr;
    }
  }
  ~NvmlPower() {
    // nvmlShutdown is left to process exit: the library stays loaded for the process's life.
  }
  NvmlPower(const NvmlPower&) = delete;
  NvmlPower& operator=(const NvmlPower&) = delete;

  bool ok() const { return device_ != nullptr; }

  // Millijoules since the driver loaded; 0 when unavailable.
  uint64_t EnergyMj() const {
    unsigned long long mj = 0;
    return ok() && energy_(device_, &mj) == 0 ? mj : 0;
  }
  // The SM clock now, MHz (NVML_CLOCK_SM = 1); 0 when unavailable.
  unsigned SmMhz() const {
    unsigned mhz = 0;
    return ok() && clock_(device_, 1, &mhz) == 0 ? mhz : 0;
  }
  // Bit mask of why clocks are below their maximum now (nvmlClocksEventReason*: 0x4 software
  // power cap, 0x20 software thermal slowdown, 0x40 hardware thermal, 0x80 hardware power
  // brake); 0 when unavailable.
  uint64_t EventReasons() const {
    unsigned long long r = 0;
    return ok() && reasons_ != nullptr && reasons_(device_, &r) == 0 ? r : 0;
  }
  // The power limit the driver enforces, watts; 0 when unavailable.
  double LimitWatts() const {
    unsigned mw = 0;
    return ok() && limit_ != nullptr && limit_(device_, &mw) == 0 ? mw / 1000.0 : 0.0;
  }

 private:
  void* lib_ = nullptr;
  void* device_ = nullptr;
  int (*energy_)(void*, unsigned long long*) = nullptr;
  int (*clock_)(void*, int, unsigned*) = nullptr;
  int (*reasons_)(void*, unsigned long long*) = nullptr;
  int (*limit_)(void*, unsigned*) = nullptr;
};

}  // namespace kd
