#include "stages/fetch_stage.h"

#include <nlohmann/json.hpp>

#include "stages/media.h"
#include "storage/job_store.h"

namespace framemill {
namespace {

constexpr size_t kHeadBytes = 256 * 1024;  // enough for any image header we probe

// What enqueue records for a local file, so a fetched item looks the same.
nlohmann::json MediaInfoOf(const std::string& path, const std::string& fallback_format) {
  nlohmann::json info = nlohmann::json::object();
  info["format"] = fallback_format;
  auto head = ReadFileBytes(path, kHeadBytes);
  if (!head.ok()) return info;
  auto sniffed = SniffMedia(*head);
  if (!sniffed) return info;
  info["format"] = sniffed->format;
  if (sniffed->kind == MediaKind::kImage) {
    auto hdr = ProbeImageHeader(*head, sniffed->format);
    if (hdr.ok()) {
      info["width"] = hdr->width;
      info["height"] = hdr->height;
    }
  }
  return info;
}

StageOutput ToOutput(const ClaimedJob& job, const fetch::FetchResult& r) {
  if (!r.status.ok()) {
    std::string cls = fetch::FailureClassName(r.failure);
    if (r.failure == fetch::FailureClass::kNone) cls = "transfer";
    return StageOutput::Failed(r.status, cls, r.retry_after_ms);
  }
  nlohmann::json res;
  res["url"] = job.source;
  res["final_url"] = r.final_url;
  res["path"] = r.path;
  res["content_hash"] = r.content_hash;
  res["bytes"] = r.bytes;
  res["media"] = r.media;
  res["format"] = r.format;
  res["http_status"] = r.http_status;
  res["seconds"] = r.seconds;
  res["media_info"] = MediaInfoOf(r.path, r.format);
  auto info = nlohmann::json::parse(job.media_info, nullptr, false);
  if (info.is_object() && info.contains("metadata")) res["metadata"] = info["metadata"];
  StageOutput out = StageOutput::Done(std::move(res));
  out.artifacts.push_back(r.path);
  return out;
}

}  // namespace

fetch::FetchOptions FetchStage::Options(const FetchConfig& c, const std::string& out_dir) {
  fetch::FetchOptions o;
  o.concurrency = c.concurrency;
  o.per_host = c.per_host;
  o.connect_timeout_ms = c.connect_timeout_ms;
  o.total_timeout_ms = c.timeout_ms;
  o.max_bytes = c.max_bytes;
  o.max_redirects = c.max_redirects;
  o.user_agent = c.user_agent;
  o.out_dir = out_dir;
  return o;
}

FetchStage::FetchStage(FetchConfig config, std::string out_dir)
    : options_(Options(config, out_dir)) {
  spec_.name = kFetchStage;
}

fetch::Fetcher& FetchStage::ThisThreadsFetcher() {
  std::lock_guard<std::mutex> l(mu_);
  auto& f = fetchers_[std::this_thread::get_id()];
  if (!f) f = std::make_unique<fetch::Fetcher>(options_);
  return *f;
}

StageOutput FetchStage::Run(const ClaimedJob& job) {
  return RunBatch({job}, StageContext{}).front();
}

std::vector<StageOutput> FetchStage::RunBatch(const std::vector<ClaimedJob>& jobs,
                                              const StageContext& ctx) {
  std::vector<StageOutput> out;
  if (jobs.empty() || (ctx.stop != nullptr && ctx.stop->load())) return out;
  std::vector<std::string> urls;
  urls.reserve(jobs.size());
  for (const ClaimedJob& j : jobs) urls.push_back(j.source);
  // One FetchAll for the whole batch: the transfers overlap, which is the point.
  std::vector<fetch::FetchResult> results = ThisThreadsFetcher().FetchAll(urls);
  out.reserve(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (i < results.size()) {
      out.push_back(ToOutput(jobs[i], results[i]));
    } else {
      out.push_back(StageOutput::Failed(
          Status::Internal("the fetcher returned no result for this URL"), "transfer"));
    }
  }
  return out;
}

}  // namespace framemill
