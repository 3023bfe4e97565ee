#include "cli/command.h"

#include <cerrno>
#include <cstdio>
#include <optional>
#include <set>
#include <unordered_map>
#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "base/json_text.h"
#include "jobs/stage_names.h"
#include "models/decode.h"
#include "outputs/clip_records.h"
#include "outputs/export_filter.h"
#include "outputs/result_json.h"
#include "outputs/webdataset.h"

namespace framemill {
namespace {

std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

// "dog,cat" as labels, each one of COCO's 80 as categorize names them.
Status ParseLabels(const std::string& flag, const std::string& text, std::vector<std::string>* out) {
  std::set<std::string> coco;
  for (int id = 0; id < 80; ++id) coco.insert(models::CocoLabel(id));
  for (const std::string& label : SplitCommaList(text)) {
    if (!coco.count(label))
      return Status::InvalidArgument(flag + ": '" + label + "' is not one of COCO's 80 labels as "
                                     "categorize names them (person, dog, cat, sports ball, ...; "
                                     "docs/REFERENCE.md lists them)");
    out->push_back(label);
  }
  return Status::OK();
}

// The filters the flags give, checked.
Result<ExportFilter> FilterOf(const Env& env, const Flags& f) {
  ExportFilter filter;
  if (!f.labels.empty()) FM_RETURN_IF_ERROR(ParseLabels("--label", f.labels, &filter.labels));
  if (!f.no_labels.empty()) FM_RETURN_IF_ERROR(ParseLabels("--no-label", f.no_labels, &filter.no_labels));
  filter.content = f.content;
  if (f.safe) filter.safety = ExportFilter::Safety::kSafe;
  if (f.unsafe) filter.safety = ExportFilter::Safety::kUnsafe;
  if (!f.faces.empty()) FM_RETURN_IF_ERROR(ParseFaceCount(f.faces, &filter));
  filter.unsafe = env.config.unsafe;
  return filter;
}

}  // namespace

// Where export writes: stdout or a file, every write checked, so a full disk or a closed
// pipe is an error naming the file and the cause, never a silently truncated file.
class ExportSink {
 public:
  explicit ExportSink(std::string path) : path_(std::move(path)) {}
  ~ExportSink() {
    if (file_ != nullptr && file_ != stdout) std::fclose(file_);
  }
  Status Open() {
    if (path_.empty() || path_ == "-") {
      file_ = stdout;
      name_ = "standard output";
      return Status::OK();
    }
    std::error_code ec;
    auto parent = std::filesystem::path(path_).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    file_ = std::fopen(path_.c_str(), "w");
    name_ = path_;
    if (file_ == nullptr) return Status::InvalidArgument("-o: cannot write " + path_ + ": " + std::strerror(errno));
    return Status::OK();
  }
  Status Write(const std::string& s) {
    if (std::fwrite(s.data(), 1, s.size(), file_) != s.size()) return Failed();
    return Status::OK();
  }
  Status Close() {
    if (std::fflush(file_) != 0) return Failed();
    if (file_ != stdout) {
      const int rc = std::fclose(file_);
      file_ = nullptr;
      if (rc != 0) return Failed();
    }
    return Status::OK();
  }

