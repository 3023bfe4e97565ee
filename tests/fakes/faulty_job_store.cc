#include "tests/fakes/faulty_job_store.h"

namespace framemill::testing {

bool FaultyJobStore::Take(std::atomic<int>& counter) {
  int n = counter.load();
  while (n > 0) {
    if (counter.compare_exchange_weak(n, n - 1)) return true;
  }
  return false;
}

Result<std::unordered_map<std::string, ItemRecord>> FaultyJobStore::LoadItems() {
  return real_->LoadItems();
}

Result<EnqueueStats> FaultyJobStore::Enqueue(const std::vector<NewItem>& items,
                                             const EnqueueOptions& options) {
  return real_->Enqueue(items, options);
}

Result<std::vector<ClaimedJob>> FaultyJobStore::Claim(const std::string& worker,
                                                      const std::vector<std::string>& stages,
                                                      int limit, int64_t lease_ms) {
  ++claim_calls;
  if (Take(fail_next_claim)) return Status::IOError("injected: claim failed");
  return real_->Claim(worker, stages, limit, lease_ms);
}

Result<int> FaultyJobStore::Heartbeat(const std::string& worker, int64_t lease_ms) {
  ++heartbeat_calls;
  if (drop_heartbeats.load()) {
    ++heartbeats_dropped;
    return 0;
  }
  return real_->Heartbeat(worker, lease_ms);
}

Result<int> FaultyJobStore::RescueExpired() { return real_->RescueExpired(); }

Result<CompleteStats> FaultyJobStore::Complete(const std::vector<Completion>& batch) {
  ++complete_calls;
  if (Take(fail_next_complete)) {
    ++complete_failures;
    return Status::IOError("injected: commit of the completion transaction failed");
  }
  return real_->Complete(batch);
}

Result<int> FaultyJobStore::Release(const std::vector<ClaimedJob>& jobs) {
  ++release_calls;
  if (Take(fail_next_release)) return Status::IOError("injected: release failed");
  return real_->Release(jobs);
}

Result<JobStore::Outstanding> FaultyJobStore::CountOutstanding(
    const std::vector<std::string>& stages) {
  return real_->CountOutstanding(stages);
}

Result<int64_t> FaultyJobStore::BeginRun(int workers, const std::string& stages) {
  return real_->BeginRun(workers, stages);
}

Status FaultyJobStore::EndRun(int64_t run_id, int exit_code) {
  return real_->EndRun(run_id, exit_code);
}

Status FaultyJobStore::RegisterWorker(const std::string& worker, int64_t run_id, int pid,
                                      const std::string& host) {
  return real_->RegisterWorker(worker, run_id, pid, host);
}

Status FaultyJobStore::WorkerStopped(const std::string& worker) {
  return real_->WorkerStopped(worker);
}

Result<int64_t> FaultyJobStore::RetryFailed(const std::string& stage) {
  return real_->RetryFailed(stage);
}

Result<std::vector<StageCounts>> FaultyJobStore::Counts(int64_t window_ms) {
  return real_->Counts(window_ms);
}

Result<int64_t> FaultyJobStore::ItemCount() { return real_->ItemCount(); }

Result<std::vector<ErrorClassCount>> FaultyJobStore::FailuresByClass() {
  return real_->FailuresByClass();
}

Result<std::optional<RunRecord>> FaultyJobStore::LastRun() { return real_->LastRun(); }

Status FaultyJobStore::ForEachResult(const std::string& stage,
                                     const std::function<void(const ExportRow&)>& fn) {
  return real_->ForEachResult(stage, fn);
}

Status FaultyJobStore::AddGpuEvents(const std::string& worker, int64_t oom_events,
                                    int64_t cpu_fallbacks) {
  return real_->AddGpuEvents(worker, oom_events, cpu_fallbacks);
}

Result<std::optional<TuningRecord>> FaultyJobStore::LoadTuning(const std::string& op,
                                                               const std::string& device,
                                                               int size_bucket) {
  return real_->LoadTuning(op, device, size_bucket);
}

Status FaultyJobStore::SaveTuning(const TuningRecord& record) { return real_->SaveTuning(record); }

}  // namespace framemill::testing
