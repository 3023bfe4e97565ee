// FaultyJobStore: a JobStore that forwards every call to a real one (usually a
// SqliteJobStore) through JobStoreWrapper, and breaks the few it has switches for,
// after leveldb's ErrorEnv. Used by the scheduler tests to make a commit fail
// (`fail_next_complete`: Complete returns IOError without touching the real store,
// as if the transaction had rolled back), to lose a lease mid-batch
// (`drop_heartbeats`: Heartbeat says OK but renews nothing), or to make claims fail.
// Counters record how often each call was made. Switches and counters are atomics,
// so a test thread may flip them while a worker (and its heartbeat thread) runs;
// the wrapped store's own thread-safety rules still apply.
#pragma once

#include <atomic>

#include "storage/job_store_wrapper.h"

namespace framemill::testing {

class FaultyJobStore : public JobStoreWrapper {
 public:
  explicit FaultyJobStore(JobStore* real) : JobStoreWrapper(real) {}

  // --- switches ---
  // The next `fail_next_complete` calls to Complete fail with IOError (a failed
  // commit) without reaching the real store.
  std::atomic<int> fail_next_complete{0};
  // Heartbeat returns OK (0 leases renewed) but does nothing: leases run out.
  std::atomic<bool> drop_heartbeats{false};
  // The next `fail_next_claim` calls to Claim or ClaimItems fail with IOError.
  std::atomic<int> fail_next_claim{0};
  // The next `fail_next_release` calls to Release fail with IOError.
  std::atomic<int> fail_next_release{0};

  // --- counters (every call, failed or not) ---
  std::atomic<int> claim_calls{0};
  std::atomic<int> complete_calls{0};
  std::atomic<int> complete_failures{0};  // injected
  std::atomic<int> heartbeat_calls{0};
  std::atomic<int> heartbeats_dropped{0};
  std::atomic<int> release_calls{0};

  Result<std::vector<ClaimedJob>> Claim(const std::string& worker,
                                        const std::vector<std::string>& stages, int limit,
                                        int64_t lease_ms) override;
  Result<std::vector<ClaimedJob>> ClaimItems(const std::string& worker,
                                             const std::vector<std::string>& stages, int items,
                                             int64_t lease_ms) override;
  Result<int> Heartbeat(const std::string& worker, int64_t lease_ms) override;
  Result<CompleteStats> Complete(const std::vector<FinishedJob>& batch) override;
  Result<int> Release(const std::vector<ClaimedJob>& jobs) override;

 private:
  // Counts a Claim or ClaimItems call; true where it is to fail (fail_next_claim).
  bool ClaimFails();
  // Consumes one pending injected failure from `counter`, if any.
  static bool Take(std::atomic<int>& counter);
};

}  // namespace framemill::testing
