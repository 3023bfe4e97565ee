#include "scheduler/heartbeat.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <utility>

namespace framemill {

HeartbeatThread::HeartbeatThread(JobStore* store, std::string worker, int64_t lease_ms)
    : store_(store), worker_(std::move(worker)), lease_ms_(lease_ms) {
  if (store_ != nullptr) thread_ = std::thread([this] { Loop(); });
}

HeartbeatThread::~HeartbeatThread() {
  {
    std::lock_guard<std::mutex> l(mu_);
    done_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void HeartbeatThread::Loop() {
  std::unique_lock<std::mutex> l(mu_);
  while (!cv_.wait_for(l, std::chrono::milliseconds(lease_ms_ / 3), [this] { return done_; })) {
    l.unlock();
    auto r = store_->Heartbeat(worker_, lease_ms_);
    if (!r.ok()) spdlog::warn("heartbeat failed: {}", r.status().ToString());
    l.lock();
  }
}

}  // namespace framemill
