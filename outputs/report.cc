#include "outputs/report.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>
#include <tbb/parallel_for.h>

#include "base/clock.h"
#include "base/json_text.h"
#include "jobs/clip_totals.h"
#include "jobs/job.h"
#include "jobs/stage_names.h"
#include "media/kind.h"
#include "outputs/pictures.h"
#include "outputs/report_html.h"
#include "outputs/report_item.h"
#include "outputs/report_labels.h"
#include "outputs/report_overview.h"
#include "outputs/report_panels.h"

namespace framemill {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace report;  // the pages' parts: report_html, report_item, report_panels, report_overview

// One identity cluster's page: its representative and the members shown.
struct ClusterInfo {
  int64_t id = 0, size = 0;
  std::string representative;  // face crop (assets-relative)
  struct Member {
    std::string crop, item_page, item_name;
    int64_t frame = -1;
    double quality = -1;
  };
  std::vector<Member> members;
};

class ReportWriter {
 public:
  ReportWriter(JobStore& store, const ReportOptions& o) : store_(store), o_(o), pictures_(o.dir + "/assets", o.path_map) {}

  Result<ReportStats> Write() {
    now_ = o_.now_ms > 0 ? o_.now_ms : SystemClock()->NowMs();
    std::error_code ec;
    fs::create_directories(o_.dir + "/assets", ec);
    if (ec) return Status::InvalidArgument("-o: cannot make " + o_.dir + ": " + ec.message());
    FM_RETURN_IF_ERROR(WritePage(o_.dir + "/assets/style.css", kStyle, &stats_.total_bytes));
    FM_RETURN_IF_ERROR(LoadClusters());
    FM_RETURN_IF_ERROR(LoadDuplicates());
    auto count = store_.ItemCount();
    if (!count.ok()) return count.status();
    shown_ = o_.limit > 0 ? std::min(*count, o_.limit) : *count;
    pages_ = std::max<int64_t>(1, (shown_ + o_.page_size - 1) / o_.page_size);
    FM_RETURN_IF_ERROR(store_.ForEachItem([&](const ItemView& item) { return OnItem(item); }));
    FM_RETURN_IF_ERROR(ShowBatch());
    FM_RETURN_IF_ERROR(FlushGrid(true));
    FM_RETURN_IF_ERROR(WriteClusters());
    FM_RETURN_IF_ERROR(WriteFailures());
    FM_RETURN_IF_ERROR(WriteDuplicates());
    FM_RETURN_IF_ERROR(WritePage(o_.dir + "/labels.html", labels_.Html(shown_, now_), &stats_.total_bytes));
    FM_RETURN_IF_ERROR(WriteIndex());
    RemoveStalePages(o_.dir + "/items", written_items_);
    RemoveStalePages(o_.dir + "/grid", written_grid_);
    RemoveStalePages(o_.dir + "/clusters", written_clusters_);
    stats_.pictures_made = pictures_.made();
    stats_.pictures_reused = pictures_.reused();
    return stats_;
  }

 private:
  const UnsafeOptions* Blur() const { return o_.blur_unsafe ? &o_.unsafe : nullptr; }

  // The dedup result: each group's representative and members, by item.
  Status LoadDuplicates() {
    return store_.ForEachResult(stage_names::kDedup, [&](const ExportRow& row) -> Status {
      json j = json::parse(row.result_json, nullptr, false);
      if (!j.is_object() || !j.value("groups", json()).is_array()) return Status::OK();
      for (const json& g : j["groups"]) {
        DupGroup d;
        d.representative = g.value("representative", json::object()).value("item", std::string());
        for (const json& m : g.value("members", json::array()))
          d.members.push_back({m.value("item", std::string()), NumberOr(m, "similarity", 0), m.value("signal", std::string())});
        const size_t index = dup_groups_.size();
        dup_of_[d.representative] = index;
        for (const auto& m : d.members) dup_of_[m.item] = index;
        dup_groups_.push_back(std::move(d));
      }
      return Status::OK();
    });
  }

