#include "outputs/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>
#include <tbb/parallel_for.h>

#include "base/atomic_file.h"
#include "base/clock.h"
#include "base/json_text.h"
#include "jobs/job.h"
#include "jobs/stage_names.h"
#include "media/kind.h"
#include "outputs/pictures.h"

namespace framemill {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// ------------------------------------------------------------------ text

std::string Valid(const std::string& s) {
  if (IsValidUtf8(s)) return s;
  return json::parse(JsonDump(json(s))).get<std::string>();
}

std::string Esc(const std::string& raw) {
  std::string out;
  for (char c : Valid(raw)) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string Num(double v, int decimals = 1) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", decimals, v);
  return b;
}

std::string Int(int64_t v) {
  std::string s = std::to_string(v < 0 ? -v : v), out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i > 0 && (s.size() - i) % 3 == 0) out += ',';
    out += s[i];
  }
  return (v < 0 ? "-" : "") + out;
}

std::string Time(int64_t ms) {
  if (ms <= 0) return "-";
  const std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char b[32];
  std::strftime(b, sizeof b, "%Y-%m-%d %H:%M:%S", &tm);
  return std::string(b) + " UTC";
}

std::string Duration(int64_t ms) {
  if (ms < 0) return "-";
  const int64_t s = ms / 1000;
  if (s < 120) return Num(ms / 1000.0, 1) + " s";
  if (s < 7200) return std::to_string(s / 60) + " min " + std::to_string(s % 60) + " s";
  return std::to_string(s / 3600) + " h " + std::to_string(s / 60 % 60) + " min";
}

std::string BaseName(const std::string& source) {
  std::string s = source;
  while (!s.empty() && s.back() == '/') s.pop_back();
  const size_t slash = s.rfind('/');
  return slash == std::string::npos ? s : s.substr(slash + 1);
}

double NumberOr(const json& j, const char* key, double fallback) {
  if (!j.is_object()) return fallback;
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : fallback;
}

// ------------------------------------------------------------------ files

// A page, whole or absent (base/atomic_file.h); its size is added to *bytes.
Status WritePage(const std::string& path, const std::string& text, int64_t* bytes) {
  FM_RETURN_IF_ERROR(WriteFileAtomically(path, text));
  if (bytes) *bytes += static_cast<int64_t>(text.size());
  return Status::OK();
}

// Pages of an earlier, larger report: named like ours (digits.html) but not written now.
void RemoveStalePages(const std::string& dir, const std::set<std::string>& written) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (e.path().extension() != ".html" || written.count(name)) continue;
    const std::string stem = e.path().stem().string();
    const bool ours = !stem.empty() && std::all_of(stem.begin(), stem.end(), [](char c) {
      return (c >= '0' && c <= '9') || c == '-' || (c >= 'a' && c <= 'z');
    });
    if (ours) fs::remove(e.path(), ec);
  }
}

