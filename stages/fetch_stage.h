// The `fetch` stage: downloads URL items (enqueued from URL lists) so that every later
// stage sees a local file. A claimed batch of fetch jobs is fetched at once, many
// transfers in flight (fetch::Fetcher on libcurl's multi interface). On success the
// outcome carries the content-addressed file (Outcome::fetched); the store then makes it
// the item's source and its media jobs claimable. A failure carries its class (dns,
// connect, timeout, http_status, too_large, not_media, bad_url, transfer) as the error
// class, and the server's Retry-After as the least delay before a retry; the Status
// code decides whether it is retried at all (fetch/fetcher.h has the table).
// Not a PerJobStage (stages/per_job_stage.h): the whole batch is one FetchAll, its transfers
// in flight together; job by job there would be one transfer at a time.
// Thread-safety: RunBatch may be called from several threads; each thread gets its own
// Fetcher (a Fetcher is single-threaded), kept for the stage's lifetime.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "fetch/fetcher.h"
#include "jobs/stage_names.h"
#include "stages/stage.h"

namespace framemill {

class FetchStage : public Stage {
 public:
  static constexpr const char* kName = stage_names::kFetch;

  // Downloads land under options.out_dir/fetched/.
  explicit FetchStage(fetch::FetchOptions options);
  const StageSpec& spec() const override { return spec_; }
  std::vector<Outcome> RunBatch(const std::vector<ClaimedJob>& jobs,
                                const StageContext& ctx) override;

 private:
  fetch::Fetcher& ThisThreadsFetcher();

  fetch::FetchOptions options_;
  StageSpec spec_;
  std::mutex mu_;
  std::map<std::thread::id, std::unique_ptr<fetch::Fetcher>> fetchers_;
};

}  // namespace framemill