 private:
  Status Failed() { return Status::IOError("writing " + name_ + ": " + std::strerror(errno)); }
  std::string path_, name_;
  std::FILE* file_ = nullptr;
};

namespace {

int ExportWebDataset(const Env& env, JobStore& store, const Flags& f, ItemSelection selection) {
  if (f.output.empty() || f.output == "-")
    return UsageError("--format webdataset writes shards into a directory: give it with -o DIR");
  if (!f.stage.empty())
    return UsageError("--stage: a WebDataset sample carries all of its item's results; "
                      "leave --stage out");
  WebDatasetOptions o;
  o.dir = f.output;
  o.shard_size = f.shard_size;
  o.path_map = env.config.paths;
  o.selection = std::move(selection);
  auto stats = WriteWebDataset(store, o);
  if (!stats.ok()) {
    if (stats.status().IsInvalidArgument()) return UsageError(stats.status().message());
    std::fprintf(stderr, "framemill: export failed: %s (the shards renamed into place before "
                 "it are complete; rerun to write them all)\n", stats.status().ToString().c_str());
    return ToInt(ExitCode::kStoreFailed);
  }
  std::fprintf(stderr, "exported %lld item(s) into %lld shard(s) in %s (%.1f MB of media and JSON)",
               static_cast<long long>(stats->items), static_cast<long long>(stats->shards),
               f.output.c_str(), stats->bytes / 1e6);
  if (stats->duplicates > 0)
    std::fprintf(stderr, "; %lld item(s) with the same content as an earlier one, keyed <hash>_<id>",
                 static_cast<long long>(stats->duplicates));
  if (stats->stale_removed > 0)
    std::fprintf(stderr, "; removed %lld shard(s) left by an earlier, longer export",
                 static_cast<long long>(stats->stale_removed));
  std::fprintf(stderr, "\n");
  if (stats->left_out.empty()) return ToInt(ExitCode::kOk);
  std::fprintf(stderr, "framemill: %zu item(s) left out (their media could not be read):\n",
               stats->left_out.size());
  for (size_t i = 0; i < stats->left_out.size() && i < 20; ++i)
    std::fprintf(stderr, "  %s\n", JsonDump(nlohmann::json(stats->left_out[i])).c_str());
  if (stats->left_out.size() > 20)
    std::fprintf(stderr, "  ... and %zu more\n", stats->left_out.size() - 20);
  return ToInt(ExitCode::kSomeFailed);
}

}  // namespace

namespace {

Result<ClipFilter> ClipFilterOf(const Flags& f) {
  const bool any = f.min_duration >= 0 || f.max_duration >= 0 || f.min_subject_motion >= 0 || !f.cameras.empty();
  if (any && !f.clips)
    return Status::InvalidArgument("--min-duration, --max-duration, --camera and --min-subject-motion "
                                   "filter clips: add --clips");
  if (f.clips && !f.stage.empty())
    return Status::InvalidArgument("--stage: --clips exports the clips stage's clips; leave --stage out");
  ClipFilter c;
  c.min_duration_s = f.min_duration;
  c.max_duration_s = f.max_duration;
  c.min_subject_motion = f.min_subject_motion;
  if (!f.cameras.empty()) FM_RETURN_IF_ERROR(ParseCameras(f.cameras, &c.cameras));
  return c;
}

// What a clip's row carries in csv: its span and figures, labels joined with '|'.
std::string ClipCsvRow(const ClipRecord& r) {
  const nlohmann::json& c = r.clip;
  const nlohmann::json motion = c.value("motion", nlohmann::json::object());
  std::string labels;
  if (c.contains("labels") && c["labels"].is_array())
    for (const auto& l : c["labels"]) labels += (labels.empty() ? "" : "|") + l.value("label", "");
  auto text = [](const nlohmann::json& v) { return v.is_null() ? std::string() : v.dump(); };
  return CsvField(r.item) + ',' + r.key + ',' + text(c["start_frame"]) + ',' + text(c["end_frame"]) + ',' +
         text(c["start_s"]) + ',' + text(c["end_s"]) + ',' +
         CsvField(motion.value("camera", nlohmann::json::object()).value("label", "")) + ',' +
         text(motion.value("subject", nlohmann::json::object()).value("mean", nlohmann::json())) + ',' +
         CsvField(labels) + ',' + text(c.value("faces", nlohmann::json())) + ',' +
         text(c.value("people", nlohmann::json())) + ',' + CsvField(r.artifact) + '\n';
}

// A clips row's result with what the item's other stages found inside each clip (the
// contract's clips keys); the item's id from `items`, loaded on the first clips row.
Result<std::string> ClipsRowResult(JobStore& store, std::optional<std::unordered_map<std::string, ItemRecord>>* items,
                                   const ExportRow& r) {
  if (!*items) {
    auto loaded = store.LoadItems();
    if (!loaded.ok()) return loaded.status();
    *items = std::move(loaded).value();
  }
  const auto it = (*items)->find(r.source);
  const auto parsed = nlohmann::json::parse(r.result_json, nullptr, false);
  if (it == (*items)->end() || parsed.is_discarded()) return r.result_json;
  auto found = ContentResults(store, it->second.id);
  if (!found.ok()) return found.status();
  return JsonDump(WithClipContents(parsed, *found));
}

int ExportClips(const Env& env, JobStore& store, const Flags& f, const ClipFilter& clips,
                const ExportFilter& found, ItemSelection selection) {
  if (f.format == "webdataset") {
    if (f.output.empty() || f.output == "-")
      return UsageError("--format webdataset writes shards into a directory: give it with -o DIR");
    WebDatasetOptions o;
    o.dir = f.output;
    o.shard_size = f.shard_size;
    o.path_map = env.config.paths;
    o.selection = std::move(selection);
    auto stats = WriteClipsWebDataset(store, o, clips, found);
    if (!stats.ok()) {
      std::fprintf(stderr, "framemill: export failed: %s\n", stats.status().ToString().c_str());
      return ToInt(ExitCode::kStoreFailed);
    }
    std::fprintf(stderr, "exported %lld clip(s) into %lld shard(s) in %s (%.1f MB)\n",
                 static_cast<long long>(stats->items), static_cast<long long>(stats->shards),
                 f.output.c_str(), stats->bytes / 1e6);
    for (const std::string& why : stats->left_out) std::fprintf(stderr, "  left out: %s\n", why.c_str());
    return ToInt(stats->left_out.empty() ? ExitCode::kOk : ExitCode::kSomeFailed);
  }
  ExportSink out(f.output);
  if (Status st = out.Open(); !st.ok()) return UsageError(st.message());
  int64_t n = 0;
  Status s = f.format == "csv" ? out.Write("item,key,start_frame,end_frame,start_s,end_s,camera,"
                                           "subject_motion,labels,faces,people,artifact\n")
                               : Status::OK();
  if (s.ok()) s = ForEachClip(store, selection, clips, found, [&](const ItemView&, const ClipRecord& r) {
    ++n;
    if (f.format == "csv") return out.Write(ClipCsvRow(r));
    nlohmann::json j;
    SetBytesField(j, "item", r.item);
    j["key"] = r.key;
    j.update(r.clip);
    return out.Write(JsonDump(j) + '\n');
  });
  if (s.ok()) s = out.Close();
  if (!s.ok()) {
    std::fprintf(stderr, "framemill: export failed after %lld clip(s): %s\n", static_cast<long long>(n),
                 s.ToString().c_str());
    return ToInt(ExitCode::kStoreFailed);
  }
  if (!f.output.empty() && f.output != "-")
    std::fprintf(stderr, "exported %lld clip(s) to %s\n", static_cast<long long>(n), f.output.c_str());
  return ToInt(ExitCode::kOk);
}

}  // namespace

int CmdExport(const Flags& f) {
  auto env = ResolveExisting(f);
  if (!env.ok()) return UsageError(env.status().message());
  if (f.format != "jsonl" && f.format != "csv" && f.format != "webdataset")
    return UsageError("--format: expected jsonl, csv or webdataset, got '" + f.format + "'");
  if (Status st = CheckStageFlag(*env, f.stage); !st.ok()) return UsageError(st.message());
  auto filter = FilterOf(*env, f);
  if (!filter.ok()) return UsageError(filter.status().message());
  auto clips = ClipFilterOf(f);
  if (!clips.ok()) return UsageError(clips.status().message());
  auto store = OpenStore(*env);
  if (!store.ok()) return StoreError(store.status());
  // With --clips, --label, --no-label and --faces read each clip's contents, not its item's.
  ExportFilter per_item = *filter;
  if (f.clips) per_item.labels.clear(), per_item.no_labels.clear(), per_item.min_faces = per_item.max_faces = -1;
  auto selection = ItemSelection::Make(**store, per_item, f.unique);
  if (!selection.ok()) return StoreError(selection.status());
  if (f.clips) return ExportClips(*env, **store, f, *clips, *filter, std::move(selection).value());
  if (f.format == "webdataset") return ExportWebDataset(*env, **store, f, std::move(selection).value());
  ExportSink out(f.output);
  if (Status st = out.Open(); !st.ok()) return UsageError(st.message());
  Status written = f.format == "csv" ? out.Write("item,stage,device,attempts,result,artifacts\n")
                                     : Status::OK();
  int64_t n = 0;
  Status s = written;
  std::optional<std::unordered_map<std::string, ItemRecord>> items;  // for clips rows
  if (s.ok()) s = (*store)->ForEachResult(f.stage, [&](const ExportRow& row) -> Status {
    if (!selection->Keeps(row.source)) return Status::OK();
    ExportRow r = row;
    if (r.stage == stage_names::kClips) {
      auto result = ClipsRowResult(**store, &items, r);
      if (!result.ok()) return result.status();
      r.result_json = std::move(result).value();
    }
    ++n;
    if (f.format == "csv") {
      return out.Write(CsvField(r.source) + ',' + r.stage + ',' + r.device + ',' +
                       std::to_string(r.attempts) + ',' + CsvField(r.result_json) + ',' +
                       CsvField(r.artifacts_json) + '\n');
    }
    nlohmann::json j;
    SetBytesField(j, "item", r.source);
    j["stage"] = r.stage;
    j.update(DoneResultJson(r.device, r.attempts, r.result_json, r.artifacts_json));
    return out.Write(JsonDump(j) + '\n');
  });
  if (s.ok()) s = out.Close();
  if (!s.ok()) {
    // A write error is the machine's (exit 4); what was written so far is not the export.
    std::fprintf(stderr, "framemill: export failed after %lld row(s): %s\n",
                 static_cast<long long>(n), s.ToString().c_str());
    return ToInt(ExitCode::kStoreFailed);
  }
  if (!f.output.empty() && f.output != "-")
    std::fprintf(stderr, "exported %lld result(s) to %s\n", static_cast<long long>(n),
                 f.output.c_str());
  return ToInt(ExitCode::kOk);
}

}  // namespace framemill
