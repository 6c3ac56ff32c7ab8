// src/train/data.h: readers for the training data sets (no torch here).
//
// - IDX files (MNIST / Fashion-MNIST), gzip-compressed or raw: validated
//   magic, element type, rank, dimensions and exact size.
// - CIFAR-10 binary batches (data_batch_1..5.bin, test_batch.bin; records of
//   1 label byte + 3072 pixel bytes, channel-major).
// - Plain text for the character model: a file, or a directory whose plain
//   files are read in name order (*.dat, *.u8 and hidden files skipped).
//
// Every error names the file and what is wrong with it. The loaded sets are
// immutable values; one copy may be shared read-only by many learner threads.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "adacomp/status.h"

namespace adacomp::train {

// count images of channels x height x width bytes (channel-major), plus labels.
struct ImageSet {
  int64_t count = 0;
  int64_t channels = 1;
  int64_t height = 0;
  int64_t width = 0;
  int classes = 10;
  std::vector<uint8_t> pixels;  // count * channels * height * width
  std::vector<uint8_t> labels;  // count, each < classes
  int64_t image_bytes() const { return channels * height * width; }
};

// The whole content of a file, gunzipped when it is gzip (raw otherwise).
// Fails with NotFound / IOError / Corruption naming the file; files larger
// than max_bytes after decompression are OutOfRange.
Result<std::vector<uint8_t>> ReadMaybeGzip(const std::string& path,
                                           uint64_t max_bytes = uint64_t{1} << 31);

// Parses IDX bytes: an unsigned-byte array of rank `expected_rank` (3 for
// images, 1 for labels). `dims` receives the dimensions, `data` the payload.
Status ParseIdx(const std::vector<uint8_t>& bytes, int expected_rank, const std::string& path,
                std::vector<int64_t>* dims, std::vector<uint8_t>* data);

// Reads an IDX image file and its label file and checks their counts
// agree; classes = the largest label + 1 (LoadData gives the training and
// test sets the larger of their two counts).
Result<ImageSet> ReadIdxPair(const std::string& images_path, const std::string& labels_path);

// MNIST-layout directory: {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz].
Result<ImageSet> LoadMnistDir(const std::string& dir, bool train);

// CIFAR-10 binary directory: data_batch_1..5.bin (train) or test_batch.bin.
Result<ImageSet> LoadCifarDir(const std::string& dir, bool train);
// Parses the bytes of one CIFAR-10 batch (`path` names it in errors) and
// appends its records to *set (count, labels, pixels; the shape fields are
// not touched). The bytes must be a non-empty whole number of 3073-byte
// records with labels in 0..9; otherwise Corruption and *set is unchanged.
// LoadCifarDir reads each file with ReadMaybeGzip and calls this.
Status ParseCifarBatch(std::span<const uint8_t> bytes, const std::string& path, ImageSet* set);
// True when dir holds data_batch_1.bin (so the caller can fall back otherwise).
bool LooksLikeCifarDir(const std::string& dir);

// 28x28x1 -> 32x32x3: zero padding of 2 on each side, the channel repeated 3 times.
ImageSet PadTo32x32x3(const ImageSet& in);

// Byte-level text corpus, split per file: the first (1 - test_fraction) of
// every file goes to train, the rest to test.
struct TextCorpus {
  std::vector<uint8_t> train;
  std::vector<uint8_t> test;
  std::vector<std::string> files;  // the files read, in order
};
// test_fraction must be in [0, 1) (InvalidArgument otherwise).
Result<TextCorpus> LoadTextCorpus(const std::string& path, double test_fraction = 0.1);

// Adds the bytes of one text file (`path` names it in errors) to *corpus the
// way LoadTextCorpus does: the first size - floor(size * test_fraction) bytes
// to train, the rest to test, and path to files. An empty file is skipped; a
// file with a NUL byte is skipped when skip_binary (LoadTextCorpus reading a
// directory), else Corruption. test_fraction outside [0, 1) is
// InvalidArgument. *corpus is unchanged on an error or a skipped file.
Status AddTextFile(std::span<const uint8_t> bytes, const std::string& path, double test_fraction,
                   bool skip_binary, TextCorpus* corpus);

}  // namespace adacomp::train