constexpr const char* kStyle = R"css(
:root { --fg:#1d2330; --muted:#667085; --line:#e4e7ec; --bg:#f7f8fa; --card:#fff;
  --done:#12b76a; --failed:#f04438; --skipped:#98a2b3; --pending:#f79009; --running:#2e90fa; --waiting:#b692f6; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color:var(--fg); background:var(--bg); }
header { background:#101828; color:#fff; padding:10px 24px; display:flex; gap:24px; align-items:center; flex-wrap:wrap; }
header b { font-size:16px; } header a { color:#d0d5dd; text-decoration:none; } header a:hover { color:#fff; }
header .when { margin-left:auto; color:#98a2b3; font-size:12px; }
main { padding:20px 24px; max-width:1500px; margin:0 auto; }
h1 { font-size:22px; margin:4px 0 12px; } h2 { font-size:17px; margin:26px 0 10px; }
a { color:#1570ef; }
.muted { color:var(--muted); } .small { font-size:12px; }
.banner { background:#eff8ff; border:1px solid #b2ddff; padding:8px 12px; border-radius:6px; margin-bottom:14px; }
.kpis { display:flex; gap:12px; flex-wrap:wrap; }
.kpi { background:var(--card); border:1px solid var(--line); border-radius:8px; padding:10px 16px; min-width:130px; }
.kpi .v { font-size:22px; font-weight:600; } .kpi .l { color:var(--muted); font-size:12px; }
table { border-collapse:collapse; background:var(--card); border:1px solid var(--line); width:100%; }
th, td { text-align:left; padding:6px 10px; border-bottom:1px solid var(--line); vertical-align:top; }
th { background:#f2f4f7; font-weight:600; font-size:12px; } td.n, th.n { text-align:right; font-variant-numeric:tabular-nums; }
.bar { display:flex; height:10px; border-radius:5px; overflow:hidden; background:#eaecf0; min-width:160px; }
.bar span { display:block; height:100%; }
.done { background:var(--done); } .failed { background:var(--failed); } .skipped { background:var(--skipped); }
.pending { background:var(--pending); } .running { background:var(--running); } .waiting { background:var(--waiting); }
.chip { display:inline-block; font-size:11px; padding:1px 6px; border-radius:9px; color:#fff; margin:1px 2px 1px 0; }
.grid { display:grid; grid-template-columns:repeat(auto-fill, minmax(230px, 1fr)); gap:14px; }
.card { background:var(--card); border:1px solid var(--line); border-radius:8px; overflow:hidden; color:inherit; text-decoration:none; display:block; }
.card:hover { box-shadow:0 2px 8px rgba(16,24,40,.12); }
.card .meta { padding:6px 8px; } .card .name { font-weight:600; overflow:hidden; text-overflow:ellipsis; white-space:nowrap; }
.pic { position:relative; width:100%; background:#eaecf0; }
.pic > img, .pic > svg { position:absolute; left:0; top:0; width:100%; height:100%; }
.pic > img { object-fit:contain; }
.pic.nsfw > img, .pic.nsfw > svg { filter:blur(18px); } .pic.nsfw::after { content:"NSFW: blurred"; position:absolute; left:6px; bottom:6px; font-size:11px; background:#101828; color:#fff; padding:1px 6px; border-radius:9px; }
.pic .none { position:absolute; inset:0; display:flex; align-items:center; justify-content:center; color:var(--muted); font-size:12px; padding:8px; text-align:center; }
.pager { margin:16px 0; display:flex; gap:6px; flex-wrap:wrap; } .pager a, .pager span { padding:3px 9px; border:1px solid var(--line); border-radius:5px; background:#fff; text-decoration:none; }
.pager span.cur { background:#101828; color:#fff; }
.two { display:grid; grid-template-columns:minmax(0, 3fr) minmax(280px, 2fr); gap:20px; }
.panel { background:var(--card); border:1px solid var(--line); border-radius:8px; padding:12px 14px; margin-bottom:14px; }
.faces { display:flex; flex-wrap:wrap; gap:8px; } .faces a, .faces div { display:block; text-align:center; font-size:11px; color:var(--muted); }
.faces img { width:96px; height:96px; object-fit:cover; border-radius:6px; border:3px solid #ccc; display:block; }
pre { background:#f2f4f7; padding:8px; overflow:auto; max-height:420px; font-size:12px; border-radius:6px; }
details { margin:6px 0; } summary { cursor:pointer; }
.legend span { margin-right:12px; font-size:12px; } .legend i { display:inline-block; width:10px; height:10px; border-radius:2px; margin-right:4px; vertical-align:middle; }
svg.chart { background:#fff; border:1px solid var(--line); border-radius:8px; width:100%; height:auto; }
@media (max-width: 900px) { .two { grid-template-columns:1fr; } }
)css";

// ------------------------------------------------------------------ one item's analyses

constexpr const char* kStates[] = {"pending", "running", "done", "failed", "skipped", "waiting"};

const char* StateName(JobState s) { return kStates[static_cast<int>(s)]; }

// Colours that stay apart on photos; a cluster keeps its colour on every page.
std::string ClusterColour(int64_t id) {
  static const char* kPalette[] = {"#e6194b", "#3cb44b", "#4363d8", "#f58231", "#911eb4", "#42d4f4",
                                   "#f032e6", "#bfef45", "#fabed4", "#469990", "#dcbeff", "#9a6324",
                                   "#fffac8", "#800000", "#aaffc3", "#808000", "#ffd8b1", "#000075"};
  if (id < 0) return "#98a2b3";
  return kPalette[id % (sizeof kPalette / sizeof *kPalette)];
}

// The COCO-17 skeleton.
constexpr int kBones[][2] = {{0, 1}, {0, 2}, {1, 3}, {2, 4}, {5, 6}, {5, 7}, {7, 9}, {6, 8},
                             {8, 10}, {5, 11}, {6, 12}, {11, 12}, {11, 13}, {13, 15}, {12, 14}, {14, 16}};

struct FaceRef {
  int64_t frame = -1;
  int index = 0;
  std::array<float, 4> box{};
  int64_t cluster = -1;  // -1: noise or not clustered
  double quality = -1;   // the faces stage's `quality`; -1 when the result has none
};

// What the report knows of one item from its results.
struct Analyses {
  std::map<std::string, json> results;  // done stages
  double width = 0, height = 0;         // source pixels
  int64_t frame = -1;                   // video: the still's frame
  std::vector<FaceRef> faces;           // at the still (video) or all (image)
  std::vector<FaceRef> all_faces;       // every face with a box
  std::string mask;                     // segment mask at the still
  std::string inpainted;
};

using ClusterKey = std::tuple<std::string, int64_t, int>;  // item, frame, face

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

// The analyses drawn over the still, in source pixel coordinates.
std::string OverlaySvg(const ItemView& item, const Analyses& a) {
  if (a.width <= 0 || a.height <= 0) return "";
  const double unit = std::max(a.width, a.height) / 100.0;  // 1% of the longest side
  std::ostringstream s;
  s << "<svg viewBox=\"0 0 " << Num(a.width, 0) << ' ' << Num(a.height, 0)
    << "\" preserveAspectRatio=\"none\" xmlns=\"http://www.w3.org/2000/svg\">";
  auto label = [&](double x, double y, const std::string& text, const std::string& colour) {
    s << "<text x=\"" << Num(x) << "\" y=\"" << Num(std::max(y - unit * 0.6, unit * 2.6))
      << "\" font-size=\"" << Num(unit * 2.6) << "\" fill=\"" << colour
      << "\" stroke=\"#000\" stroke-width=\"" << Num(unit * 0.25)
      << "\" paint-order=\"stroke\" font-family=\"sans-serif\">" << Esc(text) << "</text>";
  };
  auto rect = [&](float x1, float y1, float x2, float y2, const std::string& colour, double width) {
    s << "<rect x=\"" << Num(x1) << "\" y=\"" << Num(y1) << "\" width=\"" << Num(x2 - x1)
      << "\" height=\"" << Num(y2 - y1) << "\" fill=\"none\" stroke=\"" << colour
      << "\" stroke-width=\"" << Num(width) << "\"/>";
  };
  // Objects (categorize), at the still.
  if (auto it = a.results.find(stage_names::kCategorize); it != a.results.end()) {
    const json* objects = nullptr;
    if (item.kind == MediaKind::kVideo) {
      if (it->second.value("frames", json()).is_array())
        for (const json& f : it->second["frames"])
          if (static_cast<int64_t>(NumberOr(f, "frame", -2)) == a.frame && f.contains("objects")) objects = &f["objects"];
    } else if (it->second.contains("objects")) {
      objects = &it->second["objects"];
    }
    // Labels only where they stay readable; the boxes always.
    // Only the objects shown: those below categorize.min_score stay in the result.
    if (objects != nullptr && objects->is_array())
      for (const json& o : *objects) {
        if (o.value("below_threshold", false)) continue;
        const auto b = Box(o.value("box", json()));
        rect(b[0], b[1], b[2], b[3], "#fdb022", unit * 0.5);
        if (objects->size() <= 8)
          label(b[0], b[1], o.value("label", std::string("?")) + " " + Num(NumberOr(o, "score", 0), 2), "#fdb022");
      }
  }
  // Pose skeletons.
  auto skeleton = [&](const std::vector<std::array<double, 3>>& k) {
    for (const auto& bone : kBones) {
      if (bone[0] >= static_cast<int>(k.size()) || bone[1] >= static_cast<int>(k.size())) continue;
      const auto& p = k[bone[0]];
      const auto& q = k[bone[1]];
      if (p[2] < 0.3 || q[2] < 0.3) continue;
      s << "<line x1=\"" << Num(p[0]) << "\" y1=\"" << Num(p[1]) << "\" x2=\"" << Num(q[0])
        << "\" y2=\"" << Num(q[1]) << "\" stroke=\"#32d583\" stroke-width=\"" << Num(unit * 0.6)
        << "\" stroke-linecap=\"round\"/>";
    }
    for (const auto& p : k)
      if (p[2] >= 0.3)
        s << "<circle cx=\"" << Num(p[0]) << "\" cy=\"" << Num(p[1]) << "\" r=\"" << Num(unit * 0.7)
          << "\" fill=\"#fff\" stroke=\"#039855\" stroke-width=\"" << Num(unit * 0.25) << "\"/>";
  };
  if (auto it = a.results.find(stage_names::kPose); it != a.results.end()) {
    if (item.kind == MediaKind::kVideo) {
      if (it->second.value("tracks", json()).is_array())
        for (const json& t : it->second["tracks"])
          for (const json& f : t.value("frames", json::array()))
            if (static_cast<int64_t>(NumberOr(f, "frame", -2)) == a.frame) {
              std::vector<std::array<double, 3>> k;
              for (const json& p : f.value("keypoints", json::array()))
                if (p.is_array() && p.size() == 3) k.push_back({p[0].get<double>(), p[1].get<double>(), p[2].get<double>()});
              skeleton(k);
            }
    } else if (it->second.value("people", json()).is_array()) {
      for (const json& person : it->second["people"]) {
        std::vector<std::array<double, 3>> k;
        for (const json& p : person.value("keypoints", json::array()))
          k.push_back({NumberOr(p, "x", 0), NumberOr(p, "y", 0), NumberOr(p, "score", 0)});
        skeleton(k);
      }
    }
  }
  // Faces, coloured by identity cluster.
  for (const FaceRef& f : a.faces) {
    const std::string colour = ClusterColour(f.cluster);
    rect(f.box[0], f.box[1], f.box[2], f.box[3], colour, unit * 0.7);
    if (a.faces.size() <= 8) label(f.box[0], f.box[1], f.cluster >= 0 ? "#" + std::to_string(f.cluster) : "face", colour);
  }
  s << "</svg>";
  return s.str();
}

// Every stage as a chip (the item page); `compact`: done and skipped counted, the rest
// (failed, running, waiting their turn) named (the grid's cards).
std::string Chips(const ItemView& item, bool compact = false) {
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

std::string Aspect(const Analyses& a) {
  if (a.width <= 0 || a.height <= 0) return "aspect-ratio:4/3";
  return "aspect-ratio:" + Num(a.width, 0) + "/" + Num(a.height, 0);
}

// The still with its overlays; `prefix` leads from the page to the report's root.
// categorize's unsafe score (0 when there is none).
double Unsafe(const Analyses& a) {
  auto it = a.results.find(stage_names::kCategorize);
  return it == a.results.end() ? 0.0 : NumberOr(it->second.value("nsfw", json::object()), "unsafe", 0);
}

std::string Picture(const ItemView& item, const Analyses& a, int side, const std::string& prefix,
                    bool have_still, bool lazy, double nsfw_blur) {
  const bool blur = Unsafe(a) >= nsfw_blur;
  std::string out = std::string("<div class=\"pic") + (blur ? " nsfw" : "") + "\" style=\"" + Aspect(a) + "\">";
  if (have_still) {
    out += "<img " + std::string(lazy ? "loading=\"lazy\" " : "") + "src=\"" + prefix + "assets/" +
           PictureCache::StillName(item, a.frame, side) + "\" alt=\"" + Esc(BaseName(item.source)) + "\">";
    if (!a.mask.empty()) {
      const std::string mask = PictureCache::ArtifactName(a.mask, kArtifactSide, true);
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

// ------------------------------------------------------------------ figures

// categorize's answers for curators: photo or drawing, the NSFW classes, and how many
// objects were kept below the shown threshold.
std::string ContentPanel(const json& r) {
  if (!r.contains("content") && !r.contains("objects")) return "";
  std::ostringstream s;
  s << "<div class=\"panel\"><b>Content</b><table class=\"small\" style=\"margin-top:6px\">";
  auto row = [&](const std::string& k, const std::string& v) { s << "<tr><td>" << k << "</td><td class=\"n\">" << v << "</td></tr>"; };
  if (r.contains("content"))
    row("type", Esc(r["content"].value("type", std::string())) + " (" + Num(NumberOr(r["content"], "p", 0), 2) + ")");
  if (r.contains("nsfw") && r["nsfw"].is_object()) {
    row("unsafe (porn + hentai)", Num(NumberOr(r["nsfw"], "unsafe", 0), 3));
    for (const char* k : {"neutral", "drawing", "sexy", "porn", "hentai"}) row(k, Num(NumberOr(r["nsfw"], k, 0), 3));
  }
  int shown = 0, below = 0;
  if (r.value("objects", json()).is_array())
    for (const json& o : r["objects"]) (o.value("below_threshold", false) ? below : shown)++;
  row("objects shown", std::to_string(shown) + (below > 0 ? " (" + std::to_string(below) + " more below the shown threshold)" : ""));
  s << "</table></div>";
  return s.str();
}

std::string LightingPanel(const json& r) {
  std::ostringstream s;
  const double deg = NumberOr(r.value("light_direction", json()), "degrees", 0);
  const double strength = NumberOr(r.value("light_direction", json()), "strength", 0);
  s << "<div class=\"panel\"><b>Lighting</b><table class=\"small\" style=\"margin-top:6px\">";
  auto row = [&](const std::string& k, const std::string& v) { s << "<tr><td>" << k << "</td><td class=\"n\">" << v << "</td></tr>"; };
  row("exposure", Num(NumberOr(r, "exposure_ev", 0), 2) + " EV");
  row("colour temperature", Num(NumberOr(r, "color_temperature_k", 0), 0) + " K");
  row("dynamic range", Num(NumberOr(r, "dynamic_range_stops", 0), 1) + " stops");
  row("contrast (RMS)", Num(NumberOr(r, "rms_contrast", 0), 3));
  row("clipped highlights / shadows", Num(100 * NumberOr(r, "clipped_highlights", 0), 1) + "% / " +
                                          Num(100 * NumberOr(r, "clipped_shadows", 0), 1) + "%");
  s << "</table>";
  // Light direction: an arrow from the centre, as long as the gradient is strong.
  const double len = 30 * std::min(1.0, strength * 3 + 0.15);
  const double rad = deg * M_PI / 180;
  s << "<svg width=\"90\" height=\"90\" viewBox=\"-40 -40 80 80\" role=\"img\" aria-label=\"light direction\">"
    << "<circle r=\"36\" fill=\"#f2f4f7\" stroke=\"#d0d5dd\"/><line x1=\"0\" y1=\"0\" x2=\"" << Num(len * std::cos(rad))
    << "\" y2=\"" << Num(len * std::sin(rad)) << "\" stroke=\"#f79009\" stroke-width=\"4\" stroke-linecap=\"round\"/>"
    << "<circle r=\"4\" fill=\"#f79009\"/></svg>";
  const json& p = r.value("luminance_percentiles", json::object());
  s << "<div class=\"small muted\">luminance p1/p50/p99: " << Num(NumberOr(p, "p1", 0), 2) << " / "
    << Num(NumberOr(p, "p50", 0), 2) << " / " << Num(NumberOr(p, "p99", 0), 2) << "</div></div>";
  return s.str();
}

// A line chart of a CSV column against its first column (the motion and audio series).
std::string SeriesChart(const std::string& csv_path, const std::vector<std::string>& columns,
                        const std::vector<int64_t>& marks, const std::string& title) {
  std::ifstream in(csv_path);
  std::string header;
  if (!in || !std::getline(in, header)) return "";
  std::vector<std::string> names;
  std::stringstream hs(header);
  for (std::string c; std::getline(hs, c, ',');) names.push_back(c);
  std::vector<int> idx;
  for (const auto& c : columns) {
    auto it = std::find(names.begin(), names.end(), c);
    idx.push_back(it == names.end() ? -1 : static_cast<int>(it - names.begin()));
  }
  std::vector<double> xs;
  std::vector<std::vector<double>> ys(columns.size());
  for (std::string line; std::getline(in, line) && xs.size() < 20000;) {
    std::vector<std::string> cells;
    std::stringstream ls(line);
    for (std::string c; std::getline(ls, c, ',');) cells.push_back(c);
    if (cells.empty()) continue;
    xs.push_back(std::atof(cells[0].c_str()));
    for (size_t k = 0; k < columns.size(); ++k)
      ys[k].push_back(idx[k] >= 0 && idx[k] < static_cast<int>(cells.size()) && !cells[idx[k]].empty()
                          ? std::atof(cells[idx[k]].c_str()) : NAN);
  }
  if (xs.size() < 2) return "";
  const double x0 = xs.front(), x1 = std::max(xs.back(), x0 + 1e-9);
  double lo = 0, hi = 0;
  for (const auto& y : ys)
    for (double v : y)
      if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
  if (hi - lo < 1e-9) hi = lo + 1;
  const double W = 640, H = 160, pad = 24;
  auto X = [&](double x) { return pad + (x - x0) / (x1 - x0) * (W - 2 * pad); };
  auto Y = [&](double y) { return H - pad - (y - lo) / (hi - lo) * (H - 2 * pad); };
  static const char* kColours[] = {"#2e90fa", "#f79009", "#12b76a", "#f04438"};
  std::ostringstream s;
  s << "<div class=\"small\"><b>" << Esc(title) << "</b> <span class=\"legend\">";
  for (size_t k = 0; k < columns.size(); ++k)
    s << "<span><i style=\"background:" << kColours[k % 4] << "\"></i>" << Esc(columns[k]) << "</span>";
  s << "</span></div><svg class=\"chart\" viewBox=\"0 0 " << W << ' ' << H << "\">"
    << "<line x1=\"" << pad << "\" y1=\"" << Num(Y(0)) << "\" x2=\"" << W - pad << "\" y2=\"" << Num(Y(0))
    << "\" stroke=\"#d0d5dd\"/>";
  for (int64_t m : marks)
    if (m >= x0 && m <= x1)
      s << "<line x1=\"" << Num(X(m)) << "\" y1=\"" << pad / 2 << "\" x2=\"" << Num(X(m)) << "\" y2=\"" << H - pad
        << "\" stroke=\"#f04438\" stroke-dasharray=\"4 3\"><title>cut at frame " << m << "</title></line>";
  for (size_t k = 0; k < columns.size(); ++k) {
    s << "<polyline fill=\"none\" stroke=\"" << kColours[k % 4] << "\" stroke-width=\"1.5\" points=\"";
    const size_t step = std::max<size_t>(1, xs.size() / 1200);
    for (size_t i = 0; i < xs.size(); i += step)
      if (std::isfinite(ys[k][i])) s << Num(X(xs[i])) << ',' << Num(Y(ys[k][i])) << ' ';
    s << "\"/>";
  }
  s << "<text x=\"" << pad << "\" y=\"" << H - 6 << "\" font-size=\"10\" fill=\"#667085\">" << Esc(names[0]) << ' '
    << Num(x0, 0) << "</text><text x=\"" << W - pad << "\" y=\"" << H - 6
    << "\" font-size=\"10\" fill=\"#667085\" text-anchor=\"end\">" << Num(x1, 0) << "</text>"
    << "<text x=\"4\" y=\"" << pad - 8 << "\" font-size=\"10\" fill=\"#667085\">" << Num(hi, 2) << "</text>"
    << "<text x=\"4\" y=\"" << H - pad + 4 << "\" font-size=\"10\" fill=\"#667085\">" << Num(lo, 2) << "</text></svg>";
  return s.str();
}

std::vector<int64_t> Cuts(const json& r) {
  std::vector<int64_t> out;
  for (const json& c : r.value("cuts", json::array()))
    if (c.is_number()) out.push_back(c.get<int64_t>());
  return out;
}

std::string MotionPanel(const json& r, const PathMap& map) {
  std::ostringstream s;
  const json& cam = r.value("camera", json::object());
  const json& sub = r.value("subject", json::object());
  s << "<div class=\"panel\"><b>Motion</b> <span class=\"muted small\">" << Num(NumberOr(r, "frames_analysed", 0), 0)
    << " frames at " << Num(NumberOr(r, "fps", 0), 2) << " fps</span>"
    << "<div>camera: <b>" << Esc(cam.value("label", std::string("?"))) << "</b> · dx " << Num(NumberOr(cam, "dx", 0), 2)
    << " · dy " << Num(NumberOr(cam, "dy", 0), 2) << " px/frame · zoom " << Num(NumberOr(cam, "zoom", 1), 4)
    << " · rotation " << Num(NumberOr(cam, "rotation_deg", 0), 3) << "°</div>"
    << "<div>subject: mean " << Num(NumberOr(sub, "mean", 0), 2) << " · p95 " << Num(NumberOr(sub, "p95", 0), 2)
    << " px/frame · moving " << Num(100 * NumberOr(sub, "moving_fraction", 0), 1) << "% · cuts: " << Cuts(r).size()
    << "</div>";
  if (r.value("series", json()).is_string())
    s << SeriesChart(map.ToLocal(r["series"].get<std::string>()), {"dx", "dy", "subject_mean"}, Cuts(r),
                     "per frame (cuts dashed)");
  s << "</div>";
  return s.str();
}

std::string AudioSyncPanel(const json& r, const PathMap& map) {
  std::ostringstream s;
  s << "<div class=\"panel\"><b>Audio-video sync</b><div>offset <b>" << Num(NumberOr(r, "offset_ms", 0), 1)
    << " ms</b> (positive: the audio lags) · confidence " << Num(NumberOr(r, "confidence", 0), 2) << " · signal "
    << Esc(r.value("signal", std::string("-"))) << "</div>";
  if (r.value("low_confidence", false) && r.value("reason", json()).is_string())
    s << "<div class=\"small muted\">" << Esc(r["reason"].get<std::string>()) << "</div>";
  // The candidates: offset against confidence, one bar each.
  const json& c = r.value("candidates", json::array());
  if (c.is_array() && !c.empty()) {
    s << "<svg class=\"chart\" viewBox=\"0 0 640 " << 22 * c.size() + 10 << "\">";
    for (size_t i = 0; i < c.size(); ++i) {
      const double conf = std::clamp(NumberOr(c[i], "confidence", 0), 0.0, 1.0);
      s << "<text x=\"4\" y=\"" << 22 * i + 20 << "\" font-size=\"11\">" << Esc(c[i].value("signal", std::string()))
        << "</text><rect x=\"200\" y=\"" << 22 * i + 8 << "\" width=\"" << Num(300 * conf) << "\" height=\"14\" fill=\"#2e90fa\"/>"
        << "<text x=\"" << Num(206 + 300 * conf) << "\" y=\"" << 22 * i + 20 << "\" font-size=\"11\">"
        << Num(NumberOr(c[i], "offset_ms", 0), 1) << " ms, " << Num(conf, 2) << "</text>";
    }
    s << "</svg>";
  }
  if (r.value("series", json()).is_string())
    s << SeriesChart(map.ToLocal(r["series"].get<std::string>()), {"vad", "mouth", "lower_face"}, {},
                     "sound and mouth over time (s)");
  s << "</div>";
  return s.str();
}

std::string Header(const std::string& title, const std::string& prefix, int64_t now_ms) {
  return "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" "
         "content=\"width=device-width, initial-scale=1\"><title>" + Esc(title) +
         " · framemill</title><link rel=\"stylesheet\" href=\"" + prefix +
         "assets/style.css\"></head><body><header><b>framemill</b><a href=\"" + prefix +
         "index.html\">Overview</a><a href=\"" + prefix + "grid/1.html\">Items</a><a href=\"" + prefix +
         "clusters/index.html\">Identity clusters</a><a href=\"" + prefix +
         "duplicates.html\">Duplicates</a><a href=\"" + prefix + "failures.html\">Failures</a><span class=\"when\">made " + Time(now_ms) + "</span></header><main>";
}

const std::string kFooter = "</main></body></html>\n";

std::string Pager(int64_t page, int64_t pages) {
  if (pages <= 1) return "";
  std::string out = "<nav class=\"pager\">";
  auto link = [&](int64_t p) {
    out += p == page ? "<span class=\"cur\">" + std::to_string(p) + "</span>"
                     : "<a href=\"" + std::to_string(p) + ".html\">" + std::to_string(p) + "</a>";
  };
  if (page > 1) out += "<a href=\"" + std::to_string(page - 1) + ".html\">&larr; previous</a>";
  int64_t last = 0;
  for (int64_t p = 1; p <= pages; ++p) {
    if (p <= 2 || p > pages - 2 || std::llabs(p - page) <= 3) {
      if (last && p > last + 1) out += "<span>…</span>";
      link(p);
      last = p;
    }
  }
  if (page < pages) out += "<a href=\"" + std::to_string(page + 1) + ".html\">next &rarr;</a>";
  return out + "</nav>";
}

// ------------------------------------------------------------------ the report

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

struct FailureExample {
  int64_t count = 0;
  std::string example_message;
  std::vector<std::pair<std::string, int64_t>> items;  // name, item id
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
    FM_RETURN_IF_ERROR(WriteIndex());
    RemoveStalePages(o_.dir + "/items", written_items_);
    RemoveStalePages(o_.dir + "/grid", written_grid_);
    RemoveStalePages(o_.dir + "/clusters", written_clusters_);
    stats_.pictures_made = pictures_.made();
    stats_.pictures_reused = pictures_.reused();
    return stats_;
  }

 private:
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
    const bool have_still = media_ok && pictures_.Exists(PictureCache::StillName(item, a.frame, o_.thumb_side));
    if (!made.ok() && media_ok) {  // a URL not fetched yet has no picture, and no problem
      ++stats_.problem_count;
      if (stats_.problems.size() < 20) stats_.problems.push_back(item.source + ": " + made.message());
    }
    const std::string page = std::to_string(item.id) + ".html";
    if (dup_of_.count(item.source)) {
      page_of_[item.source] = page;
      if (have_still) thumb_of_[item.source] = "assets/" + PictureCache::StillName(item, a.frame, o_.thumb_side);
    }
    for (const FaceRef& f : a.all_faces) {
      const ClusterKey key{item.source, f.frame, f.index};
      auto c = cluster_index_.find(f.cluster);
      const bool noise = noise_of_.count(key) > 0;
      if ((c == cluster_index_.end() && !noise) || !crop_wanted_.count(key)) continue;
      const std::string crop = PictureCache::FaceName(item, {f.frame, f.box});
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
    grid_ += "<a class=\"card\" href=\"../items/" + page + "\">" +
             Picture(item, a, o_.thumb_side, "../", have_still, true, o_.nsfw_blur) + "<div class=\"meta\"><div class=\"name\" title=\"" +
             Esc(item.source) + "\">" + Esc(BaseName(item.source)) + "</div><div>" + Chips(item, true) +
             "</div><div class=\"small muted\">" + CardLine(item, a) + DupNote(item) + "</div></div></a>";
    if (++in_grid_ == o_.page_size) FM_RETURN_IF_ERROR(FlushGrid(false));
    return Status::OK();
  }

  // One figure or two a card can show in a line.
  static std::string CardLine(const ItemView& item, const Analyses& a) {
    std::vector<std::string> bits;
    if (auto it = a.results.find(stage_names::kCategorize); it != a.results.end()) {
      if (it->second.value("content", json::object()).value("type", std::string()) == "drawing") bits.push_back("drawing");
      const json& c = it->second.value("categories", json::array());
      if (c.is_array() && !c.empty() && c[0].is_object()) bits.push_back(Esc(c[0].value("label", std::string())));
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

  void Tally(const ItemView& item, const JobView& j) {
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
    const std::string name = PictureCache::ArtifactName(a.inpainted, kArtifactSide, false);
    if (a.inpainted.empty() || name.empty() || !have_still) return "";
    const json& r = a.results.at(stage_names::kInpaint);
    auto figure = [](const std::string& src, const std::string& caption) {
      return "<figure style=\"margin:0;flex:1\"><img style=\"width:100%\" src=\"../assets/" + src + "\" alt=\"" +
             caption + "\"><figcaption class=\"small muted\">" + caption + "</figcaption></figure>";
    };
    return "<h2>Inpainted</h2><div style=\"display:flex;gap:10px\">" +
           figure(PictureCache::StillName(item, a.frame, o_.preview_side), "original") +
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
      const std::string crop = PictureCache::FaceName(item, {f.frame, f.box});
      if (!pictures_.Exists(crop) || ++shown > 60) continue;
      const std::string img = "<img src=\"../assets/" + crop + "\" alt=\"face\" style=\"border-color:" + ClusterColour(f.cluster) + "\">";
      if (f.cluster >= 0)
        s += "<a href=\"../clusters/" + std::to_string(f.cluster) + ".html\">" + img + "#" + std::to_string(f.cluster) + "</a>";
      else
        s += "<div>" + img + (f.frame >= 0 ? "f" + std::to_string(f.frame) : "unclustered") + "</div>";
    }
    return s + "</div></div>";
  }

  // Every stage's state and raw result (long ones cut: `export` has them whole).
  static std::string StagesPanel(const ItemView& item) {
    std::string s = "<div class=\"panel\"><b>Every stage</b>";
    for (const JobView& j : item.jobs) {
      s += std::string("<details><summary><span class=\"chip ") + StateName(j.state) + "\">" + StateName(j.state) +
           "</span> " + Esc(j.stage) + (j.device.empty() ? "" : " <span class=\"small muted\">on " + Esc(j.device) + "</span>") +
           "</summary>";
      if (j.state == JobState::kDone) {
        std::string text = JsonDump(json::parse(j.result_json, nullptr, false), 1);
        if (text.size() > 16000)
          text = text.substr(0, 16000) + "\n… (" + Int(static_cast<int64_t>(j.result_json.size())) + " bytes: see `framemill export`)";
        s += "<pre>" + Esc(text) + "</pre>";
      } else if (!j.last_error.empty()) {
        s += "<div class=\"small\">" + Esc(j.error_class) + ": " + Esc(j.last_error) + "</div>";
      }
      s += "</details>";
    }
    return s + "</div>";
  }

  Status WriteItemPage(const ItemView& item, const Analyses& a, bool have_still, const Status& made) {
    std::ostringstream s;
    s << Header(BaseName(item.source), "../", now_) << "<h1>" << Esc(BaseName(item.source)) << "</h1>"
      << "<div class=\"muted small\">" << Esc(item.source) << " · " << MediaKindName(item.kind) << " · key "
      << Esc(item.content_hash) << "</div><div style=\"margin:8px 0\">" << Chips(item) << "</div>";
    if (!made.ok()) s << "<div class=\"banner\">Some pictures could not be made: " << Esc(made.message()) << "</div>";
    s << "<div class=\"two\"><div>" << Picture(item, a, o_.preview_side, "../", have_still, false, o_.nsfw_blur);
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

  std::string ThroughputChart() {
    if (finished_.size() < 2) return "<div class=\"muted\">Not enough finished jobs for a chart yet.</div>";
    std::sort(finished_.begin(), finished_.end());
    const int64_t t0 = finished_.front(), t1 = std::max(finished_.back(), t0 + 1);
    constexpr int kBuckets = 60;
    std::vector<int64_t> n(kBuckets);
    for (int64_t t : finished_) n[std::min<int64_t>(kBuckets - 1, (t - t0) * kBuckets / (t1 - t0 + 1))]++;
    const int64_t peak = *std::max_element(n.begin(), n.end());
    const double bucket_s = (t1 - t0) / 1000.0 / kBuckets;
    const double W = 900, H = 180, pad = 30, bw = (W - 2 * pad) / kBuckets;
    std::ostringstream s;
    s << "<svg class=\"chart\" viewBox=\"0 0 " << W << ' ' << H << "\" role=\"img\" aria-label=\"jobs finished over time\">";
    for (int i = 0; i < kBuckets; ++i) {
      const double h = peak > 0 ? (H - 2 * pad) * n[i] / static_cast<double>(peak) : 0;
      s << "<rect x=\"" << Num(pad + i * bw + 1) << "\" y=\"" << Num(H - pad - h) << "\" width=\"" << Num(bw - 2)
        << "\" height=\"" << Num(h) << "\" fill=\"#2e90fa\"><title>" << Time(t0 + static_cast<int64_t>(i * bucket_s * 1000))
        << ": " << n[i] << " job(s), " << Num(n[i] / std::max(bucket_s, 1e-3), 2) << " jobs/s</title></rect>";
    }
    s << "<text x=\"" << pad << "\" y=\"" << H - 8 << "\" font-size=\"11\" fill=\"#667085\">" << Time(t0) << "</text>"
      << "<text x=\"" << W - pad << "\" y=\"" << H - 8 << "\" font-size=\"11\" fill=\"#667085\" text-anchor=\"end\">"
      << Time(t1) << "</text><text x=\"" << pad << "\" y=\"" << pad - 10 << "\" font-size=\"11\" fill=\"#667085\">peak "
      << Num(peak / std::max(bucket_s, 1e-3), 2) << " jobs/s (" << Num(bucket_s, 1) << " s bars)</text></svg>";
    return s.str();
  }

  std::string StagesTable() const {
    std::ostringstream s;
    s << "<h2>Stages</h2><table><tr><th>stage</th><th class=\"n\">done</th><th class=\"n\">failed</th><th class=\"n\">skipped</th>"
      << "<th class=\"n\">pending</th><th class=\"n\">waiting</th><th class=\"n\">running</th><th>progress</th></tr>";
    for (const auto& [stage, c] : stage_) {
      const int64_t all = std::max<int64_t>(1, c[0] + c[1] + c[2] + c[3] + c[4] + c[5]);
      s << "<tr><td>" << Esc(stage) << "</td>";
      for (int k : {2, 3, 4, 0, 5, 1}) s << "<td class=\"n\">" << Int(c[k]) << "</td>";
      s << "<td><div class=\"bar\">";
      for (int k : {2, 4, 3, 1, 0, 5})
        if (c[k] > 0) s << "<span class=\"" << kStates[k] << "\" style=\"width:" << Num(100.0 * c[k] / all, 2) << "%\" title=\"" << kStates[k] << " " << c[k] << "\"></span>";
      s << "</div></td></tr>";
    }
    s << "</table><div class=\"legend small\" style=\"margin-top:4px\">";
    for (int k : {2, 4, 3, 1, 0, 5}) s << "<span><i class=\"" << kStates[k] << "\"></i>" << kStates[k] << "</span>";
    return s.str() + "</div>";
  }

  std::string FailuresTable() const {
    std::ostringstream s;
    s << "<h2>Failures by class</h2><table><tr><th>stage</th><th>class</th><th class=\"n\">jobs</th><th>example</th><th>items</th></tr>";
    std::vector<std::pair<std::pair<std::string, std::string>, const FailureExample*>> fails;
    for (const auto& [k, f] : failures_) fails.push_back({k, &f});
    std::sort(fails.begin(), fails.end(), [](const auto& a, const auto& b) { return a.second->count > b.second->count; });
    for (const auto& [k, f] : fails) {
      s << "<tr><td>" << Esc(k.first) << "</td><td>" << Esc(k.second) << "</td><td class=\"n\">" << Int(f->count)
        << "</td><td class=\"small\">" << Esc(f->example_message.substr(0, 300)) << "</td><td class=\"small\">";
      for (const auto& [name, id] : f->items)
        s << (written_items_.count(std::to_string(id) + ".html") ? "<a href=\"items/" + std::to_string(id) + ".html\">" + Esc(name) + "</a> " : Esc(name) + " ");
      s << "</td></tr>";
    }
    if (fails.empty()) s << "<tr><td colspan=\"5\" class=\"muted\">no failures</td></tr>";
    return s.str() + "</table>";
  }

  // Where the time goes: per stage and media kind, the newest done jobs' own times
  // (SummariseJobTimes, the medians `status` prints).
  static std::string TimeTable(const std::vector<JobTime>& times) {
    const auto by = SummariseJobTimes(times);
    int64_t total = 0;
    for (const auto& [key, t] : by) total += t.total_ms;
    std::ostringstream s;
    s << "<h2>Where the time goes</h2><div class=\"muted\">Each stage's newest done jobs ("
      << Int(static_cast<int64_t>(times.size())) << " in all), each timed by its worker.</div><table><tr><th>stage</th><th>kind</th><th class=\"n\">jobs</th>"
      << "<th class=\"n\">median per item</th><th class=\"n\" title=\"the median job's time: decoding media, "
      << "the rest of the host's work, kernels on a device, waiting (ms)\">decode / host / device / wait</th>"
      << "<th class=\"n\">total</th><th class=\"n\">share</th></tr>";
    for (const auto& [key, t] : by) {
      const JobTimeSplit& sp = t.median_split;
      s << "<tr><td>" << Esc(key.first) << "</td><td>" << MediaKindName(key.second) << "</td><td class=\"n\">"
        << Int(t.jobs) << "</td><td class=\"n\">"
        << (t.median_ms < 1000 ? std::to_string(t.median_ms) + " ms" : Duration(t.median_ms))
        << "</td><td class=\"n\">" << Int(sp.decode_ms) << " / " << Int(sp.host_ms) << " / "
        << Int(sp.device_ms) << " / " << Int(sp.wait_ms)
        << "</td><td class=\"n\">" << Duration(t.total_ms) << "</td><td class=\"n\">"
        << Num(total > 0 ? 100.0 * static_cast<double>(t.total_ms) / static_cast<double>(total) : 0.0, 1) << "%</td></tr>";
    }
    if (by.empty()) s << "<tr><td colspan=\"7\" class=\"muted\">no job timed yet</td></tr>";
    return s.str() + "</table>";
  }

  // A run's devices, one line each: its workers there, its busy share of the run, the most
  // memory they planned at once against the device's total, and its out-of-memory events and
  // CPU fallbacks.
  static std::string RunDevices(const RunRecord& r, int64_t now_ms) {
    if (r.devices.empty()) return "<span class=\"muted\">CPU only</span>";
    std::string out;
    for (const RunDevice& d : r.devices)
      out += (out.empty() ? "" : "<br>") + Esc(d.id) + ": " + std::to_string(d.workers) + " worker" +
             (d.workers == 1 ? "" : "s") + ", busy " + Num(100 * r.BusyShare(d, now_ms), 0) +
             "%, peak " + Int(d.peak_planned_mb) + " of " + Int(d.total_mb) +
             " MiB, " + Int(d.oom_events) + " OOM, " + Int(d.cpu_fallbacks) + " CPU fallback" +
             (d.cpu_fallbacks == 1 ? "" : "s");
    return out;
  }

  static std::string RunsTable(const std::vector<RunRecord>& runs, int64_t now_ms) {
    std::ostringstream s;
    s << "<h2>Runs</h2><table><tr><th class=\"n\">run</th><th>started</th><th>took</th><th class=\"n\">workers</th>"
      << "<th>stages</th><th class=\"n\">done</th><th class=\"n\">failed</th><th class=\"n\">GPU OOM</th><th class=\"n\">CPU fallbacks</th>"
      << "<th>devices</th><th>exit</th></tr>";
    for (const RunRecord& r : runs)
      s << "<tr><td class=\"n\">" << r.id << "</td><td class=\"small\">" << Time(r.started_at) << "</td><td>"
        << (r.finished_at ? Duration(r.finished_at - r.started_at) : "running") << "</td><td class=\"n\">" << r.workers
        << "</td><td class=\"small\">" << Esc(r.stages) << "</td><td class=\"n\">" << Int(r.jobs_done) << "</td><td class=\"n\">"
        << Int(r.jobs_failed) << "</td><td class=\"n\">" << Int(r.oom_events) << "</td><td class=\"n\">" << Int(r.cpu_fallbacks)
        << "</td><td class=\"small\">" << RunDevices(r, now_ms) << "</td><td>" << (r.finished_at ? std::to_string(r.exit_code) : "<span class=\"chip running\">in progress</span>") << "</td></tr>";
    if (runs.empty()) s << "<tr><td colspan=\"11\" class=\"muted\">no runs yet</td></tr>";
    return s.str() + "</table>";
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
    auto times = store_.RecentJobTimes(kJobTimesShown);
    if (!times.ok()) return times.status();
    s << "</div>" << StagesTable() << "<h2>Throughput</h2>" << ThroughputChart() << TimeTable(*times) << FailuresTable()
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
  PictureCache pictures_;
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
  std::map<std::string, std::array<int64_t, 6>> stage_;
  std::vector<int64_t> finished_;
  std::map<std::pair<std::string, std::string>, FailureExample> failures_;
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
};

}  // namespace

Result<ReportStats> WriteReport(JobStore& store, const ReportOptions& options) {
  if (options.page_size < 1) return Status::InvalidArgument("page size must be at least 1");
  ReportWriter w(store, options);
  return w.Write();
}

}  // namespace framemill
