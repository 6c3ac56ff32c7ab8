#include "checkpoint.h"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "sha256.h"

namespace adacomp::train {
namespace fs = std::filesystem;
namespace {

constexpr uint8_t kMagic[8] = {'A', 'D', 'A', 'C', 'K', 'P', 'T', 0};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeader = 24;
constexpr size_t kTrailer = 32;

void PutU32(std::vector<uint8_t>* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void PutU64(std::vector<uint8_t>* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<uint8_t>(v >> (8 * i)));
}
uint64_t GetLe(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= uint64_t{p[i]} << (8 * i);
  return v;
}

}  // namespace

void CheckpointBuilder::Add(const std::string& name, std::span<const uint8_t> data) {
  records_.emplace_back(name, std::vector<uint8_t>(data.begin(), data.end()));
}
void CheckpointBuilder::AddU64(const std::string& name, uint64_t value) {
  std::vector<uint8_t> b;
  PutU64(&b, value);
  records_.emplace_back(name, std::move(b));
}
void CheckpointBuilder::AddString(const std::string& name, const std::string& value) {
  records_.emplace_back(name, std::vector<uint8_t>(value.begin(), value.end()));
}

std::vector<uint8_t> CheckpointBuilder::Serialize() const {
  std::vector<uint8_t> out(kMagic, kMagic + 8);
  PutU32(&out, kVersion);
  PutU32(&out, static_cast<uint32_t>(records_.size()));
  PutU64(&out, 0);  // total length, patched below
  for (const auto& [name, data] : records_) {
    PutU32(&out, static_cast<uint32_t>(name.size()));
    out.insert(out.end(), name.begin(), name.end());
    PutU64(&out, data.size());
    out.insert(out.end(), data.begin(), data.end());
  }
  uint64_t total = out.size() + kTrailer;
  for (int i = 0; i < 8; ++i) out[16 + i] = static_cast<uint8_t>(total >> (8 * i));
  Sha256 h;
  h.Update(out);
  auto digest = h.Digest();
  out.insert(out.end(), digest.begin(), digest.end());
  return out;
}

Result<CheckpointView> CheckpointView::Parse(std::span<const uint8_t> image,
                                             const std::string& origin) {
  auto bad = [&](const std::string& why) { return Status::Corruption(origin + ": " + why); };
  if (image.size() < kHeader + kTrailer) {
    return bad("truncated (" + std::to_string(image.size()) + " bytes, less than a header)");
  }
  if (std::memcmp(image.data(), kMagic, 8) != 0)
    return bad("not an adacomp checkpoint (bad magic)");
  uint32_t version = static_cast<uint32_t>(GetLe(image.data() + 8, 4));
  if (version != kVersion) {
    return bad("checkpoint format version " + std::to_string(version) + " is not supported");
  }
  uint64_t total = GetLe(image.data() + 16, 8);
  if (total != image.size()) {
    return bad(total > image.size() ? "truncated: header says " + std::to_string(total) +
                                          " bytes, file has " + std::to_string(image.size())
                                    : "file has " + std::to_string(image.size() - total) +
                                          " unexpected trailing bytes");
  }
  Sha256 h;
  h.Update(image.first(image.size() - kTrailer));
  auto digest = h.Digest();
  if (std::memcmp(digest.data(), image.data() + image.size() - kTrailer, kTrailer) != 0) {
    return bad("checksum mismatch (the file is corrupted)");
  }
  uint32_t count = static_cast<uint32_t>(GetLe(image.data() + 12, 4));
  CheckpointView view;
  view.origin_ = origin;
  size_t pos = kHeader;
  size_t end = image.size() - kTrailer;
  for (uint32_t r = 0; r < count; ++r) {
    if (end - pos < 4) return bad("record " + std::to_string(r) + " is truncated");
    uint64_t name_len = GetLe(image.data() + pos, 4);
    pos += 4;
    if (end - pos < name_len + 8) return bad("record " + std::to_string(r) + " is truncated");
    std::string name(reinterpret_cast<const char*>(image.data() + pos), name_len);
    pos += name_len;
    uint64_t len = GetLe(image.data() + pos, 8);
    pos += 8;
    if (end - pos < len) return bad("record '" + name + "' is truncated");
    // The writer never repeats a name; a second copy would silently replace
    // the first, so the file is not one it wrote.
    auto [it, inserted] = view.records_.try_emplace(name);
    if (!inserted) return bad("record '" + name + "' appears twice");
    it->second.assign(image.begin() + pos, image.begin() + pos + len);
    pos += len;
  }
  if (pos != end) return bad("unexpected bytes after the last record");
  return view;
}

Result<std::span<const uint8_t>> CheckpointView::Get(const std::string& name) const {
  auto it = records_.find(name);
  if (it == records_.end()) return Status::Corruption(origin_ + ": record '" + name + "' missing");
  return std::span<const uint8_t>(it->second);
}

Result<uint64_t> CheckpointView::GetU64(const std::string& name) const {
  ADACOMP_ASSIGN_OR_RETURN(auto bytes, Get(name));
  if (bytes.size() != 8) {
    return Status::Corruption(origin_ + ": record '" + name + "' is not an 8-byte integer");
  }
  return GetLe(bytes.data(), 8);
}

Result<std::string> CheckpointView::GetString(const std::string& name) const {
  ADACOMP_ASSIGN_OR_RETURN(auto bytes, Get(name));
  return std::string(bytes.begin(), bytes.end());
}

namespace {

// "DIR: no space for PATH (N bytes needed, M free) ..." for a full disk.
Status NoSpace(const std::string& path, uint64_t needed, const char* why) {
  std::string dir = fs::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  std::string free_text = "unknown";
  struct statvfs st {};
  if (::statvfs(dir.c_str(), &st) == 0) {
    free_text = std::to_string(static_cast<uint64_t>(st.f_bavail) * st.f_frsize);
  }
  return Status::IOError(dir + ": " + why + " for " + fs::path(path).filename().string() + " (" +
                         std::to_string(needed) + " bytes needed, " + free_text +
                         " bytes free); nothing was written under that name and the files "
                         "already there are untouched: free space or choose another directory");
}

}  // namespace

Status WriteFileAtomic(const std::string& path, std::span<const uint8_t> bytes) {
  std::string tmp = path + ".tmp";
  {
    // Refuse up front when the file cannot fit, rather than fill the disk.
    std::string dir = fs::path(path).parent_path().string();
    struct statvfs st {};
    if (::statvfs(dir.empty() ? "." : dir.c_str(), &st) == 0 &&
        static_cast<uint64_t>(st.f_bavail) * st.f_frsize < bytes.size()) {
      return NoSpace(path, bytes.size(), "not enough free space");
    }
  }
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::IOError(tmp + ": cannot create (" + std::strerror(errno) + ")");
  // Closes and removes the temporary file after `call` failed with `err`.
  auto failed = [&](const char* call, int err) {
    const std::string why = std::strerror(err);
    ::close(fd);
    ::unlink(tmp.c_str());
    if (err == ENOSPC || err == EDQUOT) return NoSpace(path, bytes.size(), "no space left");
    return Status::IOError(tmp + ": " + call + " failed (" + why + ")");
  };
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return failed("write", errno);
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) return failed("fsync", errno);
  if (::close(fd) != 0) {
    ::unlink(tmp.c_str());
    return Status::IOError(tmp + ": close failed");
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string why = std::strerror(errno);
    ::unlink(tmp.c_str());
    return Status::IOError(path + ": rename failed (" + why + ")");
  }
  std::string dir = fs::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return Status::OK();
}

