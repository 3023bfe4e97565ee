// The `fetch` stage: downloads URL items (enqueued from URL lists) so that every later
// stage sees a local file. A claimed batch of fetch jobs is fetched at once, many
// transfers in flight (fetch::Fetcher on libcurl's multi interface). On success the
// result names the content-addressed file; the store then makes it the item's source
// and its media jobs claimable. A failure carries its class (dns, connect, timeout,
// http_status, too_large, not_media, bad_url, transfer) as the error class, and the
// server's Retry-After as the least delay before a retry; the Status code decides
// whether it is retried at all (fetch/fetcher.h has the table).
// Thread-safety: Run/RunBatch may be called from several threads; each thread gets
// its own Fetcher (a Fetcher is single-threaded), kept for the stage's lifetime.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "configs/config.h"
#include "fetch/fetcher.h"
#include "stages/stage.h"

namespace framemill {

class FetchStage : public Stage {
 public:
  // Downloads land under `out_dir`/fetched/.
  FetchStage(FetchConfig config, std::string out_dir);
  const StageSpec& spec() const override { return spec_; }
  StageOutput Run(const ClaimedJob& job) override;
  std::vector<StageOutput> RunBatch(const std::vector<ClaimedJob>& jobs,
                                    const StageContext& ctx) override;

  static fetch::FetchOptions Options(const FetchConfig& config, const std::string& out_dir);

 private:
  fetch::Fetcher& ThisThreadsFetcher();

  fetch::FetchOptions options_;
  StageSpec spec_;
  std::mutex mu_;
  std::map<std::thread::id, std::unique_ptr<fetch::Fetcher>> fetchers_;
};

}  // namespace framemill
