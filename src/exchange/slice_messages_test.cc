// The owner's message of the reduce-scatter read back: statistics and
// slices round-trip, a failure message carries its status, and malformed
// messages are refused with the slice at fault named and nothing written.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "adacomp/slices.h"
#include "core/test_util.h"

namespace adacomp {
namespace {

struct Owner {
  std::vector<uint8_t> message;
  std::vector<std::vector<float>> values;  // per slice
};

Owner MakeOwner() {
  Owner o;
  o.values = {testing::GradientLike(40, 1), std::vector<float>(300, 0.0f)};
  o.values[1][7] = 0.5f;  // a sparse slice beside a dense one
  StartSlicesMessage(&o.message);
  PutSliceStats({1234, 56}, &o.message);
  PutSliceStats({0, 0}, &o.message);
  for (uint32_t id : {3u, 9u}) {
    EXPECT_TRUE(EncodeSummedSlice(id, o.values[id == 3 ? 0 : 1], &o.message).ok());
  }
  return o;
}

TEST(ReadSlicesMessage, RoundTripsTheStatisticsAndTheSlices) {
  const Owner o = MakeOwner();
  std::vector<float> a(40, -1.0f), b(300, -1.0f);
  const MessageTensor slices[2] = {{3, a}, {9, b}};
  SliceStats stats[2];
  ASSERT_TRUE(ReadSlicesMessage(o.message, slices, stats, true).ok());
  EXPECT_EQ(stats[0].bytes, 1234u);
  EXPECT_EQ(stats[0].selected, 56u);
  EXPECT_EQ(stats[1].bytes, 0u);
  EXPECT_EQ(std::memcmp(a.data(), o.values[0].data(), 40 * 4), 0);
  EXPECT_EQ(std::memcmp(b.data(), o.values[1].data(), 300 * 4), 0);
  // decode = false reads the statistics only.
  std::vector<float> c(40, -1.0f), d(300, -1.0f);
  const MessageTensor untouched[2] = {{3, c}, {9, d}};
  ASSERT_TRUE(ReadSlicesMessage(o.message, untouched, stats, false).ok());
  EXPECT_EQ(c[0], -1.0f);
}

TEST(ReadSlicesMessage, AFailureMessageCarriesItsStatus) {
  std::vector<uint8_t> m;
  SlicesFailedMessage(Status::OutOfRange("overflow in slice 2"), &m);
  const Status st = ReadSlicesMessage(m, {}, {}, true);
  EXPECT_EQ(st.code(), StatusCode::kOutOfRange);
  EXPECT_NE(st.message().find("overflow in slice 2"), std::string::npos);
  m[1] = 0;  // "failed" with OK
  EXPECT_EQ(ReadSlicesMessage(m, {}, {}, true).code(), StatusCode::kCorruption);
}

TEST(ReadSlicesMessage, MalformedMessagesNameTheSliceAndWriteNothing) {
  const Owner o = MakeOwner();
  auto expect_refused = [&](std::vector<uint8_t> m, size_t want_bad, const char* what) {
    std::vector<float> a(40, -1.0f), b(300, -1.0f);
    const MessageTensor slices[2] = {{3, a}, {9, b}};
    SliceStats stats[2];
    size_t bad = 99;
    const Status st = ReadSlicesMessage(m, slices, stats, true, &bad);
    EXPECT_FALSE(st.ok()) << what;
    EXPECT_EQ(bad, want_bad) << what << ": " << st.ToString();
    for (float v : a) ASSERT_EQ(v, -1.0f) << what;
    for (float v : b) ASSERT_EQ(v, -1.0f) << what;
  };
  expect_refused({}, 2, "empty");
  expect_refused({7}, 2, "unknown kind");
  expect_refused({0, 0x80}, 0, "truncated statistics");
  std::vector<uint8_t> m = o.message;
  m.back() ^= 1;  // the second slice's frame (its checksum)
  expect_refused(m, 1, "a flipped byte in the second slice");
  m = o.message;
  m.push_back(0);
  expect_refused(m, 2, "a byte after the last slice");
  m = o.message;
  m.resize(m.size() - 5);
  expect_refused(m, 1, "the second slice truncated");
  // No slices: only the kind byte may be there.
  EXPECT_TRUE(ReadSlicesMessage(std::vector<uint8_t>{0}, {}, {}, true).ok());
  EXPECT_FALSE(ReadSlicesMessage(std::vector<uint8_t>{0, 0}, {}, {}, true).ok());
}

}  // namespace
}  // namespace adacomp
