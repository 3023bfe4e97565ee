#include "base/path_map.h"

#include <gtest/gtest.h>

namespace framemill {
namespace {

TEST(PathMapTest, MapsTheLongestWholeComponentPrefixBothWays) {
  auto m = PathMap::Parse("/data=/mnt/nfs/data; /data/videos=/mnt/fast/videos/;");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->ToLocal("/data/a.jpg"), "/mnt/nfs/data/a.jpg");
  EXPECT_EQ(m->ToLocal("/data/videos/b.mp4"), "/mnt/fast/videos/b.mp4");
  EXPECT_EQ(m->ToLocal("/database/c.jpg"), "/database/c.jpg");  // not a component match
  EXPECT_EQ(m->ToLocal("/data"), "/mnt/nfs/data");
  EXPECT_EQ(m->ToLocal("http://host/data/a.jpg"), "http://host/data/a.jpg");
  EXPECT_EQ(m->ToCanonical("/mnt/nfs/data/a.jpg"), "/data/a.jpg");
  EXPECT_EQ(m->ToCanonical("/mnt/fast/videos/b.mp4"), "/data/videos/b.mp4");
  EXPECT_EQ(m->ToCanonical("/home/me/x.jpg"), "/home/me/x.jpg");
  for (const std::string p : {"/data/x/y.png", "/data/videos/z.avi", "/elsewhere/q"})
    EXPECT_EQ(m->ToCanonical(m->ToLocal(p)), p);
}

TEST(PathMapTest, EmptyIsTheIdentityAndBadRulesAreRefused) {
  auto empty = PathMap::Parse("");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
  EXPECT_EQ(empty->ToLocal("/data/a.jpg"), "/data/a.jpg");
  EXPECT_TRUE(PathMap::Parse("/data").status().IsInvalidArgument());
  EXPECT_TRUE(PathMap::Parse("data=/mnt/data").status().IsInvalidArgument());
  EXPECT_TRUE(PathMap::Parse("/data=").status().IsInvalidArgument());
}

}  // namespace
}  // namespace framemill