  // One picture of a duplicate group: its thumbnail, linked to its page when it has one.
  std::string DupPicture(const std::string& item, const std::string& caption) const {
    auto page = page_of_.find(item);
    auto thumb = thumb_of_.find(item);
    std::string img = thumb == thumb_of_.end() ? "<div class=\"none\">no picture</div>"
                                               : "<img loading=\"lazy\" src=\"" + thumb->second + "\" alt=\"\">";
    std::string body = "<div class=\"pic\" style=\"aspect-ratio:4/3\">" + img + "</div><div class=\"meta small\">" +
                       Esc(BaseName(item)) + "<br><span class=\"muted\">" + caption + "</span></div>";
    return page == page_of_.end() ? "<div class=\"card\">" + body + "</div>"
                                  : "<a class=\"card\" href=\"items/" + page->second + "\">" + body + "</a>";
  }

  // On a card: " · copy" for a group's member, " · N copies" for its representative.
  std::string DupNote(const ItemView& item) const {
    auto it = dup_of_.find(item.source);
    if (it == dup_of_.end()) return "";
    const DupGroup& g = dup_groups_[it->second];
    return g.representative == item.source ? " · " + std::to_string(g.members.size()) + " copies" : " · copy";
  }

  // On an item page: its group, the others linked.
  std::string DuplicatesPanel(const ItemView& item) const {
    auto it = dup_of_.find(item.source);
    if (it == dup_of_.end()) return "";
    const DupGroup& g = dup_groups_[it->second];
    // The group's pictures, each linked to its page, are on the duplicates page (written
    // last, when every page is known).
    const std::string group = std::to_string(it->second);
    std::string s = "<div class=\"panel\"><b>Duplicates</b> <a class=\"small\" href=\"../duplicates.html#g" + group +
                    "\">group " + group + "</a><div class=\"small\">";
    auto link = [&](const std::string& other) { return Esc(BaseName(other)); };
    if (g.representative == item.source) {
      s += "the representative of " + std::to_string(g.members.size()) + " cop(ies):";
      for (const auto& m : g.members) s += " " + link(m.item);
    } else {
      s += "a copy of " + link(g.representative) + " (left out by export --unique)";
    }
    return s + "</div></div>";
  }

  Status WriteDuplicates() {
    std::ostringstream p;
    size_t copies = 0;
    for (const DupGroup& g : dup_groups_) copies += g.members.size();
    p << Header("Duplicates", "", now_) << "<h1>Near-duplicates</h1><div class=\"muted\">" << dup_groups_.size()
      << " group(s), " << copies << " cop(ies) that <code>export --unique</code> leaves out; the representative"
      << " (the largest, then the largest file, then the sharpest) first.</div>";
    if (dup_groups_.empty()) p << "<div class=\"muted\">No groups: the dedup stage has no result, or found no copies.</div>";
    for (size_t i = 0; i < dup_groups_.size() && i < kDupGroupsShown; ++i) {
      const DupGroup& g = dup_groups_[i];
      p << "<h2 id=\"g" << i << "\">Group " << i << "</h2><div class=\"grid\">" << DupPicture(g.representative, "representative");
      for (const auto& m : g.members)
        p << DupPicture(m.item, Esc(m.signal) + ", similarity " + Num(m.similarity, 2));
      p << "</div>";
    }
    p << kFooter;
    return WritePage(o_.dir + "/duplicates.html", p.str(), &stats_.total_bytes);
  }

