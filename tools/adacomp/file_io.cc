#include "file_io.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <vector>

namespace adacomp::tool {
namespace {

constexpr bool kLittleEndian = std::endian::native == std::endian::little;

inline uint32_t ByteSwap32(uint32_t v) {
  return (v >> 24) | ((v >> 8) & 0xff00u) | ((v << 8) & 0xff0000u) | (v << 24);
}

void SwapFloats(std::span<float> values) {
  for (float& f : values) f = std::bit_cast<float>(ByteSwap32(std::bit_cast<uint32_t>(f)));
}

Status OpenError(const std::string& path) {
  int err = errno;
  std::string msg = path + ": cannot open: " + std::strerror(err);
  return err == ENOENT ? Status::NotFound(msg) : Status::IOError(msg);
}

}  // namespace

std::string ErrnoMessage(const std::string& what) { return what + ": " + std::strerror(errno); }

// ---------------------------------------------------------------- OutputFile

Result<std::unique_ptr<OutputFile>> OutputFile::Create(const std::string& path) {
  if (path.empty()) return Status::InvalidArgument("empty output path");
  std::string temp = path + ".tmp.XXXXXX";
  std::vector<char> name(temp.begin(), temp.end());
  name.push_back('\0');
  int fd = ::mkstemp(name.data());
  if (fd < 0) return Status::IOError(ErrnoMessage(path + ": cannot create"));
  // mkstemp makes the file 0600; give it the usual permissions.
  mode_t mask = ::umask(0);
  ::umask(mask);
  ::fchmod(fd, 0666 & ~mask);
  std::FILE* file = ::fdopen(fd, "wb");
  if (file == nullptr) {
    Status s = Status::IOError(ErrnoMessage(path + ": cannot open"));
    ::close(fd);
    ::unlink(name.data());
    return s;
  }
  return std::unique_ptr<OutputFile>(new OutputFile(path, std::string(name.data()), file));
}

OutputFile::~OutputFile() {
  if (file_ != nullptr) std::fclose(file_);
  if (!committed_) ::unlink(temp_path_.c_str());
}

Status OutputFile::Write(const void* data, size_t bytes) {
  if (file_ == nullptr) return Status::Internal(path_ + ": write after close");
  if (bytes == 0) return Status::OK();
  if (std::fwrite(data, 1, bytes, file_) != bytes) {
    return Status::IOError(
        ErrnoMessage(path_ + ": write failed at byte " + std::to_string(bytes_written_)));
  }
  bytes_written_ += bytes;
  return Status::OK();
}

Status OutputFile::WriteFloats(std::span<const float> values) {
  if constexpr (kLittleEndian) {
    return Write(values.data(), values.size_bytes());
  } else {
    std::vector<float> swapped(values.begin(), values.end());
    SwapFloats(swapped);
    return Write(swapped.data(), swapped.size() * sizeof(float));
  }
}

Status OutputFile::Commit() {
  if (file_ == nullptr) return Status::Internal(path_ + ": committed twice");
  std::FILE* file = file_;
  file_ = nullptr;
  if (std::fflush(file) != 0) {
    Status s = Status::IOError(ErrnoMessage(path_ + ": write failed"));
    std::fclose(file);
    return s;
  }
  if (std::fclose(file) != 0) return Status::IOError(ErrnoMessage(path_ + ": close failed"));
  if (std::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    return Status::IOError(ErrnoMessage(path_ + ": cannot rename " + temp_path_ + " onto it"));
  }
  committed_ = true;
  return Status::OK();
}

// ----------------------------------------------------------------- InputFile

Result<std::unique_ptr<InputFile>> InputFile::Open(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) return OpenError(path);
  struct stat st;
  if (::fstat(::fileno(file), &st) != 0) {
    Status s = Status::IOError(ErrnoMessage(path + ": cannot stat"));
    std::fclose(file);
    return s;
  }
  if (!S_ISREG(st.st_mode)) {
    std::fclose(file);
    return Status::InvalidArgument(path + ": not a regular file");
  }
  return std::unique_ptr<InputFile>(new InputFile(path, file, static_cast<uint64_t>(st.st_size)));
}

InputFile::~InputFile() {
  if (file_ != nullptr) std::fclose(file_);
}

Status InputFile::ReadFloats(std::span<float> values) {
  size_t want = values.size_bytes();
  size_t got = std::fread(values.data(), 1, want, file_);
  if (got != want) {
    if (std::ferror(file_)) {
      return Status::IOError(
          ErrnoMessage(path_ + ": read failed at byte " + std::to_string(offset_ + got)));
    }
    return Status::Corruption(path_ + ": unexpected end of file at byte " +
                              std::to_string(offset_ + got) + " (wanted " + std::to_string(want) +
                              " bytes from byte " + std::to_string(offset_) + ")");
  }
  offset_ += got;
  if constexpr (!kLittleEndian) SwapFloats(values);
  return Status::OK();
}

// ---------------------------------------------------------------- MappedFile

Result<std::unique_ptr<MappedFile>> MappedFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return OpenError(path);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    Status s = Status::IOError(ErrnoMessage(path + ": cannot stat"));
    ::close(fd);
    return s;
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::InvalidArgument(path + ": not a regular file");
  }
  size_t size = static_cast<size_t>(st.st_size);
  const uint8_t* data = nullptr;
  if (size > 0) {
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      Status s = Status::IOError(ErrnoMessage(path + ": cannot map"));
      ::close(fd);
      return s;
    }
    ::madvise(p, size, MADV_SEQUENTIAL);
    data = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
  return std::unique_ptr<MappedFile>(new MappedFile(path, data, size));
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace adacomp::tool
