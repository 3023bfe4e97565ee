// Keeps a worker's leases alive while its batch runs: a thread renews every lease the
// worker holds every third of their length, on its own store connection, until destroyed.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include "storage/job_store.h"

namespace framemill {

class HeartbeatThread {
 public:
  // `store` (borrowed; null: no heartbeat) is used by this thread alone.
  HeartbeatThread(JobStore* store, std::string worker, int64_t lease_ms);
  ~HeartbeatThread();
  HeartbeatThread(const HeartbeatThread&) = delete;
  HeartbeatThread& operator=(const HeartbeatThread&) = delete;

 private:
  void Loop();

  JobStore* store_;
  std::string worker_;
  int64_t lease_ms_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace framemill
