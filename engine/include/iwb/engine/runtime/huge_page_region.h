// Anonymous memory this process owns, on 2 MiB boundaries and advised for transparent huge
// pages (MADV_HUGEPAGE): the CPU engine's weights read into memory (gguf::MappedFile's Read
// mode), the paged KV cache, and the bandwidth probes' buffers (the decode's roof read through
// the decode's page size). Streaming reads through 2 MiB pages miss the TLB a 512th as
// often as through 4 KiB ones; on a Xeon model 207 guest the decode read its weights 5-10%
// faster, and the decode attention its keys and values 4-7% faster at a depth of 8,192.
// Where the kernel offers no huge pages (THP "never") the memory is the same in 4 KiB pages.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

namespace iwb {

inline constexpr size_t kHugePageBytes = size_t{2} << 20;

// The threads that load `bytes` into fresh memory: one per 64 MiB, at most one per hardware
// thread and at most 8 (beyond that the memory, not the page clearing, is the limit).
int load_threads(size_t bytes);

class HugePageRegion {
 public:
  HugePageRegion() = default;
  ~HugePageRegion();
  HugePageRegion(HugePageRegion&& other) noexcept;
  HugePageRegion& operator=(HugePageRegion&& other) noexcept;
  HugePageRegion(const HugePageRegion&) = delete;
  HugePageRegion& operator=(const HugePageRegion&) = delete;

  // `bytes` rounded up to whole 2 MiB pages, zero, untouched (the kernel backs each page on its
  // first touch). Empty when the address space cannot be had (or bytes is 0). `no_reserve`
  // asks the kernel not to count it against the overcommit limit up front (MAP_NORESERVE).
  static HugePageRegion allocate(size_t bytes, bool no_reserve = false);

  void* data() const { return m_data; }
  size_t size() const { return m_size; }  // the rounded size
  bool empty() const { return m_data == nullptr; }
  // Backs every page now (a write to each 4 KiB), from several threads: the kernel zeroes a
  // page on the thread that first touches it, and on a virtual machine that first touch also
  // has the host back it, so one thread spent 0.7 s a GiB here (Xeon model 167 KVM guest).
  void touch_in_parallel();
  // fn(offset, bytes) over consecutive slices that cover [0, min(bytes, size())), one slice per
  // thread on up to `threads` threads (the calling thread among them, and taking the slices of
  // threads that could not be started); slices start on 2 MiB boundaries, so no huge page is
  // shared by two threads. Returns when every call has.
  void for_each_slice(size_t bytes, int threads, const std::function<void(size_t offset, size_t bytes)>& fn) const;
  // No writes from here on (a stray write faults, as into a read-only mapping).
  void make_read_only();
  // How many of its bytes sit in transparent huge pages now: the kernel's AnonHugePages in
  // /proc/self/smaps (it may give fewer than asked when memory is fragmented).
  uint64_t huge_page_bytes() const;

 private:
  void* m_data = nullptr;
  size_t m_size = 0;
};

}  // namespace iwb
