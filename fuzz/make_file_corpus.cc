// Writes the seed corpora of the file-reader fuzz targets (checked in under
// fuzz/corpus/; rerun after a format change):
//   fuzz_make_file_corpus OUT_DIR
// Every seed starts with the target's control byte (see each fuzz_*.cc).
// OUT_DIR/fuzz_checkpoint/: checkpoint images (empty, one record, the record
//   names the trainer writes, binary names), as written and with the length
//   and checksum recomputed by the target (control 3), and one read through a
//   file (control 7);
// OUT_DIR/fuzz_idx/: IDX image and label files (tiny and 28x28), raw, gzip
//   files, gzip made by the target, and image/label pairs;
// OUT_DIR/fuzz_cifar/: batches of one and two records, raw and gzip;
// OUT_DIR/fuzz_text/: text corpora of one and several files, with a NUL
//   file, an empty file, gzip, and odd test fractions.
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "train/checkpoint.h"

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

namespace {

int g_count = 0;

void Write(const fs::path& p, const Bytes& bytes) {
  std::ofstream f(p, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!f) {
    std::fprintf(stderr, "cannot write %s\n", p.c_str());
    std::exit(1);
  }
  ++g_count;
}

Bytes Cat(uint8_t control, const Bytes& body) {
  Bytes out(body.size() + 1);
  out[0] = control;
  std::copy(body.begin(), body.end(), out.begin() + 1);
  return out;
}

Bytes Gzip(const Bytes& in) {
  z_stream z{};
  if (deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) std::exit(1);
  Bytes out(deflateBound(&z, static_cast<uLong>(in.size())) + 32);
  z.next_in = const_cast<Bytef*>(in.data());
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = out.data();
  z.avail_out = static_cast<uInt>(out.size());
  if (deflate(&z, Z_FINISH) != Z_STREAM_END) std::exit(1);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

Bytes Idx(const std::vector<uint32_t>& dims, uint8_t seed) {
  Bytes b = {0, 0, 8, static_cast<uint8_t>(dims.size())};
  size_t n = 1;
  for (uint32_t d : dims) {
    for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<uint8_t>(d >> s));
    n *= d;
  }
  for (size_t i = 0; i < n; ++i) b.push_back(static_cast<uint8_t>((i * 37 + seed) % 10));
  return b;
}

Bytes U16(size_t v) { return {static_cast<uint8_t>(v), static_cast<uint8_t>(v >> 8)}; }

Bytes Pair(const Bytes& images, const Bytes& labels) {
  Bytes b = U16(images.size());
  b.insert(b.end(), images.begin(), images.end());
  b.insert(b.end(), labels.begin(), labels.end());
  return b;
}

Bytes Cifar(int records, uint8_t first_label) {
  Bytes b;
  for (int r = 0; r < records; ++r) {
    b.push_back(static_cast<uint8_t>((first_label + r) % 10));
    for (int i = 0; i < 3072; ++i) b.push_back(static_cast<uint8_t>(i * 7 + r));
  }
  return b;
}

Bytes Text(const std::vector<Bytes>& files) {
  Bytes b;
  for (const Bytes& f : files) {
    Bytes len = U16(f.size());
    b.insert(b.end(), len.begin(), len.end());
    b.insert(b.end(), f.begin(), f.end());
  }
  return b;
}

Bytes Str(const std::string& s) { return Bytes(s.begin(), s.end()); }

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  const fs::path out(argv[1]);
  for (const char* t : {"fuzz_checkpoint", "fuzz_idx", "fuzz_cifar", "fuzz_text"}) {
    fs::create_directories(out / t);
  }

