// src/train/dataset.h: the data a run trains on, loaded once and shared
// read-only by every learner of the process: image sets (Fashion-MNIST by
// default, IDX or CIFAR-10 by path) or a text corpus for char-lstm, with
// the limits and normalisation the options ask for. Torch-free (batches.h
// turns examples into tensors). Thread safety: immutable once loaded.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "adacomp/status.h"
#include "adacomp/trainer.h"
#include "data.h"

namespace adacomp::train {

inline constexpr const char* kDefaultImageDir = "/usr/share/datasets/fashion-mnist";
inline constexpr const char* kDefaultTextDir = "/usr/share/games/fortunes";

// One run's data; train_count / test_count are the examples used.
struct Data {
  std::string description;
  bool text = false;
  ImageSet train, test;
  float mean = 0.0f, inv_std = 1.0f;
  std::vector<uint8_t> train_text, test_text;
  int64_t seq_len = 0;
  int64_t train_count = 0, test_count = 0;
  std::vector<std::string> notes;
};

// Loads the data of the (resolved) options.
Result<std::shared_ptr<const Data>> LoadData(const TrainOptions& o);

}  // namespace adacomp::train
