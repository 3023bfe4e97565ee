#include "tests/fakes/faulty_job_store.h"

namespace framemill::testing {

bool FaultyJobStore::Take(std::atomic<int>& counter) {
  int n = counter.load();
  while (n > 0) {
    if (counter.compare_exchange_weak(n, n - 1)) return true;
  }
  return false;
}

bool FaultyJobStore::ClaimFails() {
  ++claim_calls;
  return Take(fail_next_claim);
}

Result<std::vector<ClaimedJob>> FaultyJobStore::Claim(const std::string& worker,
                                                      const std::vector<std::string>& stages,
                                                      int limit, int64_t lease_ms) {
  if (ClaimFails()) return Status::IOError("injected: claim failed");
  return JobStoreWrapper::Claim(worker, stages, limit, lease_ms);
}

Result<std::vector<ClaimedJob>> FaultyJobStore::ClaimItems(const std::string& worker,
                                                           const std::vector<std::string>& stages,
                                                           int items, int64_t lease_ms) {
  if (ClaimFails()) return Status::IOError("injected: claim failed");
  return JobStoreWrapper::ClaimItems(worker, stages, items, lease_ms);
}

Result<int> FaultyJobStore::Heartbeat(const std::string& worker, int64_t lease_ms) {
  ++heartbeat_calls;
  if (drop_heartbeats.load()) {
    ++heartbeats_dropped;
    return 0;
  }
  return JobStoreWrapper::Heartbeat(worker, lease_ms);
}

Result<CompleteStats> FaultyJobStore::Complete(const std::vector<FinishedJob>& batch) {
  ++complete_calls;
  if (Take(fail_next_complete)) {
    ++complete_failures;
    return Status::IOError("injected: commit of the completion transaction failed");
  }
  return JobStoreWrapper::Complete(batch);
}

Result<int> FaultyJobStore::Release(const std::vector<ClaimedJob>& jobs) {
  ++release_calls;
  if (Take(fail_next_release)) return Status::IOError("injected: release failed");
  return JobStoreWrapper::Release(jobs);
}

}  // namespace framemill::testing