  // The face_clusters result: who is in which cluster, largest first.
  Status LoadClusters() {
    Status read = store_.ForEachResult(stage_names::kFaceClusters, [&](const ExportRow& row) -> Status {
      json j = json::parse(row.result_json, nullptr, false);
      if (!j.is_object() || !j.value("clusters", json()).is_array()) return Status::OK();
      for (const json& c : j["clusters"]) {
        ClusterInfo info;
        info.id = c.value("id", int64_t{0});
        info.size = c.value("size", int64_t{0});
        int64_t wanted = 0;
        auto want = [&](const json& m, bool rep) {
          if (!m.is_object() || !m.value("item", json()).is_string()) return;
          const ClusterKey key{m["item"].get<std::string>(), m.value("frame", int64_t{-1}), m.value("face", 0)};
          cluster_of_[key] = info.id;
          if (rep || wanted++ < o_.max_faces_per_cluster) crop_wanted_[key] = true;
          if (rep) representative_[key] = info.id;
        };
        want(c.value("representative", json()), true);
        for (const json& m : c.value("members", json::array())) want(m, false);
        clusters_.push_back(std::move(info));
      }
      noise_ = j.value("noise", json::array()).size();
      int64_t shown = 0;
      for (const json& m : j.value("noise", json::array())) {
        if (!m.is_object() || !m.value("item", json()).is_string()) continue;
        const ClusterKey key{m["item"].get<std::string>(), m.value("frame", int64_t{-1}), m.value("face", 0)};
        noise_of_.insert(key);
        if (shown++ < kNoiseShown) crop_wanted_[key] = true;
      }
      return Status::OK();
    });
    FM_RETURN_IF_ERROR(read);
    std::stable_sort(clusters_.begin(), clusters_.end(), [](const auto& a, const auto& b) { return a.size > b.size; });
    for (size_t i = 0; i < clusters_.size(); ++i) cluster_index_[clusters_[i].id] = i;
    return Status::OK();
  }

  Status OnItem(const ItemView& item) {
    for (const JobView& j : item.jobs) Tally(item, j);
    if (item.kind == MediaKind::kDataset) return Status::OK();
    ++stats_.items;
    if (shown_done_ >= shown_) return Status::OK();
    ++shown_done_;
    batch_.push_back(item);
    return batch_.size() == kBatch ? ShowBatch() : Status::OK();
  }

  static bool MediaOk(const ItemView& item) {
    return !item.content_hash.empty() && (!item.is_url || !item.fetched_path.empty());
  }

  PictureRequest Request(const ItemView& item, const Analyses& a) const {
    PictureRequest req;
    req.frame = a.frame;
    req.still_sides = {o_.thumb_side, o_.preview_side};
    for (const FaceRef& f : a.all_faces)
      if (item.kind == MediaKind::kImage || crop_wanted_.count({item.source, f.frame, f.index}))
        req.faces.push_back({f.frame, f.box});
    if (!a.mask.empty()) req.masks.push_back(a.mask);
    if (!a.inpainted.empty()) req.images.push_back(a.inpainted);
    if (auto c = a.results.find(stage_names::kClips); c != a.results.end())
      for (const json& clip : c->second.value("clips", json::array())) req.clip_frames.push_back(ClipMiddleFrame(clip));
    return req;
  }

  // Decoding and encoding pictures is most of a first report: a batch's are made on every
  // core, then its pages are written in item order.
  Status ShowBatch() {
    std::vector<Analyses> analyses;
    analyses.reserve(batch_.size());
    std::vector<PictureRequest> requests;
    for (const ItemView& item : batch_) {
      Analyses a = Analyse(item, cluster_of_);
      // The artifacts as this machine sees them, for the pictures and the pages alike.
      if (!a.mask.empty()) a.mask = o_.path_map.ToLocal(a.mask);
      if (!a.inpainted.empty()) a.inpainted = o_.path_map.ToLocal(a.inpainted);
      requests.push_back(Request(item, a));
      analyses.push_back(std::move(a));
    }
    std::vector<Status> made(batch_.size());
    tbb::parallel_for(size_t{0}, batch_.size(), [&](size_t i) {
      if (!MediaOk(batch_[i])) {
        made[i] = Status::NotFound("not fetched yet");
        return;
      }
      try {
        made[i] = pictures_.Make(batch_[i], requests[i]);
      } catch (const std::exception& e) {  // OpenCV throws on what it cannot handle
        made[i] = Status::Corruption(std::string("making its pictures: ") + e.what());
      }
    });
    for (size_t i = 0; i < batch_.size(); ++i) FM_RETURN_IF_ERROR(Show(batch_[i], analyses[i], made[i]));
    batch_.clear();
    return Status::OK();
  }

