// POSIX implementation of MappedFile.
#include "gguf/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace iwb::gguf {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;

// Reads the whole file into `dst`; an error message, or "" when every byte came.
std::string read_all(int fd, uint8_t* dst, size_t size, const std::string& path) {
  size_t done = 0;
  while (done < size) {
    const ssize_t n = pread(fd, dst + done, size - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return "cannot read '" + path + "': " + std::strerror(errno);
    if (n == 0)
      return "'" + path + "' ended after " + std::to_string(done) + " of its " + std::to_string(size) + " bytes";
    done += static_cast<size_t>(n);
  }
  return {};
}

}  // namespace

MappedFile::~MappedFile() {
  if (m_data && m_reserved) munmap(m_data, m_reserved);
}

Result<std::unique_ptr<MappedFile>> MappedFile::open(const std::string& path, LoadMode mode) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    return make_error(err == ENOENT ? ErrorCode::NotFound : ErrorCode::IoError,
                      "cannot open '" + path + "': " + std::strerror(err));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return make_error(ErrorCode::IoError, "cannot stat '" + path + "': " + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return make_error(ErrorCode::InvalidArgument, "'" + path + "' is not a regular file");
  }
  std::unique_ptr<MappedFile> file(new MappedFile());
  file->m_size = static_cast<size_t>(st.st_size);
  file->m_mode = mode;
  if (file->m_size > 0 && mode == LoadMode::Map) {
    void* p = mmap(nullptr, file->m_size, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      file->m_size = 0;
      return make_error(ErrorCode::IoError, "cannot map '" + path + "': " + std::strerror(err));
    }
    file->m_data = p;
    file->m_reserved = file->m_size;
  } else if (file->m_size > 0) {
    // One extra huge page of address space, so the copy can start on a 2 MiB boundary: pages
    // the kernel can back with huge pages from the first byte.
    const size_t reserved = (file->m_size + kHugePage - 1) / kHugePage * kHugePage + kHugePage;
    void* region = mmap(nullptr, reserved, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (region == MAP_FAILED) {
      ::close(fd);
      return make_error(ErrorCode::OutOfMemory,
                        "not enough memory to read '" + path + "' (" + std::to_string(file->m_size >> 20) + " MiB)");
    }
    const auto base = reinterpret_cast<uintptr_t>(region);
    const uintptr_t aligned = (base + kHugePage - 1) & ~(uintptr_t{kHugePage} - 1);
    // Give back the unaligned head and the tail past the rounded size.
    if (aligned > base) munmap(region, aligned - base);
    const size_t kept = (file->m_size + kHugePage - 1) / kHugePage * kHugePage;
    if (base + reserved > aligned + kept)
      munmap(reinterpret_cast<void*>(aligned + kept), base + reserved - aligned - kept);
    file->m_data = reinterpret_cast<void*>(aligned);
    file->m_reserved = kept;
    // Advice only: where the kernel has no transparent huge pages the copy is in 4 KiB pages.
    madvise(file->m_data, kept, MADV_HUGEPAGE);
    if (std::string e = read_all(fd, static_cast<uint8_t*>(file->m_data), file->m_size, path); !e.empty()) {
      ::close(fd);
      return make_error(ErrorCode::IoError, e);
    }
    // Read-only from here, as a mapping of the file would be.
    mprotect(file->m_data, kept, PROT_READ);
  }
  ::close(fd);  // the mapping keeps the file alive
  return file;
}

uint64_t MappedFile::huge_page_bytes() const {
  if (m_mode != LoadMode::Read || m_data == nullptr) return 0;
  FILE* smaps = std::fopen("/proc/self/smaps", "r");
  if (smaps == nullptr) return 0;
  const auto begin = reinterpret_cast<uintptr_t>(m_data), end = begin + m_reserved;
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

}  // namespace iwb::gguf
