#include "outputs/report_overview.h"

#include <algorithm>
#include <sstream>

#include "media/kind.h"
#include "outputs/report_html.h"

namespace framemill::report {

std::string ThroughputChart(std::vector<int64_t> finished) {
  if (finished.size() < 2) return "<div class=\"muted\">Not enough finished jobs for a chart yet.</div>";
  std::sort(finished.begin(), finished.end());
  const int64_t t0 = finished.front(), t1 = std::max(finished.back(), t0 + 1);
  constexpr int kBuckets = 60;
  std::vector<int64_t> n(kBuckets);
  for (int64_t t : finished) n[std::min<int64_t>(kBuckets - 1, (t - t0) * kBuckets / (t1 - t0 + 1))]++;
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

std::string StagesTable(const StateCounts& stages) {
  std::ostringstream s;
  s << "<h2>Stages</h2><table><tr><th>stage</th><th class=\"n\">done</th><th class=\"n\">failed</th><th class=\"n\">skipped</th>"
    << "<th class=\"n\">pending</th><th class=\"n\">waiting</th><th class=\"n\">running</th><th>progress</th></tr>";
  for (const auto& [stage, c] : stages) {
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

std::string FailuresTable(const FailureExamples& failures, const std::set<std::string>& written_items) {
  std::ostringstream s;
  s << "<h2>Failures by class</h2><table><tr><th>stage</th><th>class</th><th class=\"n\">jobs</th><th>example</th><th>items</th></tr>";
  std::vector<std::pair<std::pair<std::string, std::string>, const FailureExample*>> fails;
  for (const auto& [k, f] : failures) fails.push_back({k, &f});
  std::sort(fails.begin(), fails.end(), [](const auto& a, const auto& b) { return a.second->count > b.second->count; });
  for (const auto& [k, f] : fails) {
    s << "<tr><td>" << Esc(k.first) << "</td><td>" << Esc(k.second) << "</td><td class=\"n\">" << Int(f->count)
      << "</td><td class=\"small\">" << Esc(f->example_message.substr(0, 300)) << "</td><td class=\"small\">";
    for (const auto& [name, id] : f->items)
      s << (written_items.count(std::to_string(id) + ".html") ? "<a href=\"items/" + std::to_string(id) + ".html\">" + Esc(name) + "</a> " : Esc(name) + " ");
    s << "</td></tr>";
  }
  if (fails.empty()) s << "<tr><td colspan=\"5\" class=\"muted\">no failures</td></tr>";
  return s.str() + "</table>";
}

std::string TimeTable(const std::vector<JobTime>& times) {
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

std::string RunDevices(const RunRecord& r, int64_t now_ms) {
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

std::string RunsTable(const std::vector<RunRecord>& runs, int64_t now_ms) {
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

}  // namespace framemill::report