  // The item's page and its card on the grid.
  Status Show(const ItemView& item, const Analyses& a, const Status& made) {
    const bool media_ok = MediaOk(item);
    const bool have_still = media_ok && pictures_.Exists(ReportPictures::StillName(item, a.frame, o_.thumb_side));
    if (!made.ok() && media_ok) {  // a URL not fetched yet has no picture, and no problem
      ++stats_.problem_count;
      if (stats_.problems.size() < 20) stats_.problems.push_back(item.source + ": " + made.message());
    }
    const std::string page = std::to_string(item.id) + ".html";
    if (dup_of_.count(item.source)) {
      page_of_[item.source] = page;
      if (have_still) thumb_of_[item.source] = "assets/" + ReportPictures::StillName(item, a.frame, o_.thumb_side);
    }
    for (const FaceRef& f : a.all_faces) {
      const ClusterKey key{item.source, f.frame, f.index};
      auto c = cluster_index_.find(f.cluster);
      const bool noise = noise_of_.count(key) > 0;
      if ((c == cluster_index_.end() && !noise) || !crop_wanted_.count(key)) continue;
      const std::string crop = ReportPictures::FaceName(item, {f.frame, f.box});
      if (!pictures_.Exists(crop)) continue;
      const ClusterInfo::Member m{crop, page, BaseName(item.source), f.frame, f.quality};
      if (noise) {
        noise_members_.push_back(m);
        continue;
      }
      ClusterInfo& info = clusters_[c->second];
      if (representative_.count(key)) info.representative = crop;
      info.members.push_back(m);
    }
    FM_RETURN_IF_ERROR(WriteItemPage(item, a, have_still, made));
    if (auto c = a.results.find(stage_names::kCategorize); c != a.results.end())
      labels_.Add(c->second, BaseName(item.source), page,
                  have_still ? "assets/" + ReportPictures::StillName(item, a.frame, o_.thumb_side) : "",
                  Blurred(a, Blur()));
    grid_ += "<a class=\"card\" href=\"../items/" + page + "\">" +
             Picture(item, a, o_.thumb_side, "../", have_still, true, Blur()) + "<div class=\"meta\"><div class=\"name\" title=\"" +
             Esc(item.source) + "\">" + Esc(BaseName(item.source)) + "</div><div>" + Chips(item, true) +
             "</div><div class=\"small muted\">" + CardLine(item, a) + DupNote(item) + "</div></div></a>";
    if (++in_grid_ == o_.page_size) FM_RETURN_IF_ERROR(FlushGrid(false));
    return Status::OK();
  }

  void Tally(const ItemView& item, const JobView& j) {
    if (j.stage == stage_names::kClips && j.state == JobState::kDone) {
      const ClipTotals t = ClipTotalsOf(j.result_json);
      clips_.clips += t.clips;
      clips_.seconds += t.seconds;
    }
    auto& s = stage_[j.stage];
    s[static_cast<int>(j.state)]++;
    if (j.state == JobState::kDone || j.state == JobState::kFailed || j.state == JobState::kSkipped) {
      if (j.finished_at > 0) finished_.push_back(j.finished_at);
    }
    if (j.state == JobState::kFailed) {
      FailureExample& f = failures_[{j.stage, j.error_class.empty() ? "unknown" : j.error_class}];
      ++f.count;
      if (f.example_message.empty()) f.example_message = j.last_error;
      if (f.items.size() < 5 && item.kind != MediaKind::kDataset) f.items.push_back({BaseName(item.source), item.id});
      if (failed_jobs_.size() < 2000)
        failed_jobs_.push_back({item.kind == MediaKind::kDataset ? 0 : item.id, item.source, j.stage,
                                j.error_class, j.last_error, j.attempts, j.finished_at});
    }
  }

  // The inpainted image beside the original it was made from.
  std::string InpaintFigure(const ItemView& item, const Analyses& a, bool have_still) const {
    const std::string name = ReportPictures::ArtifactName(a.inpainted, kArtifactSide, false);
    if (a.inpainted.empty() || name.empty() || !have_still) return "";
    const json& r = a.results.at(stage_names::kInpaint);
    auto figure = [](const std::string& src, const std::string& caption) {
      return "<figure style=\"margin:0;flex:1\"><img style=\"width:100%\" src=\"../assets/" + src + "\" alt=\"" +
             caption + "\"><figcaption class=\"small muted\">" + caption + "</figcaption></figure>";
    };
    return "<h2>Inpainted</h2><div style=\"display:flex;gap:10px\">" +
           figure(ReportPictures::StillName(item, a.frame, o_.preview_side), "original") +
           figure(name, Esc(r.value("method", std::string())) + ", hole " +
                            Num(100 * NumberOr(r, "mask_coverage", 0), 1) + "%") + "</div>";
  }

