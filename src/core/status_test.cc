#include "adacomp/status.h"

#include <gtest/gtest.h>

namespace adacomp {
namespace {

TEST(StatusTest, OkIsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.message(), "");
  EXPECT_EQ(s.ToString(), "OK");
  EXPECT_TRUE(Status::OK().WithContext("x").ok());
}

TEST(StatusTest, ErrorCarriesCodeAndMessage) {
  Status s = Status::Corruption("byte 4: bad");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_EQ(s.message(), "byte 4: bad");
  EXPECT_EQ(s.ToString(), "Corruption: byte 4: bad");
  Status c = s.WithContext("frame 3");
  EXPECT_EQ(c.code(), StatusCode::kCorruption);
  EXPECT_EQ(c.message(), "frame 3: byte 4: bad");
  Status copy = c;
  EXPECT_EQ(copy.ToString(), c.ToString());
  Status assigned;
  assigned = copy;
  EXPECT_EQ(assigned.message(), c.message());
  Status moved = std::move(assigned);
  EXPECT_EQ(moved.code(), StatusCode::kCorruption);
  EXPECT_EQ(StatusCodeName(StatusCode::kOutOfRange), "OutOfRange");
  EXPECT_EQ(Status::IOError("x").code(), StatusCode::kIOError);
  EXPECT_TRUE(Status(StatusCode::kOk, "ignored").ok());
}

Status FailIfNegative(int v) {
  if (v < 0) return Status::InvalidArgument("negative");
  return Status::OK();
}
Result<int> Half(int v) {
  if (v % 2) return Status::InvalidArgument("odd");
  return v / 2;
}
Status UseMacros(int v, int* out) {
  ADACOMP_RETURN_IF_ERROR(FailIfNegative(v));
  ADACOMP_ASSIGN_OR_RETURN(int h, Half(v));
  *out = h;
  return Status::OK();
}

TEST(StatusTest, ResultAndMacros) {
  Result<int> r = Half(8);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 4);
  Result<int> bad = Half(3);
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "odd");
  int out = 0;
  EXPECT_TRUE(UseMacros(10, &out).ok());
  EXPECT_EQ(out, 5);
  EXPECT_EQ(UseMacros(-2, &out).message(), "negative");
  EXPECT_EQ(UseMacros(3, &out).message(), "odd");
  EXPECT_EQ(out, 5);
}

}  // namespace
}  // namespace adacomp
