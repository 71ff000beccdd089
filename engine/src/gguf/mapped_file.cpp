// POSIX implementation of MappedFile.
#include "gguf/mapped_file.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace iwb::gguf {

MappedFile::~MappedFile() {
  if (m_data && m_size) munmap(m_data, m_size);
}

Result<std::unique_ptr<MappedFile>> MappedFile::open(const std::string& path) {
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
  if (file->m_size > 0) {
    void* p = mmap(nullptr, file->m_size, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      file->m_size = 0;
      return make_error(ErrorCode::IoError, "cannot map '" + path + "': " + std::strerror(err));
    }
    file->m_data = p;
  }
  ::close(fd);  // the mapping keeps the file alive
  return file;
}

}  // namespace iwb::gguf
