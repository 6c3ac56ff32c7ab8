// Helpers for the file-reader fuzz targets (fuzz_checkpoint, fuzz_idx,
// fuzz_cifar, fuzz_text); not part of the library.
//
// - MemFile: an anonymous in-memory file (memfd) reachable by a path
//   (/proc/self/fd/N), so that the path-based readers (ReadMaybeGzip,
//   ReadWholeFile, LoadTextCorpus on one file) run on fuzz bytes without
//   touching a disk. One object is reused for every input of a process.
// - Gzip: the bytes as one gzip member (zlib, default level), to hand the
//   readers a valid stream whose content the fuzzer still controls.
// - IsGzipMagic: whether bytes start like a gzip stream (1f 8b), in which
//   case zlib's transparent reading does not apply.
// - ExpectRejected: the common property of a rejected input: the expected
//   status code(s) and a message that starts with the file's name.
// Thread safety: none needed (each fuzz input runs on one thread).
#pragma once

#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

#include "adacomp/status.h"
#include "fuzz_util.h"

namespace adacomp::fuzz {

class MemFile {
 public:
  explicit MemFile(const char* tag) {
    fd_ = memfd_create(tag, MFD_CLOEXEC);
    FUZZ_CHECK(fd_ >= 0, "memfd_create failed");
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~MemFile() { ::close(fd_); }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;

  // Replaces the content with bytes and returns the path to open.
  const std::string& Set(std::span<const uint8_t> bytes) {
    FUZZ_CHECK(::ftruncate(fd_, 0) == 0, "ftruncate failed");
    size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n =
          ::pwrite(fd_, bytes.data() + done, bytes.size() - done, static_cast<off_t>(done));
      FUZZ_CHECK(n > 0, "pwrite failed");
      done += static_cast<size_t>(n);
    }
    return path_;
  }
  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  std::string path_;
};

inline std::vector<uint8_t> Gzip(std::span<const uint8_t> bytes) {
  z_stream z{};
  // windowBits 15 + 16: a gzip header and trailer around the deflate stream.
  FUZZ_CHECK(
      deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK,
      "deflateInit2 failed");
  std::vector<uint8_t> out(deflateBound(&z, static_cast<uLong>(bytes.size())) + 32);
  z.next_in = const_cast<Bytef*>(bytes.data());
  z.avail_in = static_cast<uInt>(bytes.size());
  z.next_out = out.data();
  z.avail_out = static_cast<uInt>(out.size());
  FUZZ_CHECK(deflate(&z, Z_FINISH) == Z_STREAM_END, "deflate did not finish");
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

inline bool IsGzipMagic(std::span<const uint8_t> b) {
  return b.size() >= 2 && b[0] == 0x1f && b[1] == 0x8b;
}

inline bool StartsWith(const std::string& s, const std::string& prefix) {
  return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}

inline void ExpectRejected(const Status& st, std::initializer_list<StatusCode> codes,
                           const std::string& origin) {
  FUZZ_CHECK(!st.ok(), "expected a rejection");
  bool code_ok = false;
  for (StatusCode c : codes) code_ok = code_ok || st.code() == c;
  FUZZ_CHECK(code_ok, "unexpected status %s", st.ToString().c_str());
  FUZZ_CHECK(StartsWith(st.message(), origin + ": "), "message does not name the file: %s",
             st.ToString().c_str());
}

}  // namespace adacomp::fuzz
