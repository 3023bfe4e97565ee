#include "outputs/report_item.h"

#include <algorithm>
#include <sstream>

#include "jobs/stage_names.h"
#include "media/kind.h"
#include "outputs/pictures.h"
#include "outputs/report_html.h"

namespace framemill::report {
namespace {

void ReadDims(const json& r, double* w, double* h) {
  if (*w > 0) return;
  const json& m = r.contains("media") ? r["media"] : r;
  const double mw = NumberOr(m, "width", 0), mh = NumberOr(m, "height", 0);
  if (mw > 0 && mh > 0) {
    *w = mw;
    *h = mh;
  }
}

std::array<float, 4> Box(const json& b) {
  std::array<float, 4> out{};
  if (b.is_array() && b.size() == 4)
    for (int k = 0; k < 4; ++k) out[k] = b[k].is_number() ? b[k].get<float>() : 0.f;
  return out;
}

}  // namespace

Analyses Analyse(const ItemView& item, const std::map<ClusterKey, int64_t>& clusters) {
  Analyses a;
  for (const JobView& j : item.jobs) {
    if (j.state != JobState::kDone) continue;
    json r = json::parse(j.result_json, nullptr, false);
    if (r.is_discarded() || !r.is_object()) continue;
    ReadDims(r, &a.width, &a.height);
    a.results[j.stage] = std::move(r);
  }
  json info = json::parse(item.media_info, nullptr, false);
  if (info.is_object()) ReadDims(info, &a.width, &a.height);
  const bool video = item.kind == MediaKind::kVideo;
  auto frame_list = [&](const char* stage) -> const json* {
    auto it = a.results.find(stage);
    if (it == a.results.end() || !it->second.contains("frames") || !it->second["frames"].is_array() ||
        it->second["frames"].empty() || !it->second["frames"][0].is_object())
      return nullptr;
    return &it->second["frames"];
  };
  if (video) {
    a.frame = 0;
    for (const char* s : {stage_names::kFaces, stage_names::kSegment, stage_names::kCategorize})
      if (const json* f = frame_list(s)) {
        a.frame = static_cast<int64_t>(NumberOr((*f)[0], "frame", 0));
        break;
      }
  }
  auto add_faces = [&](const json& faces, int64_t frame) {
    if (!faces.is_array()) return;
    for (size_t i = 0; i < faces.size(); ++i) {
      if (!faces[i].is_object() || !faces[i].contains("box")) continue;
      FaceRef f{frame, static_cast<int>(i), Box(faces[i]["box"]), -1, NumberOr(faces[i], "quality", -1)};
      auto c = clusters.find({item.source, frame, static_cast<int>(i)});
      if (c != clusters.end()) f.cluster = c->second;
      a.all_faces.push_back(f);
      if (!video || frame == a.frame) a.faces.push_back(f);
    }
  };
  if (auto it = a.results.find(stage_names::kFaces); it != a.results.end()) {
    if (video) {
      if (const json* frames = frame_list(stage_names::kFaces))
        for (const json& f : *frames) add_faces(f.value("faces", json()), static_cast<int64_t>(NumberOr(f, "frame", -1)));
    } else {
      add_faces(it->second.value("faces", json()), -1);
    }
  }
  if (auto it = a.results.find(stage_names::kSegment); it != a.results.end()) {
    if (!video && it->second.value("mask", json()).is_string() && NumberOr(it->second, "coverage", 0) > 0)
      a.mask = it->second["mask"].get<std::string>();
    if (const json* frames = video ? frame_list(stage_names::kSegment) : nullptr)
      for (const json& f : *frames)
        if (static_cast<int64_t>(NumberOr(f, "frame", -2)) == a.frame && f.value("mask", json()).is_string())
          a.mask = f["mask"].get<std::string>();
  }
  if (auto it = a.results.find(stage_names::kInpaint); it != a.results.end() && it->second.value("image", json()).is_string())
    a.inpainted = it->second["image"].get<std::string>();
  return a;
}

namespace {

// The COCO-17 skeleton.
constexpr int kBones[][2] = {{0, 1}, {0, 2}, {1, 3}, {2, 4}, {5, 6}, {5, 7}, {7, 9}, {6, 8},
                             {8, 10}, {5, 11}, {6, 12}, {11, 12}, {11, 13}, {13, 15}, {12, 14}, {14, 16}};

// An SVG drawn over a still, in its source pixels; sizes in 1% of its longest side.
class Overlay {
 public:
  Overlay(double width, double height) : unit_(std::max(width, height) / 100.0) {
    s_ << "<svg viewBox=\"0 0 " << Num(width, 0) << ' ' << Num(height, 0)
       << "\" preserveAspectRatio=\"none\" xmlns=\"http://www.w3.org/2000/svg\">";
  }
  void Label(double x, double y, const std::string& text, const std::string& colour) {
    s_ << "<text x=\"" << Num(x) << "\" y=\"" << Num(std::max(y - unit_ * 0.6, unit_ * 2.6))
       << "\" font-size=\"" << Num(unit_ * 2.6) << "\" fill=\"" << colour
       << "\" stroke=\"#000\" stroke-width=\"" << Num(unit_ * 0.25)
       << "\" paint-order=\"stroke\" font-family=\"sans-serif\">" << Esc(text) << "</text>";
  }
  void Rect(float x1, float y1, float x2, float y2, const std::string& colour, double width) {
    s_ << "<rect x=\"" << Num(x1) << "\" y=\"" << Num(y1) << "\" width=\"" << Num(x2 - x1)
       << "\" height=\"" << Num(y2 - y1) << "\" fill=\"none\" stroke=\"" << colour
       << "\" stroke-width=\"" << Num(width) << "\"/>";
  }
  // Keypoints (x, y, score), COCO-17; bones and points scoring under 0.3 are left out.
  void Skeleton(const std::vector<std::array<double, 3>>& k) {
    for (const auto& bone : kBones) {
      if (bone[0] >= static_cast<int>(k.size()) || bone[1] >= static_cast<int>(k.size())) continue;
      const auto& p = k[bone[0]];
      const auto& q = k[bone[1]];
      if (p[2] < 0.3 || q[2] < 0.3) continue;
      s_ << "<line x1=\"" << Num(p[0]) << "\" y1=\"" << Num(p[1]) << "\" x2=\"" << Num(q[0])
         << "\" y2=\"" << Num(q[1]) << "\" stroke=\"#32d583\" stroke-width=\"" << Num(unit_ * 0.6)
         << "\" stroke-linecap=\"round\"/>";
    }
    for (const auto& p : k)
      if (p[2] >= 0.3)
        s_ << "<circle cx=\"" << Num(p[0]) << "\" cy=\"" << Num(p[1]) << "\" r=\"" << Num(unit_ * 0.7)
           << "\" fill=\"#fff\" stroke=\"#039855\" stroke-width=\"" << Num(unit_ * 0.25) << "\"/>";
  }
  double unit() const { return unit_; }
  std::string Done() { return s_.str() + "</svg>"; }

