#include "stages/dedup_stage.h"

#include <map>
#include <string>
#include <utility>

#include <opencv2/imgproc.hpp>

#include "analysis/same_picture.h"
#include "cluster/near_duplicates.h"
#include "media/image.h"
#include "media/video.h"

namespace framemill {
namespace {

// One picture of the dataset: an image, or one sampled frame of a video.
struct Picture {
  std::string item;   // as export names it
  int64_t frame = -1;  // video frame number; -1 for an image
  std::string file;    // what categorize read
  cluster::PictureSignature signature;
};

// The pictures of one categorize result; `bad` counts signatures that could not be read,
// `unsigned_results` results written before categorize wrote signatures (rerun categorize on
// them to include them).
void ReadPictures(const ExportRow& row, std::vector<Picture>* out, int64_t* bad, int64_t* unsigned_results) {
  const auto j = nlohmann::json::parse(row.result_json, nullptr, false);
  if (j.is_discarded()) return void(++*bad);
  const size_t before = out->size();
  bool any = false;
  auto add = [&](const nlohmann::json& r, int64_t frame) {
    if (!r.contains("signature")) return;
    any = true;
    auto s = cluster::SignatureFromJson(r["signature"]);
    if (!s.ok()) return void(++*bad);
    out->push_back({row.source, frame, r["signature"].value("file", row.source), std::move(s).value()});
  };
  if (j.value("frames", nlohmann::json()).is_array()) {
    for (const auto& f : j["frames"]) add(f, f.value("frame", int64_t{0}));
  } else {
    add(j, -1);
  }
  if (!any && out->size() == before) ++*unsigned_results;
}

// The pixels of pictures, decoded once each, at most `side` px (what the check matches at).
class PixelCache {
 public:
  PixelCache(const DedupOptions& o) : o_(o) {}
  const cv::Mat& Get(const Picture& p) {
    const auto key = std::make_pair(p.file, p.frame);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
    if (cache_.size() > 4096) cache_.clear();  // bounded: the pairs come in neighbour order
    cv::Mat m;
    if (p.frame < 0) {
      auto img = DecodeImageFileScaled(p.file, ImageLimits{}, o_.confirm.max_side);
      if (img.ok()) m = img->image;
    } else {
      // categorize's sample of the video, every frame of it kept: its other frames are
      // likely asked for next.
      auto sample = SampleVideoFrames(p.file, o_.video_frames, o_.video_limits);
      if (sample.ok())
        for (size_t k = 0; k < sample->frames.size(); ++k) {
          cache_[{p.file, sample->indices[k]}] = sample->frames[k];
          if (sample->indices[k] == p.frame) m = sample->frames[k];
        }
    }
    return cache_[key] = m;
  }

 private:
  const DedupOptions& o_;
  std::map<std::pair<std::string, int64_t>, cv::Mat> cache_;
};

// A group's member items, each once, by the picture that tied it: one the signals joined
// (not a frame only its video's other frames joined), then the closest to the representative;
// the representative's own item is left out. Items in the order they first appear.
std::vector<const cluster::Link*> MemberItems(const cluster::DuplicateGroup& g, const std::vector<Picture>& pictures) {
  const std::string& representative = pictures[g.representative].item;
  std::vector<std::string> order;
  std::map<std::string, const cluster::Link*> best;
  auto better = [](const cluster::Link& a, const cluster::Link* b) {
    if (a.signal.empty() != b->signal.empty()) return !a.signal.empty();
    return a.similarity > b->similarity;
  };
  for (const cluster::Link& m : g.members) {
    const std::string& item = pictures[m.other].item;
    if (item == representative) continue;
    auto [it, added] = best.emplace(item, &m);
    if (added) order.push_back(item);
    else if (better(m, it->second)) it->second = &m;
  }
  std::vector<const cluster::Link*> out;
  for (const std::string& item : order) out.push_back(best[item]);
  return out;
}

nlohmann::json Ref(const Picture& p) {
  nlohmann::json j = {{"item", p.item}};
  if (p.frame >= 0) j["frame"] = p.frame;
  return j;
}

}  // namespace

DedupStage::DedupStage(DedupOptions options) : options_(std::move(options)) {
  spec_.name = kName;
  spec_.deps = {stage_names::kCategorize};
  spec_.dataset_level = true;
}

Outcome DedupStage::RunOne(const StageContext& ctx) const {
  if (ctx.results == nullptr) return Outcome::Failed(Status::Internal("dedup needs the store's results to read"));
  std::vector<Picture> pictures;
  int64_t unreadable = 0, unsigned_results = 0;
  Status s = ctx.results->ForEachResult(stage_names::kCategorize, [&](const ExportRow& r) {
    ReadPictures(r, &pictures, &unreadable, &unsigned_results);
    return ctx.stopped() ? Status::Aborted("stopping") : Status::OK();
  });
  if (!s.ok()) return Outcome::Failed(s);
  std::vector<cluster::PictureSignature> signatures;
  std::vector<int64_t> item_of;  // a video's frames are one item
  std::map<std::string, int64_t> item_ids;
  for (const Picture& p : pictures) {
    signatures.push_back(p.signature);
    item_of.push_back(item_ids.emplace(p.item, static_cast<int64_t>(item_ids.size())).first->second);
  }
  PixelCache pixels(options_);
  int64_t unreadable_pixels = 0;
  auto confirm = [&](size_t a, size_t b) {
    const cv::Mat& pa = pixels.Get(pictures[a]);
    const cv::Mat& pb = pixels.Get(pictures[b]);
    if (pa.empty() || pb.empty()) return ++unreadable_pixels, false;
    return SamePicture(pa, pb, options_.confirm).same;
  };
  cluster::GroupingStats stats;
  auto groups = cluster::GroupNearDuplicates(signatures, options_.grouping, confirm, &stats, item_of);
  if (!groups.ok()) return Outcome::Failed(groups.status());
  nlohmann::json out = nlohmann::json::array();
  int id = 0;
  for (const auto& g : *groups) {
    nlohmann::json members = nlohmann::json::array();
    for (const cluster::Link* m : MemberItems(g, pictures)) {
      nlohmann::json j = Ref(pictures[m->other]);
      j["similarity"] = Rounded(m->similarity, 4);
      j["signal"] = m->signal;
      members.push_back(std::move(j));
    }
    out.push_back({{"id", id++}, {"representative", Ref(pictures[g.representative])}, {"members", members}});
  }
  nlohmann::json r = {{"groups", out},
                      {"pictures", static_cast<int64_t>(pictures.size())},
                      {"neighbours", stats.neighbours},
                      {"pairs", {{"proposed_by_phash", stats.proposed_by_hash},
                                 {"proposed_by_embedding", stats.proposed_by_embedding},
                                 {"confirmed", stats.confirmed},
                                 {"refused", stats.refused}}},
                      {"unreadable_results", unreadable},
                      {"results_without_signature", unsigned_results},
                      {"unreadable_pictures", unreadable_pixels}};
  return Outcome::Done(std::move(r), "cpu");
}

std::vector<Outcome> DedupStage::RunBatch(const std::vector<ClaimedJob>& jobs, const StageContext& ctx) {
  std::vector<Outcome> out;
  for (size_t i = 0; i < jobs.size() && !ctx.stopped(); ++i) out.push_back(RunOne(ctx));
  return out;
}

}  // namespace framemill
