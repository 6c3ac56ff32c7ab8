// tools/adacomp/file_io.h: the file handling of the `adacomp` program.
//
// OutputFile writes to a temporary file beside the destination and renames
// it into place only in Commit(), so a failed command never leaves a
// half-written output; an uncommitted OutputFile deletes its temporary file
// when destroyed. InputFile reads a file sequentially (streaming, a chunk at
// a time). MappedFile maps a whole file read-only, so frames can be read in
// place without loading the file into memory.
//
// Every error message starts with the file's path and says what failed
// ("out.frames: write failed: No space left on device").
// Thread safety: one object per thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>

#include "adacomp/status.h"

namespace adacomp::tool {

class OutputFile {
 public:
  // Creates "<path>.tmp.XXXXXX" in the destination's directory.
  static Result<std::unique_ptr<OutputFile>> Create(const std::string& path);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  Status Write(const void* data, size_t bytes);
  Status WriteFloats(std::span<const float> values);  // little-endian float32
  // Flushes, closes and renames the temporary file onto the destination.
  Status Commit();
  uint64_t bytes_written() const { return bytes_written_; }
  const std::string& path() const { return path_; }

 private:
  OutputFile(std::string path, std::string temp_path, std::FILE* file)
      : path_(std::move(path)), temp_path_(std::move(temp_path)), file_(file) {}
  std::string path_;
  std::string temp_path_;
  std::FILE* file_;
  uint64_t bytes_written_ = 0;
  bool committed_ = false;
};

class InputFile {
 public:
  // NotFound if the file does not exist, IOError if it cannot be opened.
  static Result<std::unique_ptr<InputFile>> Open(const std::string& path);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  uint64_t size() const { return size_; }
  uint64_t offset() const { return offset_; }
  // Reads exactly values.size() little-endian float32 values; an early end
  // of file is Corruption naming the byte offset.
  Status ReadFloats(std::span<float> values);
  const std::string& path() const { return path_; }

 private:
  InputFile(std::string path, std::FILE* file, uint64_t size)
      : path_(std::move(path)), file_(file), size_(size) {}
  std::string path_;
  std::FILE* file_;
  uint64_t size_;
  uint64_t offset_ = 0;
};

class MappedFile {
 public:
  static Result<std::unique_ptr<MappedFile>> Open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  const std::string& path() const { return path_; }

 private:
  MappedFile(std::string path, const uint8_t* data, size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}
  std::string path_;
  const uint8_t* data_;
  size_t size_;
};

// "what: strerror(errno)" for the current errno.
std::string ErrnoMessage(const std::string& what);

}  // namespace adacomp::tool
