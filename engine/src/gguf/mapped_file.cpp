// POSIX implementation of MappedFile.
#include "gguf/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cerrno>
#include <cstring>

namespace iwb::gguf {
namespace {

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
  if (m_mode == LoadMode::Map && m_data != nullptr && m_size > 0) munmap(m_data, m_size);
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
  } else if (file->m_size > 0) {
    file->m_copy = HugePageRegion::allocate(file->m_size, /*no_reserve=*/true);
    if (file->m_copy.empty()) {
      ::close(fd);
      return make_error(ErrorCode::OutOfMemory,
                        "not enough memory to read '" + path + "' (" + std::to_string(file->m_size >> 20) + " MiB)");
    }
    file->m_data = file->m_copy.data();
    if (std::string e = read_all(fd, static_cast<uint8_t*>(file->m_data), file->m_size, path); !e.empty()) {
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
