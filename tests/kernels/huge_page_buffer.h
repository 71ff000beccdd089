// Zeroed buffers on 2 MiB boundaries for the kernel benchmarks, advised into transparent huge
// pages when asked: the engine's weights, KV pool and activations sit in 2 MiB pages
// (iwb::HugePageRegion and the kernel's THP), and a benchmark in 4 KiB pages measures TLB misses
// the engine never has (a GEMM's outputs are a matrix row apart per token).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include <sys/mman.h>

namespace iwb::test {

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
template <typename T>
using HugePageBuffer = std::unique_ptr<T[], FreeDeleter>;

template <typename T>
HugePageBuffer<T> huge_page_buffer(size_t count, bool advise_huge = true) {
  constexpr size_t kHuge = size_t{2} << 20;
  const size_t bytes = (count * sizeof(T) + kHuge - 1) / kHuge * kHuge;
  auto* p = static_cast<T*>(std::aligned_alloc(kHuge, bytes));
  if (p == nullptr) {
    std::fprintf(stderr, "out of memory (%zu bytes)\n", bytes);
    std::exit(1);
  }
#ifdef MADV_HUGEPAGE
  if (advise_huge) madvise(p, bytes, MADV_HUGEPAGE);  // advice only
#endif
  std::memset(p, 0, bytes);
  return HugePageBuffer<T>(p);
}

}  // namespace iwb::test
