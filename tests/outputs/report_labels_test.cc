// The report's labels page (outputs/report_labels.h): every shown label with its item count,
// best score and first examples, the most frequent first; unsafe examples blurred.
#include "outputs/report_labels.h"

#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

namespace framemill::report {
namespace {

using nlohmann::json;

json Categories(std::vector<std::pair<std::string, double>> labels) {
  json c = json::array();
  for (const auto& [l, score] : labels) c.push_back({{"label", l}, {"score", score}, {"count", 1}});
  return {{"categories", c}};
}

TEST(LabelIndexTest, EveryLabelWithItsItemsMostFrequentFirst) {
  LabelIndex index;
  index.Add(Categories({{"dog", 0.7}, {"cat", 0.65}}), "a.jpg", "1.html", "assets/a.jpg", false);
  index.Add(Categories({{"dog", 0.9}}), "b.jpg", "2.html", "", false);
  index.Add(Categories({}), "c.jpg", "3.html", "assets/c.jpg", false);  // no shown label
  index.Add(json::object(), "d.jpg", "4.html", "assets/d.jpg", false);   // no categories at all
  index.Add(Categories({{"person", 0.95}}), "e.jpg", "5.html", "assets/e.jpg", true);
  const std::string html = index.Html(5, 0);
  EXPECT_NE(html.find("3 label(s) categorize shows, on 3 of 5 item(s)"), std::string::npos) << html;
  const size_t dog = html.find("<h2 id=\"dog\">"), cat = html.find("<h2 id=\"cat\">");
  ASSERT_NE(dog, std::string::npos);
  ASSERT_NE(cat, std::string::npos);
  EXPECT_LT(dog, cat) << "dog (2 items) before cat (1)";
  EXPECT_NE(html.find(">dog</a></td><td>2</td><td>0.90</td>"), std::string::npos) << "count and best score";
  EXPECT_NE(html.find("href=\"items/2.html\""), std::string::npos);
  EXPECT_NE(html.find("no picture"), std::string::npos) << "b.jpg has no thumbnail";
  EXPECT_NE(html.find("class=\"pic nsfw\""), std::string::npos) << "e.jpg is blurred as on the grid";
  EXPECT_EQ(html.find("c.jpg"), std::string::npos);
}

TEST(LabelIndexTest, ALabelOfTwoWordsHasAnAnchorWithoutASpace) {
  LabelIndex index;
  index.Add(Categories({{"sports ball", 0.8}}), "a.jpg", "1.html", "", false);
  const std::string html = index.Html(1, 0);
  EXPECT_EQ(LabelAnchor("sports ball"), "sports-ball");
  EXPECT_NE(html.find("<a href=\"#sports-ball\">sports ball</a>"), std::string::npos) << html;
  EXPECT_NE(html.find("<h2 id=\"sports-ball\">sports ball "), std::string::npos) << html;
}

TEST(LabelIndexTest, ALabelShowsItsFirstExamplesOnlyAndNoLabelsSaysSo) {
  LabelIndex index;
  for (int i = 0; i < 40; ++i)
    index.Add(Categories({{"cup", 0.8}}), std::to_string(i) + ".jpg", std::to_string(i) + ".html", "", false);
  const std::string html = index.Html(40, 0);
  size_t cards = 0;
  for (size_t at = html.find("class=\"card\""); at != std::string::npos; at = html.find("class=\"card\"", at + 1)) ++cards;
  EXPECT_EQ(cards, LabelIndex::kExamples);
  EXPECT_NE(html.find("<td>40</td>"), std::string::npos);
  EXPECT_NE(LabelIndex().Html(3, 0).find("No labels"), std::string::npos);
}

}  // namespace
}  // namespace framemill::report
