#include "media/content_hash.h"

#include <gtest/gtest.h>

namespace framemill {
namespace {

// xxh3-64 as xxHash publishes it, printed as the store keeps it: 16 digits, zero-padded.
TEST(ContentHashTest, IsXxh3SixtyFourInSixteenLowerCaseHexDigits) {
  EXPECT_EQ(ContentHashOf(""), "2d06800538d394c2");
  EXPECT_EQ(ContentHashOf("abc"), "78af5f94892f3950");
  EXPECT_EQ(ContentHashHex(1), "0000000000000001");
}

}  // namespace
}  // namespace framemill