  // The item's face crops, each linked to its identity cluster.
  std::string FacesPanel(const ItemView& item, const Analyses& a) const {
    if (a.all_faces.empty()) return "";
    std::string s = "<div class=\"panel\"><b>Faces</b> <span class=\"small muted\">" +
                    std::to_string(a.all_faces.size()) + "</span><div class=\"faces\">";
    int shown = 0;
    for (const FaceRef& f : a.all_faces) {
      const std::string crop = ReportPictures::FaceName(item, {f.frame, f.box});
      if (!pictures_.Exists(crop) || ++shown > 60) continue;
      const std::string img = "<img src=\"../assets/" + crop + "\" alt=\"face\" style=\"border-color:" + ClusterColour(f.cluster) + "\">";
      if (f.cluster >= 0)
        s += "<a href=\"../clusters/" + std::to_string(f.cluster) + ".html\">" + img + "#" + std::to_string(f.cluster) + "</a>";
      else
        s += "<div>" + img + (f.frame >= 0 ? "f" + std::to_string(f.frame) : "unclustered") + "</div>";
    }
    return s + "</div></div>";
  }

  Status WriteItemPage(const ItemView& item, const Analyses& a, bool have_still, const Status& made) {
    std::ostringstream s;
    s << Header(BaseName(item.source), "../", now_) << "<h1>" << Esc(BaseName(item.source)) << "</h1>"
      << "<div class=\"muted small\">" << Esc(item.source) << " · " << MediaKindName(item.kind) << " · key "
      << Esc(item.content_hash) << "</div><div style=\"margin:8px 0\">" << Chips(item) << "</div>";
    if (!made.ok()) s << "<div class=\"banner\">Some pictures could not be made: " << Esc(made.message()) << "</div>";
    s << "<div class=\"two\"><div>" << Picture(item, a, o_.preview_side, "../", have_still, false, Blur());
    if (item.kind == MediaKind::kVideo) s << "<div class=\"small muted\">frame " << a.frame << "</div>";
    s << "<div class=\"legend small\"><span><i style=\"background:#fdb022\"></i>objects</span>"
      << "<span><i style=\"background:#32d583\"></i>pose</span><span><i style=\"background:#00a0c8\"></i>segment mask</span>"
      << "<span><i style=\"background:#e6194b\"></i>faces (colour: identity cluster)</span></div>"
      << InpaintFigure(item, a, have_still) << "</div><div>" << FacesPanel(item, a);
    s << DuplicatesPanel(item);
    if (auto it = a.results.find(stage_names::kCategorize); it != a.results.end()) s << ContentPanel(it->second);
    if (auto it = a.results.find(stage_names::kLighting); it != a.results.end()) s << LightingPanel(it->second);
    if (auto it = a.results.find(stage_names::kMotion); it != a.results.end()) s << MotionPanel(it->second, o_.path_map);
    if (auto it = a.results.find(stage_names::kAudioSync); it != a.results.end()) s << AudioSyncPanel(it->second, o_.path_map);
    s << ClipsPanel(a.results, [&](int64_t frame) {
      const std::string name = ReportPictures::StillName(item, frame, PictureRequest{}.clip_side);
      return pictures_.Exists(name) ? name : std::string();
    });
    s << StagesPanel(item) << "</div></div>" << kFooter;
    const std::string name = std::to_string(item.id) + ".html";
    written_items_.insert(name);
    ++stats_.item_pages;
    return WritePage(o_.dir + "/items/" + name, s.str(), &stats_.total_bytes);
  }

