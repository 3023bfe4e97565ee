#include "outputs/report_html.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>

#include "base/atomic_file.h"
#include "base/json_text.h"

namespace framemill::report {

namespace fs = std::filesystem;
using nlohmann::json;

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

std::string Num(double v, int decimals) {
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

Status WritePage(const std::string& path, const std::string& text, int64_t* bytes) {
  FM_RETURN_IF_ERROR(WriteFileAtomically(path, text));
  if (bytes) *bytes += static_cast<int64_t>(text.size());
  return Status::OK();
}

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

const char* const kStyle = R"css(
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
.strip { display:flex; gap:8px; overflow-x:auto; padding-top:6px; }
.clip { margin:0; flex:0 0 auto; width:160px; }
.clip img { width:160px; border-radius:4px; display:block; }
.faces { display:flex; flex-wrap:wrap; gap:8px; } .faces a, .faces div { display:block; text-align:center; font-size:11px; color:var(--muted); }
.faces img { width:96px; height:96px; object-fit:cover; border-radius:6px; border:3px solid #ccc; display:block; }
pre { background:#f2f4f7; padding:8px; overflow:auto; max-height:420px; font-size:12px; border-radius:6px; }
details { margin:6px 0; } summary { cursor:pointer; }
.legend span { margin-right:12px; font-size:12px; } .legend i { display:inline-block; width:10px; height:10px; border-radius:2px; margin-right:4px; vertical-align:middle; }
svg.chart { background:#fff; border:1px solid var(--line); border-radius:8px; width:100%; height:auto; }
@media (max-width: 900px) { .two { grid-template-columns:1fr; } }
)css";

std::string ClusterColour(int64_t id) {
  static const char* kPalette[] = {"#e6194b", "#3cb44b", "#4363d8", "#f58231", "#911eb4", "#42d4f4",
                                   "#f032e6", "#bfef45", "#fabed4", "#469990", "#dcbeff", "#9a6324",
                                   "#fffac8", "#800000", "#aaffc3", "#808000", "#ffd8b1", "#000075"};
  if (id < 0) return "#98a2b3";
  return kPalette[id % (sizeof kPalette / sizeof *kPalette)];
}

std::string Header(const std::string& title, const std::string& prefix, int64_t now_ms) {
  return "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" "
         "content=\"width=device-width, initial-scale=1\"><title>" + Esc(title) +
         " · framemill</title><link rel=\"stylesheet\" href=\"" + prefix +
         "assets/style.css\"></head><body><header><b>framemill</b><a href=\"" + prefix +
         "index.html\">Overview</a><a href=\"" + prefix + "grid/1.html\">Items</a><a href=\"" + prefix +
         "clusters/index.html\">Identity clusters</a><a href=\"" + prefix +
         "labels.html\">Labels</a><a href=\"" + prefix + "duplicates.html\">Duplicates</a><a href=\"" + prefix + "failures.html\">Failures</a><span class=\"when\">made " + Time(now_ms) + "</span></header><main>";
}

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

}  // namespace framemill::report
