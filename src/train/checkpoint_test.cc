#include "checkpoint.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "test_files.h"

namespace adacomp::train {
namespace {

using testing::TempDir;

std::vector<uint8_t> Image() {
  CheckpointBuilder b;
  b.AddString("name", "hello");
  b.AddU64("step", 42);
  std::vector<uint8_t> blob(1000);
  for (size_t i = 0; i < blob.size(); ++i) blob[i] = static_cast<uint8_t>(i * 13);
  b.Add("blob", blob);
  b.Add("empty", {});
  return b.Serialize();
}

TEST(Checkpoint, RoundTrip) {
  auto image = Image();
  auto view = CheckpointView::Parse(image, "mem");
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  EXPECT_EQ(*view->GetString("name"), "hello");
  EXPECT_EQ(*view->GetU64("step"), 42u);
  auto blob = view->Get("blob");
  ASSERT_TRUE(blob.ok());
  ASSERT_EQ(blob->size(), 1000u);
  EXPECT_EQ((*blob)[999], static_cast<uint8_t>(999 * 13));
  EXPECT_TRUE(view->Get("empty")->empty());
  EXPECT_FALSE(view->Get("nope").ok());
  EXPECT_FALSE(view->GetU64("name").ok());
}

TEST(Checkpoint, EveryTruncationIsDetected) {
  auto image = Image();
  for (size_t len = 0; len < image.size(); len += 7) {
    auto view = CheckpointView::Parse(std::span<const uint8_t>(image).first(len), "f.ckpt");
    ASSERT_FALSE(view.ok()) << len;
    EXPECT_EQ(view.status().code(), StatusCode::kCorruption);
    EXPECT_NE(view.status().message().find("f.ckpt"), std::string::npos);
  }
}

TEST(Checkpoint, EveryFlippedByteIsDetected) {
  auto image = Image();
  for (size_t i = 0; i < image.size(); ++i) {
    auto bad = image;
    bad[i] ^= 0x40;
    auto view = CheckpointView::Parse(bad, "f.ckpt");
    ASSERT_FALSE(view.ok()) << "byte " << i;
  }
  auto bad = image;
  bad[100] ^= 1;
  auto view = CheckpointView::Parse(bad, "f.ckpt");
  EXPECT_NE(view.status().message().find("checksum mismatch"), std::string::npos);
}

// Found by fuzz_checkpoint (fuzz/regressions/fuzz_checkpoint/
// duplicate_record_name): a second record of the same name used to replace
// the first silently; the file is now rejected.
TEST(Checkpoint, RepeatedRecordNameIsRejected) {
  CheckpointBuilder b;
  b.AddU64("steps_done", 1);
  b.AddString("fingerprint", "x");
  b.AddU64("steps_done", 2);
  auto view = CheckpointView::Parse(b.Serialize(), "dup.ckpt");
  ASSERT_FALSE(view.ok());
  EXPECT_EQ(view.status().code(), StatusCode::kCorruption);
  EXPECT_NE(view.status().message().find("dup.ckpt"), std::string::npos);
  EXPECT_NE(view.status().message().find("'steps_done' appears twice"), std::string::npos)
      << view.status().ToString();
}

TEST(Checkpoint, AtomicWriteKeepsTheNewestTwo) {
  TempDir dir("ckpt");
  std::string sub = dir.Path("a/b");
  auto image = Image();
  for (int64_t step : {10, 20, 30}) ASSERT_TRUE(SaveCheckpointFile(sub, step, image, 2).ok());
  auto list = ListCheckpoints(sub);
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].first, 30);
  EXPECT_EQ(list[1].first, 20);
  EXPECT_EQ(list[0].second, CheckpointPath(sub, 30));
  for (const auto& e : std::filesystem::directory_iterator(sub)) {
    EXPECT_EQ(e.path().extension(), ".ckpt") << "a temporary file was left: " << e.path();
  }
  auto bytes = ReadWholeFile(list[0].second);
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(*bytes, image);
}

TEST(Checkpoint, WriteFailureIsReported) {
  auto st = WriteFileAtomic("/nonexistent-dir-adacomp/x.ckpt", Image());
  EXPECT_EQ(st.code(), StatusCode::kIOError);
  EXPECT_NE(st.message().find("/nonexistent-dir-adacomp/x.ckpt"), std::string::npos);
}

}  // namespace
}  // namespace adacomp::train
