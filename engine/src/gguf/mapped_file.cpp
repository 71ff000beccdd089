// POSIX implementation of MappedFile.
#include "gguf/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <system_error>
#include <thread>

namespace iwb::gguf {
namespace {

// Reads [offset, offset + size) of the file into `dst + offset`, at most kReadChunk bytes a call,
// adding each call's bytes to `done_in_all` and then calling `after_each` (when set); an error
// message, or "" when every byte came.
constexpr size_t kReadChunk = size_t{32} << 20;

std::string read_range(int fd, uint8_t* dst, size_t offset, size_t size, const std::string& path, size_t file_size,
                       std::atomic<size_t>& done_in_all, const std::function<void()>& after_each) {
  size_t done = 0;
  while (done < size) {
    const ssize_t n =
        pread(fd, dst + offset + done, std::min(size - done, kReadChunk), static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    // (error_code's message, unlike strerror, is safe on several threads at once.)
    if (n < 0) return "cannot read '" + path + "': " + std::error_code(errno, std::generic_category()).message();
    if (n == 0) {
      return "'" + path + "' ended after " + std::to_string(offset + done) + " of its " + std::to_string(file_size) +
             " bytes";
    }
    done += static_cast<size_t>(n);
    done_in_all += static_cast<size_t>(n);
    if (after_each) after_each();
  }
  return {};
}

// Reads the whole file into the region, a slice per thread (HugePageRegion::for_each_slice):
// the kernel clears each fresh page on the thread whose read first touches it, and that
// clearing, not the copy, was most of a read on one thread (1065 MiB: 1.9 s of system time on a
// Xeon model 167 KVM guest). Several reads in flight also keep a disk's queue busier. The
// calling thread reads the first slice, reporting progress between its reads, then until every
// slice is read or has failed.
std::string read_all(int fd, const HugePageRegion& region, size_t size, const std::string& path,
                     const std::function<void(double)>& progress) {
  std::mutex mutex;
  std::string first_error;  // the error of the slice nearest the start, as one read would see it
  size_t first_error_offset = size;
  std::atomic<size_t> read{0}, settled{0};  // bytes read; bytes read or given up on
  auto* dst = static_cast<uint8_t*>(region.data());
  const std::function<void()> report = [&] {
    if (progress) progress(static_cast<double>(read.load()) / static_cast<double>(size));
  };
  region.for_each_slice(size, load_threads(size), [&](size_t offset, size_t bytes) {
    const bool reports = offset == 0 && progress;
    std::string e = read_range(fd, dst, offset, bytes, path, size, read, reports ? report : nullptr);
    settled += bytes;
    if (!e.empty()) {
      const std::lock_guard lock(mutex);
      if (offset < first_error_offset) {
        first_error = std::move(e);
        first_error_offset = offset;
      }
    }
    if (reports) {
      while (settled.load() < size) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        report();
      }
    }
  });
  return first_error;
}

}  // namespace

MappedFile::~MappedFile() {
  if (m_mode == LoadMode::Map && m_data != nullptr && m_size > 0) munmap(m_data, m_size);
}

Result<std::unique_ptr<MappedFile>> MappedFile::open(const std::string& path, LoadMode mode,
                                                     const std::function<void(double)>& read_progress) {
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
  } else if (file->m_size > 0) {
    file->m_copy = HugePageRegion::allocate(file->m_size, /*no_reserve=*/true);
    if (file->m_copy.empty()) {
      ::close(fd);
      return make_error(ErrorCode::OutOfMemory,
                        "not enough memory to read '" + path + "' (" + std::to_string(file->m_size >> 20) + " MiB)");
    }
    file->m_data = file->m_copy.data();
    if (std::string e = read_all(fd, file->m_copy, file->m_size, path, read_progress); !e.empty()) {
      ::close(fd);
      return make_error(ErrorCode::IoError, e);
    }
    // Read-only from here, as a mapping of the file would be.
    file->m_copy.make_read_only();
  }
  ::close(fd);  // the mapping keeps the file alive
  return file;
}

uint64_t MappedFile::huge_page_bytes() const { return m_copy.huge_page_bytes(); }

}  // namespace iwb::gguf