Result<std::vector<uint8_t>> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(path + ": cannot open");
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
  if (in.bad()) return Status::IOError(path + ": read error");
  return bytes;
}

std::string CheckpointPath(const std::string& dir, int64_t step) {
  char name[40];
  std::snprintf(name, sizeof(name), "ckpt-%010lld.ckpt", static_cast<long long>(step));
  return (fs::path(dir) / name).string();
}

std::vector<std::pair<int64_t, std::string>> ListCheckpoints(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();
    if (name.size() != 20 || name.rfind("ckpt-", 0) != 0 || name.substr(15) != ".ckpt") continue;
    std::string digits = name.substr(5, 10);
    if (digits.find_first_not_of("0123456789") != std::string::npos) continue;
    out.emplace_back(std::stoll(digits), entry.path().string());
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  return out;
}

Status SaveCheckpointFile(const std::string& dir, int64_t step, std::span<const uint8_t> image,
                          int keep) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::IOError(dir + ": cannot create directory (" + ec.message() + ")");
  ADACOMP_RETURN_IF_ERROR(WriteFileAtomic(CheckpointPath(dir, step), image));
  auto all = ListCheckpoints(dir);
  for (size_t i = static_cast<size_t>(std::max(keep, 1)); i < all.size(); ++i) {
    fs::remove(all[i].second, ec);
  }
  return Status::OK();
}

}  // namespace adacomp::train
