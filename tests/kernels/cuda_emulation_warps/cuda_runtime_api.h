// The host side of the emulated CUDA runtime (included by cuda_runtime.h here): device memory,
// streams, events, graphs and device queries as the engine's CUDA backend (engine/src/backend/
// cuda) calls them, so the whole backend runs on the CPU in test_cuda_engine_emulated.
//
// One emulated device, "cuda:0", of compute capability 9.0. Device memory is host memory
// (kernels and copies dereference the pointers as they are), counted against a capacity the
// environment sets (IWB_EMULATED_DEVICE_MIB, 4096 by default), so a pool larger than the device
// fails with cudaErrorMemoryAllocation as on a GPU. Work on a stream runs at once, in order;
// while a stream captures, its kernels, copies, memsets and event records are kept for the
// graph instead and run on every cudaGraphLaunch, and the calls a capture forbids (synchronous
// copies and memsets, allocation, synchronizing the captured stream) fail with
// cudaErrorStreamCaptureUnsupported, as they invalidate a capture on the device.
#pragma once

#include <chrono>
#include <cstdlib>
#include <functional>
#include <map>
#include <mutex>
#include <new>
#include <vector>

typedef struct CUevent_emulated* cudaEvent_t;
typedef struct CUgraph_emulated* cudaGraph_t;
typedef struct CUgraphExec_emulated* cudaGraphExec_t;

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4
};
enum cudaStreamCaptureMode {
  cudaStreamCaptureModeGlobal = 0,
  cudaStreamCaptureModeThreadLocal = 1,
  cudaStreamCaptureModeRelaxed = 2
};
enum cudaDeviceAttr { cudaDevAttrClockRate = 13, cudaDevAttrMemoryClockRate = 36 };
inline constexpr unsigned cudaStreamNonBlocking = 1;

struct cudaDeviceProp {
  char name[256];
  size_t totalGlobalMem;
  int major, minor;
  int multiProcessorCount;
  int memoryBusWidth;
  int l2CacheSize;
};

struct CUgraph_emulated {
  std::vector<std::function<void()>> work;
};
struct CUstream_emulated {
  CUgraph_emulated* capture = nullptr;  // the graph being captured, or null
};
struct CUgraphExec_emulated {
  std::vector<std::function<void()>> work;
};
struct CUevent_emulated {
  double ms = 0;  // when the stream reached the record
};

namespace iwb_emulation {

struct Device {
  std::mutex mutex;
  std::map<void*, size_t> allocations;  // device allocations and their sizes
  size_t used = 0;
  int num_capturing = 0;  // streams capturing now
};
inline Device g_device;

inline size_t device_capacity() {
  const char* mib = std::getenv("IWB_EMULATED_DEVICE_MIB");
  return (mib != nullptr && std::atoll(mib) > 0 ? static_cast<size_t>(std::atoll(mib)) : size_t{4096}) << 20;
}

// Runs work now, or keeps it for the graph when the stream captures.
inline void on_stream(cudaStream_t stream, std::function<void()> work) {
  if (stream != nullptr && stream->capture != nullptr) {
    stream->capture->work.push_back(std::move(work));
  } else {
    work();
  }
}

// A kernel launch (IWB_LAUNCH in cuda_common.cuh) on a stream.
template <typename Kernel, typename... Args>
void launch_on(cudaStream_t stream, dim3 grid, dim3 block, size_t shared_bytes, Kernel kernel, Args... args) {
  on_stream(stream, [=] { launch(grid, block, shared_bytes, kernel, args...); });
}

inline bool is_capturing() {
  std::lock_guard lock(g_device.mutex);
  return g_device.num_capturing > 0;
}

inline cudaError_t fail(cudaError_t error) {
  g_last_error = error;
  return error;
}

inline double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace iwb_emulation

inline cudaError_t cudaPeekAtLastError() { return iwb_emulation::g_last_error; }

inline const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
    default: return "cudaErrorUnknown";
  }
}
inline const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    default: return "unknown error";
  }
}

inline cudaError_t cudaGetDeviceCount(int* count) {
  *count = 1;
  return cudaSuccess;
}
inline cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}
inline cudaError_t cudaSetDevice(int device) {
  return device == 0 ? cudaSuccess : iwb_emulation::fail(cudaErrorInvalidValue);
}
inline cudaError_t cudaDriverGetVersion(int* version) {
  *version = 13000;
  return cudaSuccess;
}
inline cudaError_t cudaRuntimeGetVersion(int* version) {
  *version = 13000;
  return cudaSuccess;
}
inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (device != 0) return iwb_emulation::fail(cudaErrorInvalidValue);
  *prop = {};
  std::strncpy(prop->name, "Emulated CUDA device (CPU fibers)", sizeof prop->name - 1);
  prop->totalGlobalMem = iwb_emulation::device_capacity();
  prop->major = 9;
  prop->minor = 0;
  prop->multiProcessorCount = 4;
  prop->memoryBusWidth = 256;
  prop->l2CacheSize = 4 << 20;
  return cudaSuccess;
}
inline cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attribute, int device) {
  if (device != 0) return iwb_emulation::fail(cudaErrorInvalidValue);
  (void)attribute;
  *value = 1000000;  // kHz, for the core and the memory clock alike
  return cudaSuccess;
}
inline cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  std::lock_guard lock(iwb_emulation::g_device.mutex);
  *total_bytes = iwb_emulation::device_capacity();
  *free_bytes = *total_bytes - std::min(*total_bytes, iwb_emulation::g_device.used);
  return cudaSuccess;
}

