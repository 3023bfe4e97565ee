// The report's labels page (labels.html): every label categorize shows, with how many items
// show it, its best score and its first examples as thumbnails linked to their pages, the most
// frequent label first, so a curator browses the collection by what it shows (and then takes
// the subset with `export --label`). Fed item by item as the report writes its pages.
// Not thread-safe; the report's one writer feeds it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace framemill::report {

// A label's section on the page: its name with '-' for ' ' ("sports-ball"), since an HTML id
// holds no space.
std::string LabelAnchor(const std::string& label);

class LabelIndex {
 public:
  static constexpr size_t kExamples = 12;  // thumbnails per label

  // One item: its categorize result (`categories`: the shown labels), its name, its page
  // (under items/), its thumbnail (under the report's root; "" when it has none) and whether
  // the grid blurs it (unsafe).
  void Add(const nlohmann::json& categorize, const std::string& name, const std::string& page,
           const std::string& thumb, bool blurred);

  // The page, whole; `items` is how many items the report shows (the labels are theirs).
  std::string Html(int64_t items, int64_t now_ms) const;

 private:
  struct Example {
    std::string name, page, thumb;
    bool blurred = false;
  };
  struct Label {
    int64_t items = 0;
    double best = 0;
    std::vector<Example> examples;
  };
  std::map<std::string, Label> labels_;
  int64_t with_labels_ = 0;
};

}  // namespace framemill::report
