// `run --metrics ADDR` (FRAMEMILL_METRICS): the run's Prometheus endpoint, one per machine,
// served at http://ADDR/metrics by the supervisor while the run lasts (prometheus-cpp's
// Exposer, on its own threads). What it shows:
//   framemill_jobs{stage,state}                      the store's jobs (every machine's)
//   framemill_job_seconds{stage,device}              a histogram of the jobs run here
//   framemill_claims_total, framemill_claimed_jobs_total   this machine's claims
//   framemill_lease_rescues_total                    leases rescued in the store since the run began
//   framemill_workers                                this run's live worker processes
//   framemill_device_workers{device}                 of them, those on each device
//   framemill_device_memory_bytes{device,kind}       kind="planned" (now) or "total"
//   framemill_device_busy_ratio{device}              busy share since the run began
//   framemill_device_busy_seconds_total{device}      (rate() of it: the share over any window)
//   framemill_oom_events_total{device}, framemill_cpu_fallbacks_total{device}
// The store is read by the supervisor's thread (Refresh, at most once a second); a scrape
// reads the last snapshot and the workers' shared counters, never the store.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "jobs/clip_totals.h"
#include "scheduler/run_counters.h"
#include "storage/job_store.h"

namespace prometheus {
class Exposer;
}

namespace framemill {

struct DeviceSnapshot;

class MetricsServer {
 public:
  // Listens on `addr` ("127.0.0.1:9464", ":9464"; port 0: any free one). `counters` (may be
  // null) outlives the server.
  static Result<std::unique_ptr<MetricsServer>> Start(const std::string& addr,
                                                      const RunCounters* counters,
                                                      std::string ledger_dir);
  ~MetricsServer();

  // Reads the store for run `run_id` when the last read is a second old; from the
  // supervisor's thread. `live_workers`: its worker processes now.
  void Refresh(JobStore* store, int64_t run_id, int live_workers);
  // Where it listens: "127.0.0.1:PORT" with the port it got.
  std::string address() const;

  struct Snapshot;
  class Collector;

 private:
  MetricsServer() = default;
  // A device of the run as its ledger stands now; its busy time counted from the first look.
  DeviceSnapshot Device(const RunDevice& d, int64_t now_ms);

  struct Busy {
    int64_t since_ms = 0, last_ns = 0, total_ns = 0;
  };
  std::map<std::string, Busy> busy_;  // by device
  std::string host_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::shared_ptr<Collector> collector_;
  std::string ledger_dir_;
  int64_t refreshed_ms_ = -1;
  ClipCounter clips_;  // parses each clips result once, as its job finishes
};

}  // namespace framemill