inline cudaError_t cudaMalloc(void** ptr, size_t bytes) {
  using namespace iwb_emulation;
  *ptr = nullptr;
  if (is_capturing()) return fail(cudaErrorStreamCaptureUnsupported);
  std::lock_guard lock(g_device.mutex);
  if (bytes > device_capacity() - std::min(device_capacity(), g_device.used)) return fail(cudaErrorMemoryAllocation);
  // 256-byte aligned as cudaMalloc's; a zero-byte request still gets its own pointer.
  void* p = ::operator new (std::max<size_t>(bytes, 1), std::align_val_t{256}, std::nothrow);
  if (p == nullptr) return fail(cudaErrorMemoryAllocation);
  g_device.allocations[p] = bytes;
  g_device.used += bytes;
  *ptr = p;
  return cudaSuccess;
}
template <typename T>
cudaError_t cudaMalloc(T** ptr, size_t bytes) {
  return cudaMalloc(reinterpret_cast<void**>(ptr), bytes);
}
inline cudaError_t cudaFree(void* ptr) {
  using namespace iwb_emulation;
  if (ptr == nullptr) return cudaSuccess;
  std::lock_guard lock(g_device.mutex);
  const auto found = g_device.allocations.find(ptr);
  if (found == g_device.allocations.end()) return fail(cudaErrorInvalidValue);  // not from cudaMalloc
  g_device.used -= found->second;
  g_device.allocations.erase(found);
  ::operator delete (ptr, std::align_val_t{256});
  return cudaSuccess;
}
inline cudaError_t cudaMallocHost(void** ptr, size_t bytes) {
  *ptr = ::operator new (std::max<size_t>(bytes, 1), std::align_val_t{256}, std::nothrow);
  return *ptr != nullptr ? cudaSuccess : iwb_emulation::fail(cudaErrorMemoryAllocation);
}
template <typename T>
cudaError_t cudaMallocHost(T** ptr, size_t bytes) {
  return cudaMallocHost(reinterpret_cast<void**>(ptr), bytes);
}
inline cudaError_t cudaFreeHost(void* ptr) {
  if (ptr != nullptr) ::operator delete (ptr, std::align_val_t{256});
  return cudaSuccess;
}

inline cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind) {
  if (iwb_emulation::is_capturing()) return iwb_emulation::fail(cudaErrorStreamCaptureUnsupported);
  if (bytes > 0) std::memmove(dst, src, bytes);
  return cudaSuccess;
}
inline cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind,
                                   cudaStream_t stream = nullptr) {
  if (bytes > 0) iwb_emulation::on_stream(stream, [=] { std::memmove(dst, src, bytes); });
  return cudaSuccess;
}
inline cudaError_t cudaMemset(void* dst, int value, size_t bytes) {
  if (iwb_emulation::is_capturing()) return iwb_emulation::fail(cudaErrorStreamCaptureUnsupported);
  std::memset(dst, value, bytes);
  return cudaSuccess;
}
inline cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t stream = nullptr) {
  iwb_emulation::on_stream(stream, [=] { std::memset(dst, value, bytes); });
  return cudaSuccess;
}

inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned) {
  *stream = new CUstream_emulated;
  return cudaSuccess;
}
inline cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  delete stream;
  return cudaSuccess;
}
// Work runs at launch, so there is nothing to wait for (the kernel tests call it as on a device).
inline cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }
inline cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  if (stream != nullptr && stream->capture != nullptr) return iwb_emulation::fail(cudaErrorStreamCaptureUnsupported);
  return cudaSuccess;
}
inline cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode) {
  using namespace iwb_emulation;
  if (stream == nullptr || stream->capture != nullptr) return fail(cudaErrorInvalidValue);
  stream->capture = new CUgraph_emulated;
  std::lock_guard lock(g_device.mutex);
  ++g_device.num_capturing;
  return cudaSuccess;
}
inline cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  using namespace iwb_emulation;
  *graph = nullptr;
  if (stream == nullptr || stream->capture == nullptr) return fail(cudaErrorInvalidValue);
  *graph = stream->capture;
  stream->capture = nullptr;
  std::lock_guard lock(g_device.mutex);
  --g_device.num_capturing;
  return cudaSuccess;
}
inline cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long = 0) {
  if (graph == nullptr) return iwb_emulation::fail(cudaErrorInvalidValue);
  *exec = new CUgraphExec_emulated{graph->work};
  return cudaSuccess;
}
inline cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return cudaSuccess;
}
inline cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete exec;
  return cudaSuccess;
}
inline cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  if (exec == nullptr) return iwb_emulation::fail(cudaErrorInvalidValue);
  iwb_emulation::on_stream(stream, [exec] {
    for (const std::function<void()>& work : exec->work) work();
  });
  return cudaSuccess;
}

inline cudaError_t cudaEventCreate(cudaEvent_t* event) {
  *event = new CUevent_emulated;
  return cudaSuccess;
}
inline cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete event;
  return cudaSuccess;
}
inline cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = nullptr) {
  if (event == nullptr) return iwb_emulation::fail(cudaErrorInvalidValue);
  iwb_emulation::on_stream(stream, [event] { event->ms = iwb_emulation::now_ms(); });
  return cudaSuccess;
}
inline cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
inline cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (start == nullptr || end == nullptr) return iwb_emulation::fail(cudaErrorInvalidValue);
  *ms = static_cast<float>(end->ms - start->ms);
  return cudaSuccess;
}