 private:
  double unit_;
  std::ostringstream s_;
};

// Objects (categorize), at the still. Only the objects shown: those below
// categorize.min_score stay in the result. Labels only where they stay readable; the boxes always.
void DrawObjects(const ItemView& item, const Analyses& a, Overlay* o) {
  auto it = a.results.find(stage_names::kCategorize);
  if (it == a.results.end()) return;
  const json* objects = nullptr;
  if (item.kind == MediaKind::kVideo) {
    if (it->second.value("frames", json()).is_array())
      for (const json& f : it->second["frames"])
        if (static_cast<int64_t>(NumberOr(f, "frame", -2)) == a.frame && f.contains("objects")) objects = &f["objects"];
  } else if (it->second.contains("objects")) {
    objects = &it->second["objects"];
  }
  if (objects == nullptr || !objects->is_array()) return;
  for (const json& obj : *objects) {
    if (obj.value("below_threshold", false)) continue;
    const auto b = Box(obj.value("box", json()));
    o->Rect(b[0], b[1], b[2], b[3], "#fdb022", o->unit() * 0.5);
    if (objects->size() <= 8)
      o->Label(b[0], b[1], obj.value("label", std::string("?")) + " " + Num(NumberOr(obj, "score", 0), 2), "#fdb022");
  }
}

// Pose skeletons: a video's tracked people at the still, an image's people.
void DrawPoses(const ItemView& item, const Analyses& a, Overlay* o) {
  auto it = a.results.find(stage_names::kPose);
  if (it == a.results.end()) return;
  if (item.kind == MediaKind::kVideo) {
    if (!it->second.value("tracks", json()).is_array()) return;
    for (const json& t : it->second["tracks"])
      for (const json& f : t.value("frames", json::array()))
        if (static_cast<int64_t>(NumberOr(f, "frame", -2)) == a.frame) {
          std::vector<std::array<double, 3>> k;
          for (const json& p : f.value("keypoints", json::array()))
            if (p.is_array() && p.size() == 3) k.push_back({p[0].get<double>(), p[1].get<double>(), p[2].get<double>()});
          o->Skeleton(k);
        }
  } else if (it->second.value("people", json()).is_array()) {
    for (const json& person : it->second["people"]) {
      std::vector<std::array<double, 3>> k;
      for (const json& p : person.value("keypoints", json::array()))
        k.push_back({NumberOr(p, "x", 0), NumberOr(p, "y", 0), NumberOr(p, "score", 0)});
      o->Skeleton(k);
    }
  }
}

}  // namespace

std::string OverlaySvg(const ItemView& item, const Analyses& a) {
  if (a.width <= 0 || a.height <= 0) return "";
  Overlay o(a.width, a.height);
  DrawObjects(item, a, &o);
  DrawPoses(item, a, &o);
  // Faces, coloured by identity cluster.
  for (const FaceRef& f : a.faces) {
    const std::string colour = ClusterColour(f.cluster);
    o.Rect(f.box[0], f.box[1], f.box[2], f.box[3], colour, o.unit() * 0.7);
    if (a.faces.size() <= 8) o.Label(f.box[0], f.box[1], f.cluster >= 0 ? "#" + std::to_string(f.cluster) : "face", colour);
  }
  return o.Done();
}

std::string Chips(const ItemView& item, bool compact) {
  std::string out;
  int done = 0, skipped = 0;
  for (const JobView& j : item.jobs) {
    if (compact && (j.state == JobState::kDone || j.state == JobState::kSkipped)) {
      (j.state == JobState::kDone ? done : skipped)++;
      continue;
    }
    out += std::string("<span class=\"chip ") + StateName(j.state) + "\" title=\"" + Esc(j.stage) +
           ": " + StateName(j.state) + "\">" + Esc(j.stage) + "</span>";
  }
  if (!compact) return out;
  std::string counts = "<span class=\"small muted\">" + std::to_string(done) + " done";
  if (skipped) counts += " · " + std::to_string(skipped) + " skipped";
  return counts + "</span> " + out;
}

namespace {
std::string Aspect(const Analyses& a) {
  if (a.width <= 0 || a.height <= 0) return "aspect-ratio:4/3";
  return "aspect-ratio:" + Num(a.width, 0) + "/" + Num(a.height, 0);
}

}  // namespace

bool Blurred(const Analyses& a, const UnsafeOptions* unsafe) {
  auto categorize = a.results.find(stage_names::kCategorize);
  return unsafe != nullptr && categorize != a.results.end() &&
         IsUnsafe(UnsafeScore(categorize->second), *unsafe);
}

std::string Picture(const ItemView& item, const Analyses& a, int side, const std::string& prefix,
                    bool have_still, bool lazy, const UnsafeOptions* unsafe) {
  const bool blur = Blurred(a, unsafe);
  std::string out = std::string("<div class=\"pic") + (blur ? " nsfw" : "") + "\" style=\"" + Aspect(a) + "\">";
  if (have_still) {
    out += "<img " + std::string(lazy ? "loading=\"lazy\" " : "") + "src=\"" + prefix + "assets/" +
           ReportPictures::StillName(item, a.frame, side) + "\" alt=\"" + Esc(BaseName(item.source)) + "\">";
    if (!a.mask.empty()) {
      const std::string mask = ReportPictures::ArtifactName(a.mask, kArtifactSide, true);
      if (!mask.empty())
        out += "<img " + std::string(lazy ? "loading=\"lazy\" " : "") + "src=\"" + prefix + "assets/" + mask +
               "\" alt=\"segment mask\">";
    }
    out += OverlaySvg(item, a);
  } else {
    out += "<div class=\"none\">no picture</div>";
  }
  return out + "</div>";
}

std::string CardLine(const ItemView& item, const Analyses& a) {
  std::vector<std::string> bits;
  if (auto it = a.results.find(stage_names::kCategorize); it != a.results.end()) {
    if (it->second.value("content", json::object()).value("type", std::string()) == "drawing") bits.push_back("drawing");
    // The shown labels, best first: three, then how many more.
    const json& c = it->second.value("categories", json::array());
    std::string labels;
    for (size_t i = 0; c.is_array() && i < c.size() && i < 3; ++i)
      if (c[i].is_object()) labels += (labels.empty() ? "" : ", ") + Esc(c[i].value("label", std::string()));
    if (c.is_array() && c.size() > 3) labels += " +" + std::to_string(c.size() - 3);
    if (!labels.empty()) bits.push_back(labels);
  }
  if (!a.all_faces.empty()) bits.push_back(std::to_string(a.faces.size()) + " face(s)");
  if (auto it = a.results.find(stage_names::kLighting); it != a.results.end())
    bits.push_back(Num(NumberOr(it->second, "color_temperature_k", 0), 0) + " K");
  if (auto it = a.results.find(stage_names::kMotion); it != a.results.end())
    bits.push_back(Esc(it->second.value("camera", json::object()).value("label", std::string())));
  if (auto it = a.results.find(stage_names::kAudioSync); it != a.results.end())
    bits.push_back("AV " + Num(NumberOr(it->second, "offset_ms", 0), 0) + " ms");
  std::string out;
  for (const auto& b : bits) out += (out.empty() ? "" : " · ") + b;
  return out.empty() ? std::string(MediaKindName(item.kind)) : out;
}

}  // namespace framemill::report