  Status FlushGrid(bool last) {
    if (in_grid_ == 0 && !(last && grid_page_ == 0)) return Status::OK();
    ++grid_page_;
    std::ostringstream s;
    s << Header("Items, page " + std::to_string(grid_page_), "../", now_) << "<h1>Items</h1><div class=\"muted\">"
      << Int(shown_) << " item(s)" << (shown_ < stats_.items || (o_.limit > 0 && shown_ == o_.limit) ? " shown (--limit)" : "")
      << ", page " << grid_page_ << " of " << pages_ << "</div>" << Pager(grid_page_, pages_) << "<div class=\"grid\">"
      << grid_ << "</div>" << Pager(grid_page_, pages_) << kFooter;
    const std::string name = std::to_string(grid_page_) + ".html";
    written_grid_.insert(name);
    grid_.clear();
    in_grid_ = 0;
    ++stats_.grid_pages;
    return WritePage(o_.dir + "/grid/" + name, s.str(), &stats_.total_bytes);
  }

  Status WriteClusters() {
    std::ostringstream idx;
    idx << Header("Identity clusters", "../", now_) << "<h1>Identity clusters</h1><div class=\"muted\">" << clusters_.size()
        << " cluster(s), largest first; " << noise_ << " face(s) matched no one (<a href=\"noise.html\">noise</a>)."
        << " Under each face its quality (size, sharpness, frontalness, verifier: 0 to 1); only faces of"
        << " good quality found an identity.</div><div class=\"grid\">";
    for (const ClusterInfo& c : clusters_) {
      std::string rep = c.representative.empty() && !c.members.empty() ? c.members.front().crop : c.representative;
      idx << "<a class=\"card\" href=\"" << c.id << ".html\"><div class=\"pic\" style=\"aspect-ratio:1/1\">"
          << (rep.empty() ? "<div class=\"none\">no face picture</div>" : "<img loading=\"lazy\" src=\"../assets/" + rep + "\" alt=\"cluster " + std::to_string(c.id) + "\">")
          << "</div><div class=\"meta\"><div class=\"name\"><span class=\"chip\" style=\"background:" << ClusterColour(c.id)
          << "\">#" << c.id << "</span> " << c.size << " face(s)</div></div></a>";
      std::ostringstream p;
      p << Header("Cluster " + std::to_string(c.id), "../", now_) << "<h1><span class=\"chip\" style=\"background:"
        << ClusterColour(c.id) << "\">#" << c.id << "</span> Identity cluster " << c.id << "</h1><div class=\"muted\">"
        << c.size << " face(s)" << (static_cast<int64_t>(c.members.size()) < c.size ? ", " + std::to_string(c.members.size()) + " shown" : "")
        << "</div><div class=\"faces\" style=\"margin-top:12px\">";
      for (const auto& m : c.members) p << MemberHtml(m, ClusterColour(c.id));
      p << "</div>" << kFooter;
      const std::string name = std::to_string(c.id) + ".html";
      written_clusters_.insert(name);
      FM_RETURN_IF_ERROR(WritePage(o_.dir + "/clusters/" + name, p.str(), &stats_.total_bytes));
    }
    if (clusters_.empty()) idx << "<div class=\"muted\">No clusters yet: the face_clusters stage has no result.</div>";
    idx << "</div>" << kFooter;
    FM_RETURN_IF_ERROR(WriteNoise());
    written_clusters_.insert("index.html");
    stats_.clusters = static_cast<int64_t>(clusters_.size());
    return WritePage(o_.dir + "/clusters/index.html", idx.str(), &stats_.total_bytes);
  }

  // One face on a cluster's page or the noise page: its crop, item, frame and quality.
  static std::string MemberHtml(const ClusterInfo::Member& m, const std::string& colour) {
    return "<a href=\"../items/" + m.item_page + "\"><img loading=\"lazy\" src=\"../assets/" + m.crop +
           "\" alt=\"face\" style=\"border-color:" + colour + "\">" + Esc(m.item_name) +
           (m.frame >= 0 ? " f" + std::to_string(m.frame) : "") +
           (m.quality >= 0 ? "<br><span class=\"small muted\">q " + Num(m.quality, 2) + "</span>" : "") + "</a>";
  }

