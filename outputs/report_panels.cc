#include "outputs/report_panels.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "base/json_text.h"
#include "jobs/stage_names.h"
#include "outputs/clip_records.h"
#include "outputs/report_html.h"

namespace framemill::report {

using nlohmann::json;

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

namespace {
std::vector<int64_t> Cuts(const json& r) {
  std::vector<int64_t> out;
  for (const json& c : r.value("cuts", json::array()))
    if (c.is_number()) out.push_back(c.get<int64_t>());
  return out;
}

}  // namespace

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

namespace {

// A CSV's first column and the named ones (NaN where a cell is empty or the column absent).
struct Series {
  std::string x_name;
  std::vector<double> xs;
  std::vector<std::vector<double>> ys;  // per column
};

bool ReadSeries(const std::string& csv_path, const std::vector<std::string>& columns, Series* out) {
  std::ifstream in(csv_path);
  std::string header;
  if (!in || !std::getline(in, header)) return false;
  std::vector<std::string> names;
  std::stringstream hs(header);
  for (std::string c; std::getline(hs, c, ',');) names.push_back(c);
  std::vector<int> idx;
  for (const auto& c : columns) {
    auto it = std::find(names.begin(), names.end(), c);
    idx.push_back(it == names.end() ? -1 : static_cast<int>(it - names.begin()));
  }
  out->x_name = names.empty() ? "" : names[0];
  out->ys.assign(columns.size(), {});
  for (std::string line; std::getline(in, line) && out->xs.size() < 20000;) {
    std::vector<std::string> cells;
    std::stringstream ls(line);
    for (std::string c; std::getline(ls, c, ',');) cells.push_back(c);
    if (cells.empty()) continue;
    out->xs.push_back(std::atof(cells[0].c_str()));
    for (size_t k = 0; k < columns.size(); ++k)
      out->ys[k].push_back(idx[k] >= 0 && idx[k] < static_cast<int>(cells.size()) && !cells[idx[k]].empty()
                               ? std::atof(cells[idx[k]].c_str()) : NAN);
  }
  return out->xs.size() >= 2;
}

}  // namespace

std::string SeriesChart(const std::string& csv_path, const std::vector<std::string>& columns,
                        const std::vector<int64_t>& marks, const std::string& title) {
  Series d;
  if (!ReadSeries(csv_path, columns, &d)) return "";
  const std::vector<double>& xs = d.xs;
  const double x0 = xs.front(), x1 = std::max(xs.back(), x0 + 1e-9);
  double lo = 0, hi = 0;
  for (const auto& y : d.ys)
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
      if (std::isfinite(d.ys[k][i])) s << Num(X(xs[i])) << ',' << Num(Y(d.ys[k][i])) << ' ';
    s << "\"/>";
  }
  s << "<text x=\"" << pad << "\" y=\"" << H - 6 << "\" font-size=\"10\" fill=\"#667085\">" << Esc(d.x_name) << ' '
    << Num(x0, 0) << "</text><text x=\"" << W - pad << "\" y=\"" << H - 6
    << "\" font-size=\"10\" fill=\"#667085\" text-anchor=\"end\">" << Num(x1, 0) << "</text>"
    << "<text x=\"4\" y=\"" << pad - 8 << "\" font-size=\"10\" fill=\"#667085\">" << Num(hi, 2) << "</text>"
    << "<text x=\"4\" y=\"" << H - pad + 4 << "\" font-size=\"10\" fill=\"#667085\">" << Num(lo, 2) << "</text></svg>";
  return s.str();
}

// Every stage's state and raw result (long ones cut: `export` has them whole).
int64_t ClipMiddleFrame(const json& clip) {
  return (clip.value("start_frame", int64_t{0}) + clip.value("end_frame", int64_t{1}) - 1) / 2;
}

std::string ClipsPanel(const std::map<std::string, json>& results, const std::function<std::string(int64_t)>& still) {
  const auto it = results.find(stage_names::kClips);
  if (it == results.end() || !it->second.contains("clips")) return "";
  const json& clips = it->second["clips"];
  std::ostringstream s;
  s << "<div class=\"panel\"><b>Clips</b> <span class=\"muted small\">" << clips.size() << " clip(s), "
    << it->second.value("dropped", json::array()).size() << " span(s) left out</span><div class=\"strip\">";
  for (const json& c : clips) {
    const json found = ClipContents(c, results);
    std::string labels;
    if (found["labels"].is_array())
      for (const json& l : found["labels"]) labels += (labels.empty() ? "" : ", ") + l.value("label", std::string());
    const std::string name = still(ClipMiddleFrame(c));
    s << "<figure class=\"clip\">" << (name.empty() ? "" : "<img src=\"../assets/" + name + "\" alt=\"clip\">")
      << "<figcaption class=\"small\">f" << c.value("start_frame", int64_t{0}) << "-" << c.value("end_frame", int64_t{0})
      << " · " << Num(NumberOr(c, "end_s", 0) - NumberOr(c, "start_s", 0), 1) << " s · "
      << Esc(c.value("motion", json::object()).value("camera", json::object()).value("label", std::string("?")))
      << "<br>" << (found["labels"].is_null() ? "<span class=\"muted\">not analysed</span>" : Esc(labels.empty() ? "no labels" : labels))
      << "</figcaption></figure>";
  }
  return s.str() + "</div></div>";
}

std::string StagesPanel(const ItemView& item) {
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

}  // namespace framemill::report
