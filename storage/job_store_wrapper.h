// A JobStore that forwards every call to another, after leveldb's EnvWrapper: a fake
// that breaks a few calls (tests/fakes/faulty_job_store.h) derives from it and
// overrides only those. The wrapped store is borrowed and must outlive the wrapper;
// thread-safety is the wrapped store's.
#pragma once

#include "storage/job_store.h"

namespace framemill {

class JobStoreWrapper : public JobStore {
 public:
  explicit JobStoreWrapper(JobStore* target) : target_(target) {}
  JobStore* target() const { return target_; }

  Result<std::unordered_map<std::string, ItemRecord>> LoadItems() override {
    return target_->LoadItems();
  }
  Result<EnqueueStats> Enqueue(const std::vector<NewItem>& items,
                               const EnqueueOptions& options) override {
    return target_->Enqueue(items, options);
  }
  Result<std::vector<ClaimedJob>> Claim(const std::string& worker,
                                        const std::vector<std::string>& stages, int limit,
                                        int64_t lease_ms) override {
    return target_->Claim(worker, stages, limit, lease_ms);
  }
  Result<std::vector<ClaimedJob>> ClaimItems(const std::string& worker,
                                             const std::vector<std::string>& stages, int items,
                                             int64_t lease_ms) override {
    return target_->ClaimItems(worker, stages, items, lease_ms);
  }
  Result<int> Heartbeat(const std::string& worker, int64_t lease_ms) override {
    return target_->Heartbeat(worker, lease_ms);
  }
  Result<int> RescueExpired() override { return target_->RescueExpired(); }
  Result<int> RescueWorkerJobs(int64_t run_id, int pid, const std::string& error_class,
                               const std::string& reason) override {
    return target_->RescueWorkerJobs(run_id, pid, error_class, reason);
  }
  Result<int> ReleaseWorkerJobs(int64_t run_id, int pid) override {
    return target_->ReleaseWorkerJobs(run_id, pid);
  }
  Result<CompleteStats> Complete(const std::vector<FinishedJob>& batch) override {
    return target_->Complete(batch);
  }
  Result<int> Release(const std::vector<ClaimedJob>& jobs) override {
    return target_->Release(jobs);
  }
  Result<Outstanding> CountOutstanding(const std::vector<std::string>& stages) override {
    return target_->CountOutstanding(stages);
  }
  Result<int64_t> BeginRun(int workers, const std::string& stages) override {
    return target_->BeginRun(workers, stages);
  }
  Status EndRun(int64_t run_id, int exit_code) override {
    return target_->EndRun(run_id, exit_code);
  }
  Status RegisterWorker(const std::string& worker, int64_t run_id, int pid,
                        const std::string& host) override {
    return target_->RegisterWorker(worker, run_id, pid, host);
  }
  Status WorkerStopped(const std::string& worker) override {
    return target_->WorkerStopped(worker);
  }
  Status AddGpuEvents(const std::string& worker, const DeviceUse& use) override {
    return target_->AddGpuEvents(worker, use);
  }
  Result<std::optional<TuningRecord>> LoadTuning(const std::string& op, const std::string& device,
                                                 int size_bucket) override {
    return target_->LoadTuning(op, device, size_bucket);
  }
  Status SaveTuning(const TuningRecord& record) override { return target_->SaveTuning(record); }
  Result<GcStats> CollectGarbage(const GcOptions& options) override {
    return target_->CollectGarbage(options);
  }
  Result<int64_t> RetryFailed(const std::string& stage, const std::string& error_class) override {
    return target_->RetryFailed(stage, error_class);
  }
  Result<std::vector<StageCounts>> Counts(int64_t window_ms) override {
    return target_->Counts(window_ms);
  }
  Result<int64_t> ItemCount() override { return target_->ItemCount(); }
  Result<std::vector<ErrorClassCount>> FailuresByClass() override {
    return target_->FailuresByClass();
  }
  Result<int64_t> CountErrorsSince(const std::string& error_class, int64_t since_ms) override {
    return target_->CountErrorsSince(error_class, since_ms);
  }
  Result<std::vector<RunRecord>> Runs(int limit) override { return target_->Runs(limit); }
  Status ForEachItem(const std::function<Status(const ItemView&)>& fn) override {
    return target_->ForEachItem(fn);
  }
  Result<std::vector<JobTime>> RecentJobTimes(int64_t limit) override {
    return target_->RecentJobTimes(limit);
  }
  Result<std::vector<ErrorRecord>> ErrorHistory(int64_t limit) override {
    return target_->ErrorHistory(limit);
  }
  Result<bool> WaitForWork(int64_t ms) override { return target_->WaitForWork(ms); }
  Status ForEachResult(const std::string& stage,
                       const std::function<Status(const ExportRow&)>& fn) override {
    return target_->ForEachResult(stage, fn);
  }
  Status ForEachResultFinishedSince(const std::string& stage, int64_t since_ms,
                                    const std::function<Status(const ExportRow&)>& fn) override {
    return target_->ForEachResultFinishedSince(stage, since_ms, fn);
  }
  Result<std::optional<ExportRow>> ResultOf(int64_t item_id, const std::string& stage) override {
    return target_->ResultOf(item_id, stage);
  }

 private:
  JobStore* target_;
};

}  // namespace framemill
