// Bandwidth probe buffers in memory advised for 2 MiB transparent huge pages, as the CPU
// engine's weights are by default (EngineOptions::load_mode): the roof is then read through the
// same page size as the decode it is the roof of. (On a Xeon model 207 guest the read-only
// sweep read the same through either page size, 29-32 GB/s; a decode through 2 MiB pages
// read 10% more than through 4 KiB ones.)
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <memory>

namespace iwb::detail {

struct UnmapFloats {
  size_t bytes = 0;
  void operator()(float* p) const {
    if (p != nullptr) munmap(p, bytes);
  }
};
using ProbeFloats = std::unique_ptr<float[], UnmapFloats>;

// `count` floats, untouched (the caller's threads touch them first); empty when the memory
// cannot be had.
inline ProbeFloats allocate_probe_floats(size_t count) {
  const size_t bytes = count * sizeof(float);
  if (bytes == 0) return ProbeFloats(nullptr, UnmapFloats{0});
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return ProbeFloats(nullptr, UnmapFloats{0});
  madvise(p, bytes, MADV_HUGEPAGE);  // advice only
  return ProbeFloats(static_cast<float*>(p), UnmapFloats{bytes});
}

}  // namespace iwb::detail