  // The faces that matched no one, as their own page (the first kNoiseShown).
  Status WriteNoise() {
    std::ostringstream p;
    p << Header("Noise", "../", now_) << "<h1>Faces that matched no one</h1><div class=\"muted\">" << noise_
      << " face(s) in no identity: seen fewer than face_clusters.min_cluster_size times, too far from every"
      << " identity, or too poor to found one"
      << (static_cast<int64_t>(noise_members_.size()) < static_cast<int64_t>(noise_)
              ? "; " + std::to_string(noise_members_.size()) + " shown"
              : "")
      << ". <a href=\"index.html\">All clusters</a></div><div class=\"faces\" style=\"margin-top:12px\">";
    for (const auto& m : noise_members_) p << MemberHtml(m, "#888");
    p << "</div>" << kFooter;
    written_clusters_.insert("noise.html");
    return WritePage(o_.dir + "/clusters/noise.html", p.str(), &stats_.total_bytes);
  }

  Status WriteFailures() {
    auto history = store_.ErrorHistory(500);
    if (!history.ok()) return history.status();
    std::ostringstream s;
    int64_t failed = 0;
    for (const auto& [k, f] : failures_) failed += f.count;
    stats_.failures = failed;
    s << Header("Failures", "", now_) << "<h1>Failures</h1><div class=\"muted\">" << Int(failed)
      << " job(s) failed for good" << (failed > static_cast<int64_t>(failed_jobs_.size()) ? ", the first " + Int(static_cast<int64_t>(failed_jobs_.size())) + " listed" : "")
      << ". <code>framemill retry --failed [--stage S] [--class C]</code> puts them back.</div>"
      << "<h2>Failed jobs</h2><table><tr><th>item</th><th>stage</th><th>class</th><th class=\"n\">attempts</th><th>when</th><th>error</th></tr>";
    for (const auto& f : failed_jobs_) {
      const std::string name = Esc(BaseName(f.source));
      s << "<tr><td>" << (f.item_id > 0 && written_items_.count(std::to_string(f.item_id) + ".html")
                              ? "<a href=\"items/" + std::to_string(f.item_id) + ".html\">" + name + "</a>" : name)
        << "</td><td>" << Esc(f.stage) << "</td><td>" << Esc(f.error_class) << "</td><td class=\"n\">" << f.attempts
        << "</td><td class=\"small\">" << Time(f.finished_at) << "</td><td class=\"small\">" << Esc(f.message) << "</td></tr>";
    }
    if (failed_jobs_.empty()) s << "<tr><td colspan=\"6\" class=\"muted\">none</td></tr>";
    s << "</table><h2>Error history</h2><div class=\"muted small\">Every failed attempt, newest first (the last "
      << history->size() << "); a transient error was retried.</div><table><tr><th>when</th><th>item</th><th>stage</th>"
      << "<th class=\"n\">attempt</th><th>class</th><th>transient</th><th>job now</th><th>worker</th><th>message</th></tr>";
    for (const ErrorRecord& e : *history)
      s << "<tr><td class=\"small\">" << Time(e.at) << "</td><td>" << Esc(BaseName(e.source)) << "</td><td>" << Esc(e.stage)
        << "</td><td class=\"n\">" << e.attempt << "</td><td>" << Esc(e.error_class) << "</td><td>" << (e.transient ? "yes" : "no")
        << "</td><td><span class=\"chip " << StateName(e.job_state) << "\">" << StateName(e.job_state) << "</span></td><td class=\"small\">"
        << Esc(e.worker) << "</td><td class=\"small\">" << Esc(e.message) << "</td></tr>";
    if (history->empty()) s << "<tr><td colspan=\"9\" class=\"muted\">none</td></tr>";
    s << "</table>" << kFooter;
    return WritePage(o_.dir + "/failures.html", s.str(), &stats_.total_bytes);
  }

