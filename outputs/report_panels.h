// The item page's panels (outputs/report.h), one per stage that has one: what a result says,
// as a curator reads it. A stage with a figure of its own adds one function here and one
// line to the item page (ReportWriter::WriteItemPage).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/path_map.h"
#include "storage/job_store.h"

namespace framemill::report {

// categorize's answers for curators: photo or drawing, the NSFW classes, and how many
// objects were kept below the shown threshold.
std::string ContentPanel(const nlohmann::json& r);
// lighting: exposure, colour temperature, range, contrast, clipping, the light's direction.
std::string LightingPanel(const nlohmann::json& r);
// motion: the camera's and the subject's motion, cuts, the per-frame series.
std::string MotionPanel(const nlohmann::json& r, const PathMap& map);
// audio_sync: the offset, its confidence, the candidates, sound and mouth over time.
std::string AudioSyncPanel(const nlohmann::json& r, const PathMap& map);
// Every stage's state and raw result (long ones cut: `export` has them whole).
std::string StagesPanel(const ItemView& item);

// A video's clips as a strip: each clip's middle frame (`still(frame)`: its picture's name
// under assets/, "" when there is none), span, duration, camera and the labels found inside it
// (`results`: the item's done results, as outputs/clip_records.h joins them).
std::string ClipsPanel(const std::map<std::string, nlohmann::json>& results,
                       const std::function<std::string(int64_t)>& still);
// A clip's middle frame, whose still the strip shows.
int64_t ClipMiddleFrame(const nlohmann::json& clip);
// A line chart of CSV columns against its first column (the motion and audio series), with
// dashed marks at `marks`; "" when the file has fewer than two rows.
std::string SeriesChart(const std::string& csv_path, const std::vector<std::string>& columns,
                        const std::vector<int64_t>& marks, const std::string& title);

}  // namespace framemill::report
