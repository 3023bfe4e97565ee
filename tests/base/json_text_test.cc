#include "base/json_text.h"

#include <gtest/gtest.h>

namespace framemill {
namespace {

TEST(JsonText, ValidUtf8) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("plain.jpg"));
  EXPECT_TRUE(IsValidUtf8("caf\xc3\xa9.jpg"));          // é
  EXPECT_TRUE(IsValidUtf8("\xf0\x9f\x98\x80"));         // U+1F600
  EXPECT_FALSE(IsValidUtf8("caf\xe9.jpg"));             // Latin-1 é
  EXPECT_FALSE(IsValidUtf8("\xc0\xaf"));                // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));            // a UTF-16 surrogate
  EXPECT_FALSE(IsValidUtf8("\xf4\x90\x80\x80"));        // past U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xe2\x82"));                // cut short
}

TEST(JsonText, DumpReplacesInsteadOfThrowing) {
  nlohmann::json j;
  j["item"] = std::string("caf\xe9.jpg");
  EXPECT_THROW((void)j.dump(), nlohmann::json::type_error);
  EXPECT_EQ(JsonDump(j), "{\"item\":\"caf\xef\xbf\xbd.jpg\"}");
}

TEST(JsonText, BytesFieldKeepsTheExactBytes) {
  nlohmann::json j;
  SetBytesField(j, "item", "/d/caf\xe9.jpg");
  EXPECT_EQ(j["item_hex"], "2f642f636166e92e6a7067");
  nlohmann::json k;
  SetBytesField(k, "item", "/d/cafe.jpg");
  EXPECT_FALSE(k.contains("item_hex"));
  EXPECT_EQ(HexBytes(std::string_view("\x00\xff", 2)), "00ff");
}

}  // namespace
}  // namespace framemill
