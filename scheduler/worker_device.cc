#include "scheduler/worker_device.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>
#include <utility>

namespace framemill {
namespace {
constexpr int64_t kBusyRecordMs = 5'000;  // how often a device worker records its busy time
constexpr int64_t kMiB = 1 << 20;
}  // namespace

WorkerDevice::WorkerDevice(JobStore* store, const Clock* clock, const WorkerOptions* options)
    : store_(store), options_(options), ladder_(options->ladder), ledger_(options->ledger) {
  if (ladder_ == nullptr) {
    own_ladder_ = std::make_unique<gpu::CpuLadder>(clock);
    ladder_ = own_ladder_->get();
  }
}

bool WorkerDevice::MaybeJoin(WorkerStats* stats) {
  DeviceSeat* seat = options_->seat;
  if (seat == nullptr || on_device()) return false;
  const int64_t now = SteadyNowMs();
  if (seat_looked_at_ >= 0 && now - seat_looked_at_ < seat->window_ms()) return false;
  const std::optional<gpu::LedgerView> view = seat->Look();
  if (!view) return false;
  if (seat_looked_at_ >= 0) {
    const double busy = static_cast<double>(view->busy_ns - seat_busy_ns_) /
                        (static_cast<double>(now - seat_looked_at_) * 1e6);
    auto left = store_->CountOutstanding(options_->stages);
    if (busy < seat->join_below_busy() && left.ok() && left->pending > 0) {
      if (auto runtime = seat->Take()) {
        spdlog::info("{} busy {:.0f}% of the last {} ms with {} job(s) waiting: this worker joins it",
                     view->device, 100 * busy, now - seat_looked_at_, left->pending);
        Use(std::move(runtime), stats);
        return true;
      }
    }
  }
  seat_looked_at_ = now;
  seat_busy_ns_ = view->busy_ns;
  return false;
}

void WorkerDevice::Use(std::unique_ptr<GpuRuntime> runtime, WorkerStats* stats) {
  joined_ = std::move(runtime);
  ladder_ = joined_->ladder.get();
  ledger_ = joined_->ledger.get();
  recorded_peak_mb_ = -1;
  busy_from_ms_ = -1;
  RecordEvents(ladder_->stats(), /*busy_now=*/true, stats);
}

void WorkerDevice::RecordEvents(const gpu::LadderStats& before, bool busy_now, WorkerStats* stats) {
  const gpu::LadderStats& after = ladder_->stats();
  DeviceUse use;
  use.oom_events = after.oom_events - before.oom_events;
  use.cpu_fallbacks = after.cpu_fallback_items - before.cpu_fallback_items;
  bool busy_due = false;
  if (ledger_ != nullptr) {
    use.device = ledger_->device();
    use.total_mb = ledger_->total_bytes() / kMiB;
    // Rounded up, but never past the total: the ledger itself never plans past it.
    use.peak_planned_mb = std::min(use.total_mb, (ledger_->peak_seen() + kMiB - 1) / kMiB);
    // The device's busy time: where it stood when this worker joined, and now (every few
    // seconds, and when the worker ends), so a run's busy share is known while it runs.
    const int64_t now = SteadyNowMs();
    busy_due = busy_now || now - busy_recorded_at_ >= kBusyRecordMs;
    if (busy_due) {
      use.busy_to_ms = ledger_->BusyNs() / 1'000'000;
      use.busy_from_ms = busy_from_ms_ < 0 ? use.busy_to_ms : busy_from_ms_;
      busy_from_ms_ = use.busy_from_ms;
      busy_recorded_at_ = now;
    }
  }
  const bool new_peak = ledger_ != nullptr && use.peak_planned_mb > recorded_peak_mb_;
  if (use.oom_events == 0 && use.cpu_fallbacks == 0 && !new_peak && !busy_due) return;
  stats->oom_events += use.oom_events;
  stats->cpu_fallbacks += use.cpu_fallbacks;
  Status g = store_->AddGpuEvents(options_->id, use);
  if (!g.ok()) {
    spdlog::warn("could not record GPU events: {}", g.ToString());
    return;
  }
  if (ledger_ != nullptr) recorded_peak_mb_ = use.peak_planned_mb;
}

}  // namespace framemill
