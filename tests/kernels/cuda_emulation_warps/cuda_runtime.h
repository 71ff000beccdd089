// Host-only stand-in for the CUDA runtime and device intrinsics that the forward-pass kernels
// use (kernels/cuda/{norm,rope,kv_cache,paged_attention,paged_attention_tc,sampling}.cu), so their
// real device and launch code runs on the CPU in tests: every thread of a block is a fiber
// (its own stack) on the calling thread, the blocks of a 3-D grid run one after another. Barriers are
// exact: __syncthreads waits for every live thread of the block, __syncwarp, the shuffles and
// the WMMA operations (mma.h here) for every live lane of the warp, so warps that take different
// warp-uniform paths are emulated faithfully; threads stuck at different barriers throw.
// Shared memory is poisoned (0xFF bytes) for every block, so reading unwritten data shows. A
// launch fails when any of its threads ended without wait_for_prior_grids (cuda_common.cuh: what
// makes programmatic dependent launch safe on the device).
#pragma once

#define IWB_CUDA_EMULATION 1

#include <ucontext.h>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

#include <math.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <stdexcept>
#include <vector>

#define __device__
#define __host__
#define __global__
#define __forceinline__ inline
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)

typedef int cudaError_t;
// The runtime's own values (driver_types.h), for the ones the code here names.
enum : int {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInsufficientDriver = 35,
  cudaErrorNoDevice = 100,
  cudaErrorECCUncorrectable = 214,
  cudaErrorIllegalAddress = 700,
  cudaErrorLaunchTimeout = 702,
  cudaErrorAssert = 710,
  cudaErrorHardwareStackError = 714,
  cudaErrorIllegalInstruction = 715,
  cudaErrorMisalignedAddress = 716,
  cudaErrorInvalidAddressSpace = 717,
  cudaErrorInvalidPc = 718,
  cudaErrorLaunchFailure = 719,
  cudaErrorStreamCaptureUnsupported = 900
};
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
typedef struct CUstream_emulated* cudaStream_t;
namespace iwb_emulation {
inline cudaError_t g_last_error = cudaSuccess;  // the last failing runtime call's, until read
}  // namespace iwb_emulation
inline cudaError_t cudaGetLastError() {
  const cudaError_t error = iwb_emulation::g_last_error;
  iwb_emulation::g_last_error = cudaSuccess;
  return error;
}
template <typename F>
cudaError_t cudaFuncSetAttribute(F*, cudaFuncAttribute, int) {
  return cudaSuccess;
}

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct uint4 {
  unsigned x, y, z, w;
};
struct uint2 {
  unsigned x, y;
};
struct int4 {
  int x, y, z, w;
};
struct float2 {
  float x, y;
};
struct float4 {
  float x, y, z, w;
};
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
inline float2 make_float2(float x, float y) { return {x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }

inline dim3 threadIdx, blockIdx, blockDim, gridDim;

using std::isfinite;
using std::isnan;
using std::max;
using std::min;
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
// A product rounded on its own (never fused into a following add: the host build has no FMA).
inline float __fmul_rn(float a, float b) { return a * b; }
inline void iwb_emulated_sincos(double x, double* s, double* c) {
  *s = std::sin(x);
  *c = std::cos(x);
}
#define sincos iwb_emulated_sincos
inline unsigned __float_as_uint(float f) {
  unsigned u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float __uint_as_float(unsigned u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline float __int_as_float(int v) {
  float f;
  std::memcpy(&f, &v, 4);
  return f;
}
// Byte i of the result is byte (s >> 4i) & 7 of the 8 bytes {x (0-3), y (4-7)} (matvec decoders).
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  const uint64_t bytes = x | (static_cast<uint64_t>(y) << 32);
  unsigned result = 0;
  for (int i = 0; i < 4; ++i) result |= static_cast<unsigned>((bytes >> (8 * ((s >> (4 * i)) & 7))) & 0xFF) << (8 * i);
  return result;
}
// Four signed byte products of a and b added to c (dp4a).
inline int __dp4a(int a, int b, int c) {
  for (int i = 0; i < 4; ++i) c += static_cast<int8_t>(a >> (8 * i)) * static_cast<int8_t>(b >> (8 * i));
  return c;
}
template <typename T>
T __ldg(const T* p) {
  return *p;
}  // cache hints mean nothing here
template <typename T>
T __ldcs(const T* p) {
  return *p;
}

namespace iwb_emulation {

enum class Wait { None, Warp, Block, Done };

// A switch between two stacks. glibc's swapcontext saves and restores the signal mask with a
// system call on every switch: that was 95% of test_cuda_matvec_emulated's time (perf, AMD Zen 3
// guest: 17 s for one type's wide blocks, 9 of them in the kernel). On x86-64 the switch is six
// pushes, a stack pointer exchange and six pops; elsewhere it stays ucontext.
#if defined(__x86_64__)
struct Context {
  void* sp = nullptr;
};
// Saves the callee-saved registers on the current stack, stores its pointer in *save_sp, and
// continues on next_sp where the same registers were saved (or made up by make_context).
__attribute__((naked, noinline)) inline void switch_stacks(void** /*save_sp*/, void* /*next_sp*/) {
  asm("pushq %rbp\n\tpushq %rbx\n\tpushq %r12\n\tpushq %r13\n\tpushq %r14\n\tpushq %r15\n\t"
      "movq %rsp, (%rdi)\n\tmovq %rsi, %rsp\n\t"
      "popq %r15\n\tpopq %r14\n\tpopq %r13\n\tpopq %r12\n\tpopq %rbx\n\tpopq %rbp\n\tret");
}
// A context that starts entry() on the given stack; entry must never return.
inline void make_context(Context& context, char* stack, size_t size, void (*entry)()) {
  auto top = (reinterpret_cast<uintptr_t>(stack) + size) & ~uintptr_t{15};
  auto* slot = reinterpret_cast<void**>(top);
  *--slot = nullptr;                              // entry's return address: it never returns
  *--slot = reinterpret_cast<void*>(entry);       // where switch_stacks' ret goes
  for (int i = 0; i < 6; ++i) *--slot = nullptr;  // rbp, rbx, r12-r15
  context.sp = slot;
}
inline void raw_switch(Context& from, Context& to) { switch_stacks(&from.sp, to.sp); }
#else
struct Context {
  ucontext_t uc{};
};
inline void make_context(Context& context, char* stack, size_t size, void (*entry)()) {
  getcontext(&context.uc);
  context.uc.uc_stack.ss_sp = stack;
  context.uc.uc_stack.ss_size = size;
  context.uc.uc_link = nullptr;
  makecontext(&context.uc, entry, 0);
}
inline void raw_switch(Context& from, Context& to) { swapcontext(&from.uc, &to.uc); }
#endif

struct Fiber {
  Context context;
  std::unique_ptr<char[]> stack;
  Wait wait = Wait::None;
  bool has_waited_for_prior_grids = false;  // wait_for_prior_grids (cuda_common.cuh) ran
  unsigned exchange_parity = 0;             // which of State::exchange the next exchange uses
};

struct State {
  Context scheduler;
  const void* scheduler_stack_bottom = nullptr;  // for ASan's stack bookkeeping
  size_t scheduler_stack_size = 0;
  std::vector<Fiber> fibers;
  unsigned current = 0;
  const std::function<void()>* body = nullptr;
  // Two slots per thread for shuffles, used in turn (Fiber::exchange_parity): a lane cannot
  // write a slot again before every lane has read it, since that takes passing the next
  // exchange's barrier, which waits for them all. One barrier an exchange, not two.
  std::vector<uint64_t> exchange[2];
  std::vector<unsigned char> dynamic_shared;
  size_t dynamic_bytes = 0;
  bool is_missing_grid_wait = false;  // a thread of this launch ended without waiting
  bool is_from_scheduler = false;     // the last switch to a lane came from the scheduler
};
inline State g_state;
inline constexpr size_t kStackBytes = size_t{64} << 10;

// ASan follows a stack switch only when told (else its reports and no-return handling would
// assume the wrong stack bounds).
inline void switch_context(Context& from, Context& to, const void* to_bottom, size_t to_size) {
#if defined(__SANITIZE_ADDRESS__)
  void* fake_stack = nullptr;
  __sanitizer_start_switch_fiber(&fake_stack, to_bottom, to_size);
  raw_switch(from, to);
  __sanitizer_finish_switch_fiber(fake_stack, nullptr, nullptr);
#else
  (void)to_bottom;
  (void)to_size;
  raw_switch(from, to);
#endif
}

// Leaves lane t (parked at a barrier, or ended): on to the next runnable lane of its warp, or back
// to the scheduler after the warp's last one. Lane to lane, a barrier of a warp costs one switch
// a lane, not two through the scheduler; run_block's scan then finds those lanes parked.
inline void leave_lane(unsigned t) {
  Fiber& fiber = g_state.fibers[t];
  const unsigned end = std::min(blockDim.x, (t & ~31u) + 32);
  for (unsigned u = t + 1; u < end; ++u) {
    Fiber& next = g_state.fibers[u];
    if (next.wait != Wait::None) continue;
    g_state.current = u;
    g_state.is_from_scheduler = false;
    threadIdx = dim3(u);
    switch_context(fiber.context, next.context, next.stack.get(), kStackBytes);
    return;
  }
  switch_context(fiber.context, g_state.scheduler, g_state.scheduler_stack_bottom, g_state.scheduler_stack_size);
}

// Every emulated thread: runs the kernel for one block, parks as Done, and runs it again when the
// scheduler resumes it for the next block of the same launch.
[[noreturn]] inline void fiber_entry() {
#if defined(__SANITIZE_ADDRESS__)
  // The stack switched from is the scheduler's only when the scheduler started this lane.
  const void* from_bottom = nullptr;
  size_t from_size = 0;
  __sanitizer_finish_switch_fiber(nullptr, &from_bottom, &from_size);
  if (g_state.is_from_scheduler) {
    g_state.scheduler_stack_bottom = from_bottom;
    g_state.scheduler_stack_size = from_size;
  }
#endif
  for (;;) {
    (*g_state.body)();
    Fiber& fiber = g_state.fibers[g_state.current];
    if (!fiber.has_waited_for_prior_grids) g_state.is_missing_grid_wait = true;
    fiber.wait = Wait::Done;
    leave_lane(g_state.current);
  }
}

// Parks the calling thread at a barrier until the scheduler releases it.
inline void wait_at(Wait wait) {
  const unsigned t = g_state.current;
  g_state.fibers[t].wait = wait;
  leave_lane(t);
}

inline unsigned char* dynamic_shared() {
  const auto base = reinterpret_cast<uintptr_t>(g_state.dynamic_shared.data());
  return reinterpret_cast<unsigned char*>((base + 127) & ~uintptr_t{127});
}

// Fresh fibers for a launch: each starts at fiber_entry on its own stack. The stacks are kept
// between launches, those of a wider block too (an engine step launches blocks of 32 to 1,024
// threads in turn; allocating and zeroing their stacks again took most of its time).
inline void start_fibers(unsigned n) {
  if (g_state.fibers.size() < n) g_state.fibers.resize(n);
  for (unsigned t = 0; t < n; ++t) {
    Fiber& fiber = g_state.fibers[t];
    if (!fiber.stack) fiber.stack = std::make_unique_for_overwrite<char[]>(kStackBytes);
#if defined(__SANITIZE_ADDRESS__)
    // The frames a fiber of the last launch was parked in never returned: clear their poison.
    __asan_unpoison_memory_region(fiber.stack.get(), kStackBytes);
#endif
    make_context(fiber.context, fiber.stack.get(), kStackBytes, fiber_entry);
    fiber.wait = Wait::None;
  }
}

// Runs one block: each warp in turn until every lane of it has ended or waits at __syncthreads
// (its warp barriers and shuffles released as its lanes all reach them), then the block barrier.
// Warp by warp rather than every thread each round: a round then scans 32 fibers, not the
// block's 1,024, and switches among 32 stacks (2 MiB), not 64 MiB of them.
inline void run_block() {
  const unsigned n = blockDim.x;
  std::fill(g_state.dynamic_shared.begin(), g_state.dynamic_shared.end(), static_cast<unsigned char>(0xFF));
  for (unsigned t = 0; t < n; ++t) {  // Done since the last block
    g_state.fibers[t].wait = Wait::None;
    g_state.fibers[t].has_waited_for_prior_grids = false;
    g_state.fibers[t].exchange_parity = 0;
  }
  for (;;) {
    for (unsigned w0 = 0; w0 < n; w0 += 32) {
      const unsigned w1 = std::min(n, w0 + 32);
      for (;;) {
        for (unsigned t = w0; t < w1; ++t) {  // every runnable lane runs to its next barrier or its end
          Fiber& fiber = g_state.fibers[t];
          if (fiber.wait != Wait::None) continue;
          g_state.current = t;
          g_state.is_from_scheduler = true;
          threadIdx = dim3(t);
          switch_context(g_state.scheduler, fiber.context, fiber.stack.get(), kStackBytes);
        }
        unsigned live = 0, waiting = 0;  // a warp barrier opens when every live lane is there
        for (unsigned t = w0; t < w1; ++t) {
          live += g_state.fibers[t].wait != Wait::Done ? 1 : 0;
          waiting += g_state.fibers[t].wait == Wait::Warp ? 1 : 0;
        }
        if (waiting == 0) break;  // each lane ended or waits for the block
        if (waiting != live) {
          throw std::logic_error("cuda emulation: threads wait at different barriers (divergent barrier)");
        }
        for (unsigned t = w0; t < w1; ++t) g_state.fibers[t].wait = Wait::None;
      }
    }
    unsigned num_done = 0;
    for (unsigned t = 0; t < n; ++t) num_done += g_state.fibers[t].wait == Wait::Done ? 1 : 0;
    if (num_done == n) return;
    for (unsigned t = 0; t < n; ++t) {  // the others all wait at __syncthreads
      if (g_state.fibers[t].wait == Wait::Block) g_state.fibers[t].wait = Wait::None;
    }
  }
}

// Runs kernel(args...) as every thread of every block of the grid.
template <typename Kernel, typename... Args>
void launch(dim3 grid, dim3 block, size_t shared_bytes, Kernel kernel, Args... args) {
  if (block.y != 1 || block.z != 1 || block.x == 0 || block.x > 1024 || block.x % 32 != 0) {
    throw std::logic_error("cuda emulation: blocks must be 1-D whole warps of at most 1024 threads");
  }
  // The hardware's limits (sm_90): grid y and z, and dynamic shared memory per block (opt-in).
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.y > 65535 || grid.z > 65535) {
    throw std::logic_error("cuda emulation: grid dimensions outside the hardware's limits");
  }
  if (shared_bytes > 227 * 1024) throw std::logic_error("cuda emulation: more than 227 KiB of dynamic shared memory");
  gridDim = grid;
  blockDim = block;
  const std::function<void()> body = [&] { kernel(args...); };
  g_state.body = &body;
  start_fibers(block.x);
  g_state.exchange[0].assign(block.x, 0);
  g_state.exchange[1].assign(block.x, 0);
  g_state.dynamic_shared.assign(shared_bytes + 128, 0xFF);
  g_state.is_missing_grid_wait = false;
  for (unsigned z = 0; z < grid.z; ++z) {
    for (unsigned y = 0; y < grid.y; ++y) {
      for (unsigned x = 0; x < grid.x; ++x) {
        blockIdx = dim3(x, y, z);
        run_block();
      }
    }
  }
  // On the device such a thread could read its inputs before the kernel before it wrote them
  // (programmatic dependent launch), or a block of early returns end the grid too soon.
  if (g_state.is_missing_grid_wait) {
    throw std::logic_error("cuda emulation: a thread ended without wait_for_prior_grids (griddepcontrol.wait)");
  }
}

// wait_for_prior_grids (cuda_common.cuh): the grids before have ended, as they always have here.
inline void note_grid_dependency_wait() { g_state.fibers[g_state.current].has_waited_for_prior_grids = true; }

// prefetch_weights_l2: nothing to fetch, but the range's ends are read so ASan checks the range.
inline void touch(const void* bytes, int64_t n) {
  const auto* p = static_cast<const volatile unsigned char*>(bytes);
  (void)p[0];
  (void)p[n - 1];
}

// The exchange slots the calling lane uses next (State::exchange: two in turn).
inline std::vector<uint64_t>& next_exchange_slots() {
  Fiber& fiber = g_state.fibers[g_state.current];
  std::vector<uint64_t>& cells = g_state.exchange[fiber.exchange_parity];
  fiber.exchange_parity ^= 1u;
  return cells;
}

// A warp-wide exchange: each lane publishes a value, then reads the one of lane src.
template <typename T>
T exchange(T value, unsigned src_lane) {
  static_assert(sizeof(T) <= 8, "shuffle of a value over 8 bytes");
  const unsigned t = threadIdx.x;
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  std::vector<uint64_t>& cells = next_exchange_slots();
  cells[t] = bits;
  wait_at(Wait::Warp);
  const uint64_t other = cells[(t & ~31u) + (src_lane & 31u)];
  T result;
  std::memcpy(&result, &other, sizeof(T));
  return result;
}

// A warp-wide gather: each lane publishes a value and reads every lane's (all[i]: lane i's).
// The emulated warp-level matrix instructions (mma_m16n8k16.cuh) are built on it.
inline void warp_gather(uint64_t value, uint64_t (&all)[32]) {
  const unsigned t = threadIdx.x;
  std::vector<uint64_t>& cells = next_exchange_slots();
  cells[t] = value;
  wait_at(Wait::Warp);
  for (unsigned i = 0; i < 32; ++i) all[i] = cells[(t & ~31u) + i];
}

}  // namespace iwb_emulation

inline void __syncthreads() { iwb_emulation::wait_at(iwb_emulation::Wait::Block); }
inline void __syncwarp(unsigned = 0xFFFFFFFFu) { iwb_emulation::wait_at(iwb_emulation::Wait::Warp); }

template <typename T>
T __shfl_xor_sync(unsigned, T value, int lane_mask) {
  return iwb_emulation::exchange(value, (threadIdx.x % 32) ^ static_cast<unsigned>(lane_mask));
}
template <typename T>
T __shfl_up_sync(unsigned, T value, unsigned delta) {
  const unsigned lane = threadIdx.x % 32;
  return iwb_emulation::exchange(value, lane >= delta ? lane - delta : lane);
}

// Fibers never preempt each other, so plain read-modify-writes are atomic.
inline unsigned atomicAdd(unsigned* p, unsigned v) {
  const unsigned old = *p;
  *p += v;
  return old;
}
inline int atomicAdd(int* p, int v) {
  const int old = *p;
  *p += v;
  return old;
}

#include "cuda_runtime_api.h"
