#include "data.h"

#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <system_error>

namespace adacomp::train {
namespace fs = std::filesystem;

std::string ToHexByte(uint8_t b);

Result<std::vector<uint8_t>> ReadMaybeGzip(const std::string& path, uint64_t max_bytes) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return Status::NotFound(path + ": no such file");
  if (!fs::is_regular_file(path, ec)) return Status::InvalidArgument(path + ": not a regular file");
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) return Status::IOError(path + ": cannot open");
  std::vector<uint8_t> out;
  std::vector<uint8_t> chunk(1 << 16);
  while (true) {
    int n = gzread(f, chunk.data(), static_cast<unsigned>(chunk.size()));
    if (n < 0) {
      int errnum = 0;
      const char* msg = gzerror(f, &errnum);
      std::string why = msg ? msg : "read error";
      gzclose(f);
      return Status::Corruption(path + ": cannot decompress (" + why + ")");
    }
    if (n == 0) break;
    if (out.size() + static_cast<uint64_t>(n) > max_bytes) {
      gzclose(f);
      return Status::OutOfRange(path + ": larger than " + std::to_string(max_bytes) + " bytes");
    }
    out.insert(out.end(), chunk.begin(), chunk.begin() + n);
  }
  // A truncated gzip stream reads as a short file without an error on some
  // zlib versions; gzclose_r reports it as Z_BUF_ERROR.
  int rc = gzclose(f);
  if (rc == Z_BUF_ERROR) return Status::Corruption(path + ": truncated gzip stream");
  if (rc != Z_OK) return Status::Corruption(path + ": gzip error " + std::to_string(rc));
  return out;
}

Status ParseIdx(const std::vector<uint8_t>& bytes, int expected_rank, const std::string& path,
                std::vector<int64_t>* dims, std::vector<uint8_t>* data) {
  if (bytes.size() < 4) {
    return Status::Corruption(path + ": " + std::to_string(bytes.size()) +
                              " bytes, too short for an IDX header");
  }
  if (bytes[0] != 0 || bytes[1] != 0) {
    return Status::Corruption(path +
                              ": not an IDX file (magic does not start with two zero bytes)");
  }
  if (bytes[2] != 0x08) {
    return Status::Corruption(path + ": IDX element type 0x" + ToHexByte(bytes[2]) +
                              " unsupported (expected 0x08, unsigned byte)");
  }
  int rank = bytes[3];
  if (rank != expected_rank) {
    return Status::Corruption(path + ": IDX rank " + std::to_string(rank) + ", expected " +
                              std::to_string(expected_rank));
  }
  size_t header = 4 + 4 * static_cast<size_t>(rank);
  if (bytes.size() < header) {
    return Status::Corruption(path + ": truncated IDX header (" + std::to_string(bytes.size()) +
                              " bytes, need " + std::to_string(header) + ")");
  }
  dims->clear();
  uint64_t total = 1;
  for (int d = 0; d < rank; ++d) {
    const uint8_t* p = bytes.data() + 4 + 4 * d;
    uint64_t v = (uint64_t{p[0]} << 24) | (uint64_t{p[1]} << 16) | (uint64_t{p[2]} << 8) | p[3];
    if (v == 0) {
      return Status::Corruption(path + ": IDX dimension " + std::to_string(d) + " is zero");
    }
    if (d > 0 && v > 4096) {
      return Status::Corruption(path + ": IDX dimension " + std::to_string(d) + " = " +
                                std::to_string(v) + " is implausibly large");
    }
    total *= v;
    if (total > (uint64_t{1} << 34)) return Status::Corruption(path + ": IDX dimensions overflow");
    dims->push_back(static_cast<int64_t>(v));
  }
  uint64_t have = bytes.size() - header;
  if (have < total) {
    return Status::Corruption(path + ": truncated: the header promises " + std::to_string(total) +
                              " data bytes, the file has " + std::to_string(have));
  }
  if (have > total) {
    return Status::Corruption(path + ": " + std::to_string(have - total) +
                              " unexpected bytes after the " + std::to_string(total) +
                              " data bytes the header declares");
  }
  data->assign(bytes.begin() + static_cast<std::ptrdiff_t>(header), bytes.end());
  return Status::OK();
}

