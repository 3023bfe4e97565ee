// One device's memory, shared knowingly by every process of a machine that uses it: a
// small table in a file (under /dev/shm by default) that each worker process on the
// device joins. It holds the device's total, each member's planned bytes (the memory it
// has reserved and not yet released) and the most planned at once. A reservation that
// would take all members together past the total is refused (OutOfMemory), checked and
// written under one flock, so the members never plan more than the device has. Each
// member plans within its share: the total split evenly among the live members, split
// again as workers come and go. A member that dies without leaving is reaped by the
// next process that takes the lock (its pid is gone or names another process), with
// what it had planned: the driver frees a dead process's device memory.
//
// The simulated device's VRAM is this ledger's total: several `framemill run` workers on
// `GPU_BACKEND=sim` share one budget, as they would share a card.
// Thread-safety: one thread per process uses a ledger (a worker's device thread).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace framemill::gpu {

struct LedgerMember {
  int pid = 0;
  int64_t planned_bytes = 0;  // reserved now
};

// `bytes` as "12 MiB" (rounded up), for the messages of a device's memory.
std::string MiBText(int64_t bytes);

// What `framemill gpu` shows: the ledger as it stands, without joining it.
struct LedgerView {
  std::string device;
  int64_t total_bytes = 0;
  int64_t planned_bytes = 0;       // all members together, now
  int64_t peak_planned_bytes = 0;  // the most at once since the ledger was last empty
  int64_t busy_ns = 0;  // how long any member had a batch on the device, since last empty
  std::vector<LedgerMember> members;
  int64_t ShareBytes() const {
    return members.empty() ? total_bytes : total_bytes / static_cast<int64_t>(members.size());
  }
};

class DeviceLedger {
 public:
  // The most members one ledger holds (a device worker per member).
  static constexpr int kMaxMembers = 64;

  // Joins the ledger of `device` ("sim:0", "cuda:0") in `dir`, creating it when absent,
  // with the device's `total_bytes` (members already there keep theirs). Busy when
  // `max_members` processes are already on it: this process should use the CPU.
  static Result<std::unique_ptr<DeviceLedger>> Join(const std::string& dir,
                                                   const std::string& device,
                                                   int64_t total_bytes, int max_members);
  // A ledger of this process alone (an anonymous file): a device nobody else shares,
  // for tools and tests that make a backend outside `framemill run`.
  static std::unique_ptr<DeviceLedger> Private(const std::string& device, int64_t total_bytes);
  // The ledger of `device` in `dir` as it stands (dead members left out); nullopt when
  // no process has opened it.
  static Result<std::optional<LedgerView>> Read(const std::string& dir, const std::string& device);
  // The directory ledgers live in when none is configured: /dev/shm, else /tmp.
  static std::string DefaultDir();

  ~DeviceLedger();  // leaves: what this member had planned is released
  DeviceLedger(const DeviceLedger&) = delete;
  DeviceLedger& operator=(const DeviceLedger&) = delete;

  // Plans `bytes` more for this member; OutOfMemory, naming `what`, when all members
  // together would pass the total.
  Status Reserve(int64_t bytes, const std::string& what);
  void Release(int64_t bytes);

  const std::string& device() const { return device_; }
  int64_t total_bytes() const;
  int64_t planned_bytes() const { return mine_; }  // this member's
  // What this member may plan: its share, less what it already has planned (>= 0).
  int64_t Available();
  // The most planned on the device at once that this member has seen: after each of its
  // reservations, all members together. A run's peak is the largest of its workers'.
  int64_t peak_seen() const { return peak_seen_; }
  // Marks this member as having a batch on the device (true) or not. The device is busy
  // while any member is working: its busy time (BusyNs) is the union of its members'
  // batches, counted once however many overlap (CLOCK_MONOTONIC, ns since the ledger was
  // last empty). A run's busy share is the growth of BusyNs over the run's wall time.
  void SetWorking(bool working);
  int64_t BusyNs();
  LedgerView View();

 private:
  struct Table;
  static LedgerView ViewOf(const Table& t, const std::string& device);
  DeviceLedger(std::string device, int fd, Table* table, int slot);
  class Locked;

  std::string device_;
  int fd_ = -1;
  Table* table_ = nullptr;
  int slot_ = -1;
  int64_t mine_ = 0;
  int64_t peak_seen_ = 0;
};

// A reservation released when it goes out of scope.
class Reservation {
 public:
  Reservation() = default;
  static Result<Reservation> Take(DeviceLedger* ledger, int64_t bytes, const std::string& what);
  Reservation(Reservation&& o) noexcept { *this = std::move(o); }
  Reservation& operator=(Reservation&& o) noexcept;
  ~Reservation();

 private:
  DeviceLedger* ledger_ = nullptr;
  int64_t bytes_ = 0;
};

}  // namespace framemill::gpu
