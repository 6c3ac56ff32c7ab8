// Loading the run's data (see dataset.h).
#include "dataset.h"

#include <algorithm>
#include <cmath>

namespace adacomp::train {

Result<std::shared_ptr<const Data>> LoadData(const TrainOptions& o) {
  auto d = std::make_shared<Data>();
  if (o.model.kind == Model::kCharLstm) {
    std::string path = o.model.data_dir.empty() ? kDefaultTextDir : o.model.data_dir;
    ADACOMP_ASSIGN_OR_RETURN(TextCorpus corpus, LoadTextCorpus(path));
    d->text = true;
    d->seq_len = o.model.seq_len;
    d->train_text = std::move(corpus.train);
    d->test_text = std::move(corpus.test);
    d->train_count = (static_cast<int64_t>(d->train_text.size()) - 1) / o.model.seq_len;
    d->test_count = (static_cast<int64_t>(d->test_text.size()) - 1) / o.model.seq_len;
    if (d->train_count < 1 || d->test_count < 1) {
      return Status::InvalidArgument(path + ": too little text for sequences of " +
                                     std::to_string(o.model.seq_len) + " characters");
    }
    d->description = "text:" + path + " (" + std::to_string(corpus.files.size()) + " files)";
  } else {
    bool cifar = o.model.kind == Model::kCifarCnn && !o.model.data_dir.empty() &&
                 LooksLikeCifarDir(o.model.data_dir);
    if (cifar) {
      ADACOMP_ASSIGN_OR_RETURN(d->train, LoadCifarDir(o.model.data_dir, true));
      ADACOMP_ASSIGN_OR_RETURN(d->test, LoadCifarDir(o.model.data_dir, false));
      d->description = "cifar-10";
    } else {
      std::string dir = o.model.data_dir.empty() ? kDefaultImageDir : o.model.data_dir;
      ADACOMP_ASSIGN_OR_RETURN(d->train, LoadMnistDir(dir, true));
      ADACOMP_ASSIGN_OR_RETURN(d->test, LoadMnistDir(dir, false));
      d->description = o.model.data_dir.empty() ? "fashion-mnist" : "idx:" + dir;
      // One class count for both sets (a test label the training set lacks
      // still needs its logit).
      const int classes = std::max(d->train.classes, d->test.classes);
      if (classes < 2) {
        return Status::Corruption(dir + ": every label of the training and test sets is 0; " +
                                  "a classifier needs at least two classes");
      }
      d->train.classes = d->test.classes = classes;
      if (classes != 10) d->description += " (" + std::to_string(classes) + " classes)";
      if (o.model.kind == Model::kCifarCnn) {
        d->train = PadTo32x32x3(d->train);
        d->test = PadTo32x32x3(d->test);
        d->description += "-32x32x3";
        d->notes.push_back(
            "cifar-cnn: no CIFAR-10 batches given (--data-dir DIR with data_batch_1.bin): "
            "training on " +
            d->description + " (28x28 images padded to 32x32, repeated over 3 channels)");
      }
    }
    d->train_count = d->train.count;
    d->test_count = d->test.count;
  }
  if (o.run.train_limit > 0) d->train_count = std::min(d->train_count, o.run.train_limit);
  if (o.run.test_limit > 0) d->test_count = std::min(d->test_count, o.run.test_limit);
  if (!d->text) {
    // Normalise with the mean and standard deviation of the training pixels used.
    double sum = 0, sum2 = 0;
    size_t n = static_cast<size_t>(d->train_count * d->train.image_bytes());
    for (size_t i = 0; i < n; ++i) {
      double v = d->train.pixels[i] / 255.0;
      sum += v;
      sum2 += v * v;
    }
    double mean = sum / static_cast<double>(n);
    double var = std::max(sum2 / static_cast<double>(n) - mean * mean, 1e-6);
    d->mean = static_cast<float>(mean);
    d->inv_std = static_cast<float>(1.0 / std::sqrt(var));
  }
  return std::shared_ptr<const Data>(std::move(d));
}

}  // namespace adacomp::train