Result<ImageSet> ReadIdxPair(const std::string& images_path, const std::string& labels_path) {
  ADACOMP_ASSIGN_OR_RETURN(auto image_bytes, ReadMaybeGzip(images_path));
  ADACOMP_ASSIGN_OR_RETURN(auto label_bytes, ReadMaybeGzip(labels_path));
  ImageSet set;
  std::vector<int64_t> idims, ldims;
  ADACOMP_RETURN_IF_ERROR(ParseIdx(image_bytes, 3, images_path, &idims, &set.pixels));
  ADACOMP_RETURN_IF_ERROR(ParseIdx(label_bytes, 1, labels_path, &ldims, &set.labels));
  if (idims[0] != ldims[0]) {
    return Status::Corruption(labels_path + ": " + std::to_string(ldims[0]) + " labels for the " +
                              std::to_string(idims[0]) + " images of " + images_path);
  }
  // Any u8 label is a class: the set has max label + 1 classes (10 for
  // Fashion-MNIST and MNIST, 27 for EMNIST letters, ...). LoadData gives the
  // training and test sets the larger of their two counts.
  int max_label = -1;
  for (uint8_t label : set.labels) max_label = std::max<int>(max_label, label);
  set.count = idims[0];
  set.channels = 1;
  set.height = idims[1];
  set.width = idims[2];
  set.classes = max_label + 1;
  return set;
}

namespace {
// "dir/name" if it exists, else "dir/name.gz" if that exists, else "".
std::string FindIdx(const std::string& dir, const std::string& name) {
  std::error_code ec;
  for (std::string candidate : {name, name + ".gz"}) {
    fs::path p = fs::path(dir) / candidate;
    if (fs::exists(p, ec)) return p.string();
  }
  return "";
}
}  // namespace

Result<ImageSet> LoadMnistDir(const std::string& dir, bool train) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return Status::NotFound(dir + ": no such directory");
  std::string prefix = train ? "train" : "t10k";
  std::string images = FindIdx(dir, prefix + "-images-idx3-ubyte");
  std::string labels = FindIdx(dir, prefix + "-labels-idx1-ubyte");
  if (images.empty()) {
    return Status::NotFound(dir + "/" + prefix + "-images-idx3-ubyte[.gz]: no such file");
  }
  if (labels.empty()) {
    return Status::NotFound(dir + "/" + prefix + "-labels-idx1-ubyte[.gz]: no such file");
  }
  ADACOMP_ASSIGN_OR_RETURN(ImageSet set, ReadIdxPair(images, labels));
  if (set.height != 28 || set.width != 28) {
    return Status::Corruption(images + ": images are " + std::to_string(set.height) + "x" +
                              std::to_string(set.width) + ", expected 28x28");
  }
  return set;
}

bool LooksLikeCifarDir(const std::string& dir) {
  std::error_code ec;
  return fs::exists(fs::path(dir) / "data_batch_1.bin", ec);
}

Result<ImageSet> LoadCifarDir(const std::string& dir, bool train) {
  std::vector<std::string> files;
  if (train) {
    for (int i = 1; i <= 5; ++i) {
      files.push_back((fs::path(dir) / ("data_batch_" + std::to_string(i) + ".bin")).string());
    }
  } else {
    files.push_back((fs::path(dir) / "test_batch.bin").string());
  }
  ImageSet set;
  set.channels = 3;
  set.height = 32;
  set.width = 32;
  set.classes = 10;
  for (const auto& f : files) {
    ADACOMP_ASSIGN_OR_RETURN(auto bytes, ReadMaybeGzip(f, uint64_t{1} << 30));
    ADACOMP_RETURN_IF_ERROR(ParseCifarBatch(bytes, f, &set));
  }
  return set;
}

Status ParseCifarBatch(std::span<const uint8_t> bytes, const std::string& path, ImageSet* set) {
  constexpr size_t kRecord = 3073;
  if (bytes.empty() || bytes.size() % kRecord != 0) {
    return Status::Corruption(path + ": " + std::to_string(bytes.size()) +
                              " bytes is not a whole number of 3073-byte CIFAR-10 records");
  }
  const size_t n = bytes.size() / kRecord;
  // Every label is checked before *set is touched.
  for (size_t r = 0; r < n; ++r) {
    const uint8_t label = bytes[r * kRecord];
    if (label >= 10) {
      return Status::Corruption(path + ": record " + std::to_string(r) + " has label " +
                                std::to_string(label) + ", not in 0..9");
    }
  }
  for (size_t r = 0; r < n; ++r) {
    const uint8_t* rec = bytes.data() + r * kRecord;
    set->labels.push_back(rec[0]);
    set->pixels.insert(set->pixels.end(), rec + 1, rec + kRecord);
  }
  set->count += static_cast<int64_t>(n);
  return Status::OK();
}