  // Checkpoints.
  {
    const fs::path d = out / "fuzz_checkpoint";
    adacomp::train::CheckpointBuilder empty;
    adacomp::train::CheckpointBuilder one;
    one.AddU64("steps_done", 1234);
    adacomp::train::CheckpointBuilder trainer;
    trainer.AddString("fingerprint", "model=mlp codec=adacomp seed=1");
    for (const char* n : {"steps_done", "epoch", "position_in_epoch", "shuffle_seed", "skipped"}) {
      trainer.AddU64(n, 7);
    }
    Bytes weights(300);
    for (size_t i = 0; i < weights.size(); ++i) weights[i] = static_cast<uint8_t>(i * 11);
    trainer.Add("weights", weights);
    trainer.Add("optimizer", Bytes(40, 0x3c));
    trainer.Add("compressors/0", Bytes(17, 1));
    trainer.Add("totals/run", {});
    adacomp::train::CheckpointBuilder odd;
    odd.Add(std::string("\0\xff name", 7), Bytes{1, 2, 3});
    odd.Add("", Bytes(8, 0xff));
    const std::pair<const char*, const adacomp::train::CheckpointBuilder*> images[] = {
        {"empty", &empty}, {"one_u64", &one}, {"trainer", &trainer}, {"odd_names", &odd}};
    for (const auto& [name, b] : images) {
      const Bytes image = b->Serialize();
      Write(d / (std::string(name) + "_as_written"), Cat(0, image));
      Write(d / (std::string(name) + "_resealed"), Cat(3, image));
    }
    Write(d / "trainer_via_file", Cat(7, trainer.Serialize()));
  }

  // IDX.
  {
    const fs::path d = out / "fuzz_idx";
    const Bytes tiny_images = Idx({3, 2, 2}, 1), tiny_labels = Idx({3}, 2);
    const Bytes mnist_images = Idx({1, 28, 28}, 3), mnist_labels = Idx({1}, 4);
    Write(d / "images_tiny", Cat(0, tiny_images));
    Write(d / "labels_tiny", Cat(1, tiny_labels));
    Write(d / "images_28x28", Cat(0, mnist_images));
    Write(d / "images_tiny_file", Cat(2, tiny_images));
    Write(d / "images_tiny_gzip_file", Cat(2, Gzip(tiny_images)));
    Write(d / "labels_tiny_gzip_file", Cat(3, Gzip(tiny_labels)));
    Write(d / "images_28x28_gzip_file", Cat(2, Gzip(mnist_images)));
    Write(d / "images_tiny_gzipped_here", Cat(4, tiny_images));
    Write(d / "images_tiny_small_limit", Cat(2 | 16, tiny_images));
    Write(d / "pair_tiny", Cat(8, Pair(tiny_images, tiny_labels)));
    Write(d / "pair_tiny_gzipped_here", Cat(8 | 4, Pair(tiny_images, tiny_labels)));
    Write(d / "pair_28x28_gzip_files", Cat(8, Pair(Gzip(mnist_images), Gzip(mnist_labels))));
  }

  // CIFAR-10.
  {
    const fs::path d = out / "fuzz_cifar";
    Write(d / "one_record", Cat(0, Cifar(1, 3)));
    Write(d / "two_records", Cat(0, Cifar(2, 8)));
    Write(d / "one_record_appended", Cat(4, Cifar(1, 9)));
    Write(d / "one_record_file", Cat(1, Cifar(1, 0)));
    Write(d / "two_records_gzip_file", Cat(1, Gzip(Cifar(2, 5))));
    Write(d / "two_records_gzipped_here", Cat(2, Cifar(2, 1)));
  }

  // Text.
  {
    const fs::path d = out / "fuzz_text";
    const Bytes a = Str("It was the best of times, it was the worst of times.\n");
    const Bytes b = Str("First Citizen:\nBefore we proceed any further, hear me speak.\n");
    const Bytes bin = {'a', 0, 'b'};
    auto with = [&](uint8_t control, uint8_t fraction, const std::vector<Bytes>& files) {
      Bytes x = {control, fraction};
      Bytes t = Text(files);
      x.insert(x.end(), t.begin(), t.end());
      return x;
    };
    Write(d / "no_files", Bytes{0, 20});
    Write(d / "one_file_tenth", with(0, 20, {a}));
    Write(d / "two_files_half", with(0, 100, {a, b}));
    Write(d / "dir_with_binary", with(1, 20, {a, bin, Bytes{}, b}));
    Write(d / "binary_rejected", with(0, 20, {a, bin}));
    Write(d / "fraction_zero", with(0, 0, {a}));
    Write(d / "fraction_one", with(0, 200, {a}));
    Write(d / "fraction_odd", with(0, 203, {a}));
    Write(d / "load_file", with(2, 20, {a}));
    Write(d / "load_file_gzipped_here", with(2 | 4, 20, {b}));
    Write(d / "load_gzip_file", with(2, 20, {Gzip(a)}));
    Write(d / "load_empty_file", with(2, 20, {Bytes{}}));
  }

  std::printf("wrote %d corpus files\n", g_count);
  return 0;
}
