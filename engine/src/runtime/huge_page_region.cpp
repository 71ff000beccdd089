#include "iwb/engine/runtime/huge_page_region.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdio>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

namespace iwb {

HugePageRegion::~HugePageRegion() {
  if (m_data != nullptr) munmap(m_data, m_size);
}

HugePageRegion::HugePageRegion(HugePageRegion&& other) noexcept
    : m_data(std::exchange(other.m_data, nullptr)), m_size(std::exchange(other.m_size, 0)) {}

HugePageRegion& HugePageRegion::operator=(HugePageRegion&& other) noexcept {
  if (this != &other) {
    if (m_data != nullptr) munmap(m_data, m_size);
    m_data = std::exchange(other.m_data, nullptr);
    m_size = std::exchange(other.m_size, 0);
  }
  return *this;
}

HugePageRegion HugePageRegion::allocate(size_t bytes, bool no_reserve) {
  HugePageRegion region;
  if (bytes == 0) return region;
  const size_t kept = (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  // One extra huge page of address space, so the region can start on a 2 MiB boundary: pages
  // the kernel can back with huge pages from the first byte.
  const size_t reserved = kept + kHugePageBytes;
  const int flags = MAP_PRIVATE | MAP_ANONYMOUS | (no_reserve ? MAP_NORESERVE : 0);
  void* p = mmap(nullptr, reserved, PROT_READ | PROT_WRITE, flags, -1, 0);
  if (p == MAP_FAILED) return region;
  const auto base = reinterpret_cast<uintptr_t>(p);
  const uintptr_t aligned = (base + kHugePageBytes - 1) & ~(uintptr_t{kHugePageBytes} - 1);
  // Give back the unaligned head and the tail past the rounded size.
  if (aligned > base) munmap(p, aligned - base);
  if (base + reserved > aligned + kept)
    munmap(reinterpret_cast<void*>(aligned + kept), base + reserved - aligned - kept);
  region.m_data = reinterpret_cast<void*>(aligned);
  region.m_size = kept;
  madvise(region.m_data, kept, MADV_HUGEPAGE);  // advice only
  return region;
}

int load_threads(size_t bytes) {
  const size_t by_size = std::max<size_t>(1, bytes / (size_t{64} << 20));
  const size_t cores = std::max(1u, std::thread::hardware_concurrency());
  return static_cast<int>(std::min({by_size, cores, size_t{8}}));
}

void HugePageRegion::for_each_slice(size_t bytes, int threads, const std::function<void(size_t, size_t)>& fn) const {
  bytes = std::min(bytes, m_size);
  if (bytes == 0) return;
  const size_t pages = (bytes + kHugePageBytes - 1) / kHugePageBytes;
  const size_t n = std::min(pages, static_cast<size_t>(std::max(1, threads)));
  const size_t per_slice = (pages + n - 1) / n * kHugePageBytes;
  auto run = [&](size_t i) {
    const size_t begin = i * per_slice;
    if (begin < bytes) fn(begin, std::min(per_slice, bytes - begin));
  };
  std::vector<std::thread> helpers;
  size_t started = 1;
  for (; started < n; ++started) {
    try {
      helpers.emplace_back(run, started);
    } catch (const std::system_error&) {
      break;  // no more threads to be had: this thread takes the rest
    }
  }
  // The slices no thread was had for before the first, which may wait on the others
  // (mapped_file.cpp's progress).
  for (size_t i = started; i < n; ++i) run(i);
  run(0);
  for (std::thread& t : helpers) t.join();
}

void HugePageRegion::touch_in_parallel() {
  auto* bytes = static_cast<volatile uint8_t*>(m_data);
  for_each_slice(m_size, load_threads(m_size), [bytes](size_t offset, size_t size) {
    for (size_t i = offset; i < offset + size; i += 4096) bytes[i] = 0;
  });
}

void HugePageRegion::make_read_only() {
  if (m_data != nullptr) mprotect(m_data, m_size, PROT_READ);
}

uint64_t HugePageRegion::huge_page_bytes() const {
  if (m_data == nullptr) return 0;
  FILE* smaps = std::fopen("/proc/self/smaps", "r");
  if (smaps == nullptr) return 0;
  const auto begin = reinterpret_cast<uintptr_t>(m_data), end = begin + m_size;
  uint64_t total = 0;
  bool inside = false;
  char line[512];
  while (std::fgets(line, sizeof line, smaps) != nullptr) {
    unsigned long lo = 0, hi = 0;
    // A mapping's header: "lo-hi perms offset dev inode path"; its fields follow on their own lines.
    if (std::sscanf(line, "%lx-%lx ", &lo, &hi) == 2) {
      inside = lo >= begin && hi <= end;
      continue;
    }
    unsigned long kb = 0;
    if (inside && std::sscanf(line, "AnonHugePages: %lu kB", &kb) == 1) total += uint64_t{kb} << 10;
  }
  std::fclose(smaps);
  return total;
}

}  // namespace iwb
