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

// A download's hash is xxh3-128 in xxHash's canonical (big-endian) form, as the fetcher
// records it; a file is checked against whichever kind the store holds.
TEST(ContentHashTest, AFileMatchesTheHashOfEitherKindTheStoreHolds) {
  EXPECT_EQ(ContentHash128Hex(0x06b05ab6733a6185, 0x78af5f94892f3950), "06b05ab6733a618578af5f94892f3950");
  EXPECT_TRUE(ContentHashMatches("abc", "78af5f94892f3950"));
  EXPECT_TRUE(ContentHashMatches("abc", "06b05ab6733a618578af5f94892f3950"));
  EXPECT_FALSE(ContentHashMatches("abd", "78af5f94892f3950"));
  EXPECT_FALSE(ContentHashMatches("abd", "06b05ab6733a618578af5f94892f3950"));
  EXPECT_FALSE(ContentHashMatches("abc", "78af5f94"));
}

}  // namespace
}  // namespace framemill
