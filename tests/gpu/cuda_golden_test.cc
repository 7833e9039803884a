// The CUDA backend against the golden vectors computed by PyTorch (tests/data/golden, the same
// files tests/kernels/golden_test.cc checks on the CPU backend): each case runs on the device
// and must match bit for bit. Cases of granularities the backend does not run yet must be
// refused with UNIMPLEMENTED. KD_GOLDEN_DIR in the environment overrides the source path (the
// GPU machine runs a bundle, not the source tree).
#include <cuda_runtime_api.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kerneld/kernels/registry.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/kernels/golden_manifest.h"
#include "tests/kernels/quantize_reference.h"
#include "tests/support/run_op.h"

namespace kd {
namespace {

using testing_json::Value;
using testing_ref::HostTensor;

using golden::DTypeFromName;
using golden::Manifest;
using golden::ReadFile;

// A host tensor's bytes in device memory, as a tensor on cuda:0.
struct DeviceCopy {
  std::unique_ptr<Region> region;
  Tensor t;
  size_t bytes = 0;
};
DeviceCopy ToDevice(Backend& gpu, const HostTensor& host) {
  DeviceCopy d;
  d.bytes = static_cast<size_t>(host.numel()) * DTypeSize(host.t.dtype);
  d.region = gpu.Allocate(0, std::max<size_t>(d.bytes, 1)).value();
  EXPECT_EQ(cudaMemcpy(d.region->data(), host.t.data, d.bytes, cudaMemcpyHostToDevice),
            cudaSuccess);
  // A copy from pageable memory may return before its DMA lands, and the backend's streams do
  // not wait for the legacy stream: finish the upload before an op reads it.
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  d.t = host.t;
  d.t.data = d.region->data();
  d.t.loc = {BackendKind::kCuda, 0};
  return d;
}

TEST(CudaGoldenTest, EveryCaseMatchesPyTorchOrIsUnimplemented) {
  KD_REQUIRE_CUDA(gpu);
  const Value& manifest = Manifest();
  ASSERT_EQ(manifest.kind, Value::kObject) << "cannot read " << golden::Dir() << "/manifest.json";
  auto stream = gpu->CreateStream(0).value();
  int matched = 0, unimplemented = 0;
  for (const Value& c : manifest["cases"].array) {
    SCOPED_TRACE(c["name"].string);
    const Value& in_desc = manifest["inputs"][c["input"].string];
    HostTensor input(DTypeFromName(in_desc["dtype"].string), in_desc["shape"].AsInts());
    const std::string in_bytes = ReadFile(in_desc["file"].string);
    ASSERT_EQ(in_bytes.size(), static_cast<size_t>(input.numel()) * DTypeSize(input.t.dtype));
    std::memcpy(input.storage.data(), in_bytes.data(), in_bytes.size());
    std::map<std::string, DeviceCopy> outs;
    for (const auto& [name, desc] : c["outputs"].object) {
      DType dtype = DTypeFromName(desc["dtype"].string);
      if (name.rfind("output", 0) == 0) dtype = DTypeFromName(c["out_dtype"].string);
      if (name == "scales" && c["granularity"].string == "mx1x32") dtype = DType::kU8;
      HostTensor poison(dtype, desc["shape"].AsInts());
      std::memset(poison.storage.data(), 0xA5, poison.storage.size() * 8);
      outs.emplace(name, ToDevice(*gpu, poison));
    }
    DeviceCopy d_in = ToDevice(*gpu, input);
    HostTensor ends;
    DeviceCopy d_ends;
    QuantizeArgs a = golden::RecipeOfCase(c);
    a.input = d_in.t;
    a.output = outs.at("output").t;
    a.scales = outs.at("scales").t;
    if (c.Has("group_ends")) {
      const std::vector<int64_t> e = c["group_ends"].AsInts();
      ends = HostTensor(DType::kI64, {static_cast<int64_t>(e.size())});
      std::memcpy(ends.storage.data(), e.data(), e.size() * sizeof(int64_t));
      d_ends = ToDevice(*gpu, ends);
      a.group_ends = d_ends.t;
    }
    if (outs.count("output_t")) {
      a.output_t = outs.at("output_t").t;
      a.scales_t = outs.at("scales_t").t;
    }
    const Op op = a;
    ASSERT_TRUE(Validate(op).ok()) << Validate(op).status();
    const absl::Status supported = SupportsOp(*gpu, op);
    if (!supported.ok()) {
      EXPECT_EQ(supported.code(), absl::StatusCode::kUnimplemented) << supported;
      ++unimplemented;
      continue;
    }
    ASSERT_TRUE(RunOp(*gpu, op, *stream, nullptr).ok());
    ASSERT_TRUE(gpu->Synchronize(*stream).ok());
    for (const auto& [name, desc] : c["outputs"].object) {
      const DeviceCopy& d = outs.at(name);
      std::vector<uint8_t> got(d.bytes);
      ASSERT_EQ(cudaMemcpy(got.data(), d.region->data(), d.bytes, cudaMemcpyDeviceToHost),
                cudaSuccess);
      const std::string expected = ReadFile(desc["file"].string);
      ASSERT_EQ(expected.size(), d.bytes) << name;
      const size_t elem = DTypeSize(d.t.dtype);
      int64_t mismatches = 0;
      for (size_t i = 0; i < d.bytes; i += elem) {
        if (std::memcmp(got.data() + i, expected.data() + i, elem) == 0) continue;
        if (mismatches++ < 5) {
          uint32_t g = 0, e = 0;
          std::memcpy(&g, got.data() + i, elem);
          std::memcpy(&e, expected.data() + i, elem);
          ADD_FAILURE() << name << " element " << i / elem << ": cuda 0x" << std::hex << g
                        << ", torch 0x" << e;
        }
      }
      EXPECT_EQ(mismatches, 0) << name;
    }
    ++matched;
  }
  std::printf("golden cases: %d matched on cuda, %d unimplemented\n", matched, unimplemented);
  EXPECT_GT(matched, 0);
}

}  // namespace
}  // namespace kd
