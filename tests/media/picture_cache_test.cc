// The pictures of a worker's claim (media/picture_cache.h): each decoded once and shared by
// every stage that asks, decoded ahead on the cache's threads, kept within the budget, a
// bad file's failure kept as its reason, and nothing kept after Clear.
#include "media/picture_cache.h"

#include <gtest/gtest.h>

#include <fstream>

#include "base/time_split.h"
#include "tests/support/test_support.h"

namespace framemill {
namespace {

using testing::TempDir;

TEST(PictureCacheTest, APictureIsDecodedOnceForEveryStageThatReadsIt) {
  PictureCache cache({});
  const std::string messi = testing::SampleData("messi5.jpg");
  auto first = cache.Get(messi, ImageLimits{});
  auto second = cache.Get(messi, ImageLimits{});
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(first->data, second->data);  // the same pixels, not a second decode
  auto direct = DecodeImageFile(messi, ImageLimits{});
  ASSERT_TRUE(direct.ok());
  EXPECT_EQ(cv::norm(*first, *direct, cv::NORM_INF), 0);
  EXPECT_EQ(cache.stats().decoded, 1);
  EXPECT_EQ(cache.stats().reused, 1);
  EXPECT_EQ(cache.held_bytes(), static_cast<int64_t>(direct->total() * 3));
}

TEST(PictureCacheTest, PicturesAreDecodedAheadOnTheCachesThreads) {
  PictureCacheOptions o;
  o.threads = 2;
  PictureCache cache(o);
  const std::vector<std::string> names = {"messi5.jpg", "baboon.jpg", "fruits.jpg", "home.jpg"};
  for (const auto& n : names) cache.Prefetch(testing::SampleData(n));
  ASSERT_TRUE(testing::WaitUntil([&] { return cache.stats().decoded == 4; }, 60));
  // Every Get is served by the decode made ahead: this thread decodes nothing.
  const TimeTally before = ThreadTimeTally();
  for (const auto& n : names) ASSERT_TRUE(cache.Get(testing::SampleData(n), ImageLimits{}).ok());
  EXPECT_EQ(cache.stats().decoded, 4);
  EXPECT_EQ(cache.stats().reused, 4);
  EXPECT_LT((ThreadTimeTally() - before).decode_us, 5'000);
}

TEST(PictureCacheTest, APictureOverTheBudgetIsDecodedForItsCallerAndNotKept) {
  PictureCacheOptions o;
  o.budget_mb = 1;  // baboon.jpg is 512x512x3: 0.75 MiB; fruits.jpg nearly as large
  PictureCache cache(o);
  ASSERT_TRUE(cache.Get(testing::SampleData("fruits.jpg"), ImageLimits{}).ok());
  ASSERT_TRUE(cache.Get(testing::SampleData("baboon.jpg"), ImageLimits{}).ok());
  EXPECT_EQ(cache.stats().not_kept, 1);
  EXPECT_LE(cache.held_bytes(), 1 << 20);
  ASSERT_TRUE(cache.Get(testing::SampleData("baboon.jpg"), ImageLimits{}).ok());
  EXPECT_EQ(cache.stats().decoded, 3);  // the one not kept is decoded again
}

TEST(PictureCacheTest, ABadFileFailsEveryStageWithTheSameReasonAndIsReadOnce) {
  TempDir dir;
  const std::string bad = dir / "text.jpg";
  std::ofstream(bad) << "not a picture at all";
  PictureCacheOptions o;
  o.threads = 1;
  PictureCache cache(o);
  cache.Prefetch(bad);
  auto a = cache.Get(bad, ImageLimits{});
  auto b = cache.Get(bad, ImageLimits{});
  ASSERT_FALSE(a.ok());
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(a.status().ToString(), b.status().ToString());
  EXPECT_EQ(cache.stats().decoded, 1);
}

TEST(PictureCacheTest, OtherLimitsBypassTheCacheAndClearForgetsEverything) {
  PictureCache cache({});
  const std::string messi = testing::SampleData("messi5.jpg");
  ImageLimits tiny;
  tiny.max_pixels = 1000;
  auto refused = cache.Get(messi, tiny);  // a stage with its own limits: decoded its own way
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(refused.status().code() == Status::Code::kTooLarge) << refused.status().ToString();
  ASSERT_TRUE(cache.Get(messi, ImageLimits{}).ok());
  EXPECT_GT(cache.held_bytes(), 0);
  cache.Clear();
  EXPECT_EQ(cache.held_bytes(), 0);
  ASSERT_TRUE(cache.Get(messi, ImageLimits{}).ok());
  EXPECT_EQ(cache.stats().decoded, 2);
}

}  // namespace
}  // namespace framemill