  Status WriteIndex() {
    auto runs = store_.Runs(30);
    if (!runs.ok()) return runs.status();
    int64_t totals[6] = {};
    for (const auto& [stage, c] : stage_)
      for (int k = 0; k < 6; ++k) totals[k] += c[k];
    const int64_t jobs = totals[0] + totals[1] + totals[2] + totals[3] + totals[4] + totals[5];
    const int64_t finished = totals[2] + totals[3] + totals[4];
    bool in_progress = totals[1] > 0;
    for (const RunRecord& r : *runs) in_progress |= r.finished_at == 0;
    std::ostringstream s;
    s << Header("Overview", "", now_) << "<h1>Overview</h1>";
    if (in_progress)
      s << "<div class=\"banner\"><b>A run is in progress</b>: " << Int(totals[1]) << " job(s) running, "
        << Int(totals[0] + totals[5]) << " waiting their turn. This report is a snapshot of " << Time(now_)
        << "; run <code>framemill report</code> again to refresh it.</div>";
    auto kpi = [&](const std::string& value, const std::string& label) {
      s << "<div class=\"kpi\"><div class=\"v\">" << value << "</div><div class=\"l\">" << label << "</div></div>";
    };
    s << "<div class=\"kpis\">";
    kpi(Int(stats_.items), "items");
    kpi(Int(jobs), "jobs");
    kpi((jobs ? Num(100.0 * finished / jobs, 1) : "0") + "%", "finished");
    kpi(Int(totals[3]), "<a href=\"failures.html\">failed</a>");
    kpi(std::to_string(clusters_.size()), "<a href=\"clusters/index.html\">identity clusters</a>");
    kpi(Int(shown_), "<a href=\"grid/1.html\">items to browse</a>");
    if (clips_.clips > 0) {
      kpi(Int(clips_.clips), "clips");
      kpi(Num(clips_.seconds / 3600, 2), "clip hours");
    }
    auto times = store_.RecentJobTimes(kJobTimesShown);
    if (!times.ok()) return times.status();
    s << "</div>" << StagesTable(stage_) << "<h2>Throughput</h2>" << ThroughputChart(finished_) << TimeTable(*times) << FailuresTable(failures_, written_items_)
      << RunsTable(*runs, now_) << kFooter;
    const std::string text = s.str();
    stats_.index_bytes = static_cast<int64_t>(text.size());
    return WritePage(o_.dir + "/index.html", text, &stats_.total_bytes);
  }

  struct FailedJob {
    int64_t item_id;
    std::string source, stage, error_class, message;
    int64_t attempts, finished_at;
  };

  JobStore& store_;
  const ReportOptions& o_;
  ReportPictures pictures_;
  ReportStats stats_;
  int64_t now_ = 0, shown_ = 0, shown_done_ = 0, pages_ = 1;
  std::map<ClusterKey, int64_t> cluster_of_, representative_;
  std::map<ClusterKey, bool> crop_wanted_;
  std::set<ClusterKey> noise_of_;
  std::vector<ClusterInfo::Member> noise_members_;
  static constexpr int64_t kNoiseShown = 500;  // noise faces with a crop on the noise page
  std::vector<ClusterInfo> clusters_;
  std::map<int64_t, size_t> cluster_index_;
  size_t noise_ = 0;
  StateCounts stage_;
  ClipTotals clips_;  // what the clips stage made, over every item
  std::vector<int64_t> finished_;
  FailureExamples failures_;
  std::vector<FailedJob> failed_jobs_;
  static constexpr size_t kBatch = 64;
  std::vector<ItemView> batch_;  // shown items whose pictures are made together
  std::string grid_;
  int64_t in_grid_ = 0, grid_page_ = 0;
  std::set<std::string> written_items_, written_grid_, written_clusters_;
  struct DupGroup {
    std::string representative;
    struct Member {
      std::string item;
      double similarity = 0;
      std::string signal;
    };
    std::vector<Member> members;
  };
  static constexpr size_t kDupGroupsShown = 500;
  std::vector<DupGroup> dup_groups_;
  std::map<std::string, size_t> dup_of_;                       // item -> its group
  std::map<std::string, std::string> page_of_, thumb_of_;      // grouped items' page and thumbnail
  LabelIndex labels_;                                          // labels.html
};

}  // namespace

Result<ReportStats> WriteReport(JobStore& store, const ReportOptions& options) {
  if (options.page_size < 1) return Status::InvalidArgument("page size must be at least 1");
  ReportWriter w(store, options);
  return w.Write();
}

}  // namespace framemill
