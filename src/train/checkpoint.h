// src/train/checkpoint.h: the checkpoint container and its atomic file I/O
// (no torch here).
//
// A checkpoint is a list of named byte records in one file:
//   offset 0   8 bytes  magic "ADACKPT" followed by a zero byte
//          8   4        format version (1), little-endian
//         12   4        record count
//         16   8        total file length in bytes
//         24   ...      records: u32 name length, name, u64 data length, data
//        end-32 32      SHA-256 of every byte before it
// All integers little-endian. Record names are distinct. A file whose
// length, structure or checksum is wrong, or that repeats a record name, is
// rejected as Corruption naming the file and the problem.
//
// Files are written atomically: to NAME.tmp, fsync, rename over NAME, fsync
// of the directory; a crash leaves either the old or the new file. Files are
// named ckpt-<step, 10 digits>.ckpt; the writer keeps the newest `keep`.
// Thread safety: values; no shared state.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "adacomp/status.h"

namespace adacomp::train {

class CheckpointBuilder {
 public:
  void Add(const std::string& name, std::span<const uint8_t> data);
  void AddU64(const std::string& name, uint64_t value);
  void AddString(const std::string& name, const std::string& value);
  // The complete file image, checksum included.
  std::vector<uint8_t> Serialize() const;

 private:
  std::vector<std::pair<std::string, std::vector<uint8_t>>> records_;
};

class CheckpointView {
 public:
  // Validates the whole image (length, structure, checksum). `origin` names
  // the file in error messages. The view copies the records.
  static Result<CheckpointView> Parse(std::span<const uint8_t> image, const std::string& origin);
  bool Has(const std::string& name) const { return records_.count(name) != 0; }
  Result<std::span<const uint8_t>> Get(const std::string& name) const;
  Result<uint64_t> GetU64(const std::string& name) const;
  Result<std::string> GetString(const std::string& name) const;
  const std::string& origin() const { return origin_; }

 private:
  std::string origin_;
  std::map<std::string, std::vector<uint8_t>> records_;
};

// Writes bytes to path atomically (path.tmp, fsync, rename, fsync dir).
Status WriteFileAtomic(const std::string& path, std::span<const uint8_t> bytes);
Result<std::vector<uint8_t>> ReadWholeFile(const std::string& path);

std::string CheckpointPath(const std::string& dir, int64_t step);
// (step, path) of every ckpt-*.ckpt in dir, newest (highest step) first.
std::vector<std::pair<int64_t, std::string>> ListCheckpoints(const std::string& dir);
// Writes a checkpoint for `step` into dir (created if missing) and removes
// all but the newest `keep` checkpoints.
Status SaveCheckpointFile(const std::string& dir, int64_t step, std::span<const uint8_t> image,
                          int keep);

}  // namespace adacomp::train