ImageSet PadTo32x32x3(const ImageSet& in) {
  ImageSet out;
  out.count = in.count;
  out.channels = 3;
  out.height = in.height + 4;
  out.width = in.width + 4;
  out.classes = in.classes;
  out.labels = in.labels;
  out.pixels.assign(static_cast<size_t>(out.count * out.image_bytes()), 0);
  for (int64_t i = 0; i < in.count; ++i) {
    const uint8_t* src = in.pixels.data() + i * in.image_bytes();
    uint8_t* dst = out.pixels.data() + i * out.image_bytes();
    for (int64_t c = 0; c < 3; ++c) {
      for (int64_t y = 0; y < in.height; ++y) {
        for (int64_t x = 0; x < in.width; ++x) {
          dst[(c * out.height + y + 2) * out.width + x + 2] = src[y * in.width + x];
        }
      }
    }
  }
  return out;
}

namespace {
Status CheckTestFraction(double test_fraction) {
  // Written so that NaN fails too.
  if (!(test_fraction >= 0.0 && test_fraction < 1.0)) {
    return Status::InvalidArgument("text corpus: test fraction " + std::to_string(test_fraction) +
                                   " is not in [0, 1)");
  }
  return Status::OK();
}
}  // namespace

Result<TextCorpus> LoadTextCorpus(const std::string& path, double test_fraction) {
  ADACOMP_RETURN_IF_ERROR(CheckTestFraction(test_fraction));
  std::error_code ec;
  std::vector<std::string> files;
  bool from_dir = false;
  if (fs::is_directory(path, ec)) {
    from_dir = true;
    for (const auto& entry : fs::directory_iterator(path, ec)) {
      if (!entry.is_regular_file(ec)) continue;
      std::string name = entry.path().filename().string();
      if (name.empty() || name[0] == '.') continue;
      auto ends_with = [&](const std::string& s) {
        return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
      };
      if (ends_with(".dat") || ends_with(".u8")) continue;
      files.push_back(entry.path().string());
    }
    if (ec) return Status::IOError(path + ": cannot list directory (" + ec.message() + ")");
    std::sort(files.begin(), files.end());
  } else if (fs::exists(path, ec)) {
    files.push_back(path);
  } else {
    return Status::NotFound(path + ": no such file or directory");
  }
  TextCorpus corpus;
  for (const auto& f : files) {
    ADACOMP_ASSIGN_OR_RETURN(auto bytes, ReadMaybeGzip(f, uint64_t{1} << 30));
    ADACOMP_RETURN_IF_ERROR(AddTextFile(bytes, f, test_fraction, from_dir, &corpus));
  }
  if (corpus.train.empty()) {
    return Status::NotFound(path + ": no text found (empty, or only skipped files)");
  }
  return corpus;
}

Status AddTextFile(std::span<const uint8_t> bytes, const std::string& path, double test_fraction,
                   bool skip_binary, TextCorpus* corpus) {
  ADACOMP_RETURN_IF_ERROR(CheckTestFraction(test_fraction));
  if (std::find(bytes.begin(), bytes.end(), uint8_t{0}) != bytes.end()) {
    if (skip_binary) return Status::OK();  // a binary file among text files: skip it
    return Status::Corruption(path + ": contains NUL bytes; not a text file");
  }
  if (bytes.empty()) return Status::OK();
  // floor(size * fraction) <= size for a fraction in [0, 1); min() keeps the
  // split inside the file whatever the rounding.
  const size_t test_bytes = std::min(
      bytes.size(), static_cast<size_t>(static_cast<double>(bytes.size()) * test_fraction));
  const size_t split = bytes.size() - test_bytes;
  corpus->train.insert(corpus->train.end(), bytes.begin(), bytes.begin() + split);
  corpus->test.insert(corpus->test.end(), bytes.begin() + split, bytes.end());
  corpus->files.push_back(path);
  return Status::OK();
}

std::string ToHexByte(uint8_t b) {
  static const char kDigits[] = "0123456789abcdef";
  return std::string{kDigits[b >> 4], kDigits[b & 15]};
}

}  // namespace adacomp::train
