// kd_ipc_peer: the "trainer" side of the GPU IPC tests, a separate process that owns CUDA
// memory and events and shares them by handle. It reads one command per line on stdin and
// answers one line on stdout ("ok ...", or "error <text>"):
//   alloc ID BYTES SEED          cudaMalloc and fill with pattern SEED
//   export ID OFFSET             -> "ok HEX" (cudaIpcMemHandle_t of allocation ID)
//   event EID                    create an IPC event -> "ok HEX" (cudaIpcEventHandle_t)
//   delayed_fill ID SEED MS EID  on the peer's stream: hold the stream MS ms, refill ID with
//                                pattern SEED, record EID; answers at once
//   open_hash HEX OFFSET BYTES   open another process's memory handle -> "ok HASH" of the bytes
//   record EID                   record EID on the peer's stream now
//   wait EID                     cudaEventSynchronize(EID)
//   hash ID OFFSET BYTES         -> "ok HASH" (FNV-1a of the bytes, after a device sync)
//   free ID
//   quit
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tests/gpu/pattern.h"

namespace {

// Holds the stream for the given milliseconds (a host function may sleep; it calls no CUDA API).
void CUDART_CB HoldStream(void* ms) {
  usleep(static_cast<useconds_t>(reinterpret_cast<uintptr_t>(ms)) * 1000);
}

struct Allocation {
  void* ptr = nullptr;
  size_t bytes = 0;
};

}  // namespace

int main() {
  std::map<int, Allocation> allocs;
  std::map<int, cudaEvent_t> events;
  std::vector<void*> pinned;
  cudaStream_t stream;
  if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
    std::printf("error no cuda device\n");
    return 1;
  }
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    std::string cmd;
    in >> cmd;
    cudaError_t err = cudaSuccess;
    std::string reply = "ok";
    if (cmd == "alloc") {
      int id;
      size_t bytes;
      uint64_t seed;
      in >> id >> bytes >> seed;
      Allocation a;
      a.bytes = bytes;
      err = cudaMalloc(&a.ptr, bytes);
      if (err == cudaSuccess) {
        std::vector<uint8_t> host(bytes);
        kd::testing::FillPattern(seed, host.data(), bytes);
        err = cudaMemcpy(a.ptr, host.data(), bytes, cudaMemcpyHostToDevice);
        allocs[id] = a;
      }
    } else if (cmd == "export") {
      int id;
      size_t offset;
      in >> id >> offset;
      cudaIpcMemHandle_t h;
      err = cudaIpcGetMemHandle(&h, allocs[id].ptr);
      reply += " " + kd::testing::ToHex(&h, sizeof(h));
    } else if (cmd == "event") {
      int eid;
      in >> eid;
      cudaEvent_t e;
      err = cudaEventCreateWithFlags(&e, cudaEventInterprocess | cudaEventDisableTiming);
      if (err == cudaSuccess) {
        events[eid] = e;
        cudaIpcEventHandle_t h;
        err = cudaIpcGetEventHandle(&h, e);
        reply += " " + kd::testing::ToHex(&h, sizeof(h));
      }
    } else if (cmd == "delayed_fill") {
      int id, eid;
      uint64_t seed, ms;
      in >> id >> seed >> ms >> eid;
      const Allocation& a = allocs[id];
      void* host = nullptr;
      err = cudaMallocHost(&host, a.bytes);
      if (err == cudaSuccess) {
        pinned.push_back(host);
        kd::testing::FillPattern(seed, host, a.bytes);
        err = cudaLaunchHostFunc(stream, HoldStream,
                                 reinterpret_cast<void*>(static_cast<uintptr_t>(ms)));
        if (err == cudaSuccess)
          err = cudaMemcpyAsync(a.ptr, host, a.bytes, cudaMemcpyHostToDevice, stream);
        if (err == cudaSuccess) err = cudaEventRecord(events[eid], stream);
      }
    } else if (cmd == "record") {
      int eid;
      in >> eid;
      err = cudaEventRecord(events[eid], stream);
    } else if (cmd == "wait") {
      int eid;
      in >> eid;
      err = cudaEventSynchronize(events[eid]);
    } else if (cmd == "hash") {
      int id;
      size_t offset, bytes;
      in >> id >> offset >> bytes;
      std::vector<uint8_t> host(bytes);
      err = cudaDeviceSynchronize();
      if (err == cudaSuccess) {
        err = cudaMemcpy(host.data(), static_cast<char*>(allocs[id].ptr) + offset, bytes,
                         cudaMemcpyDeviceToHost);
      }
      std::ostringstream h;
      h << std::hex << kd::testing::Fnv1a(host.data(), bytes);
      reply += " " + h.str();
    } else if (cmd == "open_hash") {
      std::string hex;
      size_t offset, bytes;
      in >> hex >> offset >> bytes;
      const std::string raw = kd::testing::FromHex(hex);
      cudaIpcMemHandle_t h;
      std::memcpy(&h, raw.data(), sizeof(h));
      void* base = nullptr;
      std::vector<uint8_t> host(bytes);
      err = cudaIpcOpenMemHandle(&base, h, cudaIpcMemLazyEnablePeerAccess);
      if (err == cudaSuccess) {
        err = cudaMemcpy(host.data(), static_cast<char*>(base) + offset, bytes,
                         cudaMemcpyDeviceToHost);
        cudaIpcCloseMemHandle(base);
      }
      std::ostringstream hash;
      hash << std::hex << kd::testing::Fnv1a(host.data(), bytes);
      reply += " " + hash.str();
    } else if (cmd == "free") {
      int id;
      in >> id;
      err = cudaFree(allocs[id].ptr);
      allocs.erase(id);
    } else if (cmd == "quit") {
      std::printf("ok\n");
      std::fflush(stdout);
      break;
    } else {
      std::printf("error unknown command %s\n", cmd.c_str());
      std::fflush(stdout);
      continue;
    }
    if (err != cudaSuccess) reply = std::string("error ") + cudaGetErrorName(err);
    std::printf("%s\n", reply.c_str());
    std::fflush(stdout);
  }
  cudaDeviceSynchronize();
  for (void* p : pinned) cudaFreeHost(p);
  return 0;
}
