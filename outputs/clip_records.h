// `export --clips` and the report's clip strip: one record per clip of a video, with what the
// video's other stages found inside the clip's span, joined when read from the item's done
// results (the clips job itself needs only motion, so a user can make clips without running
// the models; what they find shows up in the clips once they have run):
//  - labels: categorize's shown labels of the sampled frames inside [start_frame, end_frame),
//    each with its best score there and in how many of those frames;
//  - faces: the most faces in one of faces' sampled frames inside; people: the most people
//    pose tracked in one of its frames inside;
//  - audio: audio_sync's estimate for the shot the clip overlaps most (its per-shot offsets);
//  - analysed: per stage, how many of its frames lie inside. A stage that analysed none there
//    (or has not run) gives null for its key, never a guess.
// Pure; thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "outputs/export_filter.h"
#include "storage/job_store.h"

namespace framemill {

// The per-clip filters (../shared/CONTRACT.md, export --clips); -1 / empty: not given.
struct ClipFilter {
  double min_duration_s = -1, max_duration_s = -1;
  std::vector<std::string> cameras;  // --camera: motion's label of the clip's shot, any of
  double min_subject_motion = -1;    // --min-subject-motion: the shot's subject.mean (px/frame)
};

// --camera: "static,pan" as motion's labels; InvalidArgument naming the flag otherwise.
Status ParseCameras(const std::string& text, std::vector<std::string>* out);

struct ClipRecord {
  std::string item;      // the parent video, as export names it
  std::string key;       // <item's WebDataset key>_f<start frame, 7 digits>: stable across exports
  nlohmann::json clip;   // the clips result's entry, plus labels, faces, people, audio, analysed
  std::string artifact;  // the clip file
};

// What the item's other done stages found inside [start_frame, end_frame) (`results`: the
// item's done results by stage name; absent: not done).
nlohmann::json ClipContents(const nlohmann::json& clip,
                            const std::map<std::string, nlohmann::json>& results);

// A clips result with ClipContents added to each of its clips: the clips keys as every
// export gives them (../shared/CONTRACT.md). `results`: the item's done results by stage.
nlohmann::json WithClipContents(nlohmann::json clips_result,
                                const std::map<std::string, nlohmann::json>& results);
// An item's done results by stage, parsed.
std::map<std::string, nlohmann::json> DoneResults(const ItemView& item);
// The done results ClipContents reads, of one item (by ResultReader::ResultOf).
Result<std::map<std::string, nlohmann::json>> ContentResults(ResultReader& results, int64_t item_id);

// The item's clips (none unless its clips job is done), each with its contents.
std::vector<ClipRecord> ClipsOf(const ItemView& item, const std::string& item_key);

// Whether a clip passes the per-clip filters and `labels`' --label, --no-label and --faces,
// read from what was found inside the clip (a filter on a stage that analysed no frame there
// leaves the clip out).
bool ClipPasses(const ClipFilter& clips, const ExportFilter& labels, const nlohmann::json& clip);

// Every clip of the store's videos that `items` keeps (--unique, --content, --safe) and that
// passes the filters, in item order; `item_key` as WebDatasetKey gives it.
Status ForEachClip(JobStore& store, const ItemSelection& items, const ClipFilter& clips,
                   const ExportFilter& labels,
                   const std::function<Status(const ItemView&, const ClipRecord&)>& fn);

}  // namespace framemill
