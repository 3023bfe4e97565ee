#include "outputs/report_labels.h"

#include <algorithm>
#include <sstream>

#include "outputs/report_html.h"

namespace framemill::report {

std::string LabelAnchor(const std::string& label) {
  std::string out = label;
  std::replace(out.begin(), out.end(), ' ', '-');
  return Esc(out);
}

void LabelIndex::Add(const nlohmann::json& categorize, const std::string& name, const std::string& page,
                     const std::string& thumb, bool blurred) {
  const auto categories = categorize.find("categories");
  if (categories == categorize.end() || !categories->is_array() || categories->empty()) return;
  ++with_labels_;
  for (const auto& c : *categories) {
    if (!c.is_object() || !c.contains("label") || !c["label"].is_string()) continue;
    Label& l = labels_[c["label"].get<std::string>()];
    ++l.items;
    l.best = std::max(l.best, NumberOr(c, "score", 0));
    if (l.examples.size() < kExamples) l.examples.push_back({name, page, thumb, blurred});
  }
}

std::string LabelIndex::Html(int64_t items, int64_t now_ms) const {
  std::vector<std::pair<std::string, const Label*>> order;
  for (const auto& [name, l] : labels_) order.emplace_back(name, &l);
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.second->items > b.second->items; });
  std::ostringstream p;
  p << Header("Labels", "", now_ms) << "<h1>Labels</h1><div class=\"muted\">" << labels_.size()
    << " label(s) categorize shows, on " << Int(with_labels_) << " of " << Int(items)
    << " item(s); the first " << kExamples << " items of each. <code>framemill export --label NAME</code> "
    << "takes an item set by label.</div>";
  if (order.empty()) p << "<div class=\"muted\">No labels: categorize has no results, or showed no object.</div>";
  p << "<table><tr><th>label</th><th>items</th><th>best score</th></tr>";
  for (const auto& [name, l] : order)
    p << "<tr><td><a href=\"#" << LabelAnchor(name) << "\">" << Esc(name) << "</a></td><td>" << Int(l->items)
      << "</td><td>" << Num(l->best, 2) << "</td></tr>";
  p << "</table>";
  for (const auto& [name, l] : order) {
    p << "<h2 id=\"" << LabelAnchor(name) << "\">" << Esc(name) << " <span class=\"muted small\">" << Int(l->items)
      << " item(s)</span></h2><div class=\"grid\">";
    for (const Example& e : l->examples) {
      const std::string img = e.thumb.empty() ? "<div class=\"none\">no picture</div>"
                                              : "<img loading=\"lazy\" src=\"" + e.thumb + "\" alt=\"\">";
      p << "<a class=\"card\" href=\"items/" << e.page << "\"><div class=\"pic" << (e.blurred ? " nsfw" : "")
        << "\" style=\"aspect-ratio:4/3\">" << img << "</div><div class=\"meta small\">" << Esc(e.name)
        << "</div></a>";
    }
    p << "</div>";
  }
  p << kFooter;
  return p.str();
}

}  // namespace framemill::report
