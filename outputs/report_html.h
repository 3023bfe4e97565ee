// The report's HTML (outputs/report.h): escaping and number formats, the page frame (the
// header with its navigation, the footer, the pager, the style sheet), job states' names,
// identity colours, and writing a page whole. Pure functions but WritePage.
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "jobs/job.h"

namespace framemill::report {

std::string Valid(const std::string& s);    // s, or its valid UTF-8 form
std::string Esc(const std::string& raw);    // s escaped for HTML text and attributes
std::string Num(double v, int decimals = 1);
std::string Int(int64_t v);                 // with thousands separators
std::string Time(int64_t ms);               // epoch ms as "YYYY-MM-DD HH:MM:SS UTC"; "-" for none
std::string Duration(int64_t ms);           // "12.3 s", "4 min 5 s", "2 h 3 min"
std::string BaseName(const std::string& source);
double NumberOr(const nlohmann::json& j, const char* key, double fallback);

// A page, whole or absent (base/atomic_file.h); its size is added to *bytes.
Status WritePage(const std::string& path, const std::string& text, int64_t* bytes);
// Pages of an earlier, larger report: named like ours (digits.html) but not written now.
void RemoveStalePages(const std::string& dir, const std::set<std::string>& written);

extern const char* const kStyle;  // assets/style.css
inline constexpr const char* kStates[] = {"pending", "running", "done", "failed", "skipped", "waiting"};
inline const char* StateName(JobState s) { return kStates[static_cast<int>(s)]; }
// Colours that stay apart on photos; a cluster keeps its colour on every page.
std::string ClusterColour(int64_t id);

// A page's head and navigation; `prefix` leads from the page to the report's root.
std::string Header(const std::string& title, const std::string& prefix, int64_t now_ms);
inline const std::string kFooter = "</main></body></html>\n";
std::string Pager(int64_t page, int64_t pages);

}  // namespace framemill::report
