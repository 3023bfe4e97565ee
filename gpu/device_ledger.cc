#include "gpu/device_ledger.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "base/time_split.h"

namespace framemill::gpu {
namespace {

constexpr uint64_t kMagic = 0x72656764656c6d66ULL;  // "fmledger"
constexpr uint32_t kVersion = 2;  // 2: the busy time

}  // namespace

// One member's row of the shared table. Not in the anonymous namespace: DeviceLedger::Table,
// declared in the header, holds it (GCC's -Wsubobject-linkage in a unity build).
struct LedgerSlot {
  int32_t pid;
  int32_t working;     // 1 while this member has a batch on the device
  int64_t start_time;  // the process's start (clock ticks since boot): a reused pid differs
  int64_t planned;
};

namespace {

// CLOCK_MONOTONIC, the same for every process of the machine.
int64_t MonotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// A process's start time and whether it is a zombie, from /proc/<pid>/stat; nullopt when
// there is no such process.
struct ProcState {
  int64_t start_time = 0;
  bool zombie = false;
};
std::optional<ProcState> ReadProc(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return std::nullopt;
  const size_t paren = line.rfind(')');  // the command name may hold spaces and parentheses
  if (paren == std::string::npos) return std::nullopt;
  std::istringstream fields(line.substr(paren + 2));
  std::string field;
  ProcState s;
  for (int i = 3; fields >> field; ++i) {  // field 3 is the state, 22 the start time
    if (i == 3) s.zombie = field == "Z" || field == "X";
    if (i == 22) {
      s.start_time = std::stoll(field);
      return s;
    }
  }
  return std::nullopt;
}

bool Live(const LedgerSlot& s) {
  if (s.pid <= 0) return false;
  auto p = ReadProc(s.pid);
  return p && !p->zombie && p->start_time == s.start_time;
}

}  // namespace

std::string MiBText(int64_t bytes) { return std::to_string((bytes + (1 << 20) - 1) >> 20) + " MiB"; }

namespace {

std::string FileName(const std::string& device) {
  std::string name = "framemill-" + std::to_string(getuid()) + "-";
  for (char c : device) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '-';
  return name + ".ledger";
}

}  // namespace

struct DeviceLedger::Table {
  uint64_t magic;
  uint32_t version;
  uint32_t unused;
  int64_t total;
  int64_t peak;
  LedgerSlot slots[kMaxMembers];
  // The device's busy time: the nanoseconds in which at least one member had a batch on it,
  // closed intervals summed, and the start of the open one (when any member is working).
  int64_t busy_ns;
  int64_t busy_since_ns;

  int64_t Planned() const {
    int64_t sum = 0;
    for (const LedgerSlot& s : slots)
      if (s.pid > 0) sum += s.planned;
    return sum;
  }
  int Members() const {
    return static_cast<int>(std::count_if(std::begin(slots), std::end(slots),
                                          [](const LedgerSlot& s) { return s.pid > 0; }));
  }
  bool Working() const {
    return std::any_of(std::begin(slots), std::end(slots),
                       [](const LedgerSlot& s) { return s.pid > 0 && s.working != 0; });
  }
  // Marks a member working or not, and closes the busy interval when none is left working.
  void SetWorking(LedgerSlot& s, bool working, int64_t now) {
    const bool was = Working();
    s.working = working ? 1 : 0;
    if (!was && Working()) busy_since_ns = now;
    if (was && !Working()) busy_ns += std::max<int64_t>(0, now - busy_since_ns);
  }
  int64_t BusyNs(int64_t now) const {
    return busy_ns + (Working() ? std::max<int64_t>(0, now - busy_since_ns) : 0);
  }
  // Frees the slots of processes that are gone; their device memory went with them, and a
  // batch they had on the device ended with them.
  void Reap() {
    for (LedgerSlot& s : slots) {
      if (s.pid <= 0 || Live(s)) continue;
      SetWorking(s, false, MonotonicNs());
      s = LedgerSlot{};
    }
  }
};

// The live members of `t` (a dead one is left out, as Reap would free it), with their sums.
LedgerView DeviceLedger::ViewOf(const Table& t, const std::string& device) {
  LedgerView v;
  v.device = device;
  v.total_bytes = t.total;
  v.peak_planned_bytes = t.peak;
  v.busy_ns = t.BusyNs(MonotonicNs());
  for (const LedgerSlot& s : t.slots) {
    if (!Live(s)) continue;
    v.members.push_back({s.pid, s.planned});
    v.planned_bytes += s.planned;
  }
  return v;
}

// The ledger's lock for one operation (flock: released by the kernel if the holder dies).
class DeviceLedger::Locked {
 public:
  Locked(int fd, int how) : fd_(fd) {
    TimeSpent waiting(TimePart::kWait);  // for the device's other workers
    while (flock(fd_, how) != 0 && errno == EINTR) {
    }
  }
  ~Locked() { flock(fd_, LOCK_UN); }

 private:
  int fd_;
};

DeviceLedger::DeviceLedger(std::string device, int fd, Table* table, int slot)
    : device_(std::move(device)), fd_(fd), table_(table), slot_(slot) {}

namespace {

// Maps `fd` (at least sizeof(Table) long once grown), or null.
template <class T>
T* MapTable(int fd, bool writable) {
  void* p = mmap(nullptr, sizeof(T), writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED,
                 fd, 0);
  return p == MAP_FAILED ? nullptr : static_cast<T*>(p);
}

}  // namespace

Result<std::unique_ptr<DeviceLedger>> DeviceLedger::Join(const std::string& dir,
                                                         const std::string& device,
                                                         int64_t total_bytes, int max_members) {
  const std::string path = dir + "/" + FileName(device);
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0)
    return Status::IOError("cannot open the device ledger " + path + ": " + std::strerror(errno));
  Table* t = nullptr;
  int slot = -1;
  {
    Locked lock(fd, LOCK_EX);
    struct stat st {};
    if (fstat(fd, &st) != 0 || (st.st_size < static_cast<off_t>(sizeof(Table)) &&
                                ftruncate(fd, sizeof(Table)) != 0)) {
      const int e = errno;
      close(fd);
      return Status::IOError("cannot size the device ledger " + path + ": " + std::strerror(e));
    }
    t = MapTable<Table>(fd, true);
    if (t == nullptr) {
      const int e = errno;
      close(fd);
      return Status::IOError("cannot map the device ledger " + path + ": " + std::strerror(e));
    }
    if (t->magic == kMagic && t->version == kVersion) t->Reap();
    if (t->magic != kMagic || t->version != kVersion || t->Members() == 0) {
      std::memset(static_cast<void*>(t), 0, sizeof(Table));
      t->magic = kMagic;
      t->version = kVersion;
      t->total = total_bytes;
    }
    const int members = t->Members();
    if (members >= std::min(max_members, kMaxMembers)) {
      munmap(t, sizeof(Table));
      close(fd);
      return Status::Busy(device + " already has " + std::to_string(members) +
                          " worker process(es), its most (gpu.workers_per_device)");
    }
    for (int i = 0; i < kMaxMembers; ++i) {
      if (t->slots[i].pid > 0) continue;
      auto me = ReadProc(getpid());
      t->slots[i] = LedgerSlot{getpid(), 0, me ? me->start_time : 0, 0};
      slot = i;
      break;
    }
  }
  return std::unique_ptr<DeviceLedger>(new DeviceLedger(device, fd, t, slot));
}

std::unique_ptr<DeviceLedger> DeviceLedger::Private(const std::string& device,
                                                    int64_t total_bytes) {
  // An unlinked file of this process: the same code, no one else can find it.
  const int fd = memfd_create("framemill-ledger", MFD_CLOEXEC);
  if (fd >= 0 && ftruncate(fd, sizeof(Table)) == 0) {
    if (Table* t = MapTable<Table>(fd, true); t != nullptr) {
      t->magic = kMagic;
      t->version = kVersion;
      t->total = total_bytes;
      auto me = ReadProc(getpid());
      t->slots[0] = LedgerSlot{getpid(), 0, me ? me->start_time : 0, 0};
      return std::unique_ptr<DeviceLedger>(new DeviceLedger(device, fd, t, 0));
    }
  }
  std::abort();  // memfd_create and mmap of one page: only a broken kernel refuses them
}

Result<std::optional<LedgerView>> DeviceLedger::Read(const std::string& dir,
                                                     const std::string& device) {
  const std::string path = dir + "/" + FileName(device);
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return std::optional<LedgerView>();
    return Status::IOError("cannot open the device ledger " + path + ": " + std::strerror(errno));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(sizeof(Table))) {
    close(fd);
    return std::optional<LedgerView>();
  }
  const Table* t = MapTable<const Table>(fd, false);
  if (t == nullptr) {
    close(fd);
    return Status::IOError("cannot map the device ledger " + path);
  }
  LedgerView v;
  v.device = device;
  {
    Locked lock(fd, LOCK_SH);
    if (t->magic == kMagic && t->version == kVersion) v = ViewOf(*t, device);
  }
  munmap(const_cast<Table*>(t), sizeof(Table));
  close(fd);
  return std::optional<LedgerView>(std::move(v));
}

std::string DeviceLedger::DefaultDir() {
  struct stat st {};
  return stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) && access("/dev/shm", W_OK) == 0
             ? "/dev/shm"
             : "/tmp";
}

DeviceLedger::~DeviceLedger() {
  {
    Locked lock(fd_, LOCK_EX);
    LedgerSlot& s = table_->slots[slot_];
    if (s.pid == getpid()) {
      table_->SetWorking(s, false, MonotonicNs());
      s = LedgerSlot{};
    }
  }
  munmap(table_, sizeof(Table));
  close(fd_);
}

int64_t DeviceLedger::total_bytes() const { return table_->total; }

Status DeviceLedger::Reserve(int64_t bytes, const std::string& what) {
  if (bytes <= 0) return Status::OK();
  Locked lock(fd_, LOCK_EX);
  table_->Reap();
  const int64_t planned = table_->Planned();
  if (planned + bytes > table_->total) {
    return Status::OutOfMemory(device_ + ": " + what + " needs " + MiBText(bytes) + ", " +
                               MiBText(table_->total - planned) + " of " + MiBText(table_->total) +
                               " free (" + std::to_string(table_->Members()) +
                               " worker process(es) share it)");
  }
  table_->slots[slot_].planned += bytes;
  mine_ += bytes;
  table_->peak = std::max(table_->peak, planned + bytes);
  peak_seen_ = std::max(peak_seen_, planned + bytes);
  return Status::OK();
}

void DeviceLedger::Release(int64_t bytes) {
  bytes = std::min(bytes, mine_);
  if (bytes <= 0) return;
  Locked lock(fd_, LOCK_EX);
  LedgerSlot& s = table_->slots[slot_];
  s.planned = std::max<int64_t>(0, s.planned - bytes);
  mine_ -= bytes;
}

int64_t DeviceLedger::Available() {
  Locked lock(fd_, LOCK_EX);
  table_->Reap();
  const int members = std::max(1, table_->Members());
  const int64_t share = table_->total / members - mine_;
  const int64_t free = table_->total - table_->Planned();
  return std::max<int64_t>(0, std::min(share, free));
}

void DeviceLedger::SetWorking(bool working) {
  Locked lock(fd_, LOCK_EX);
  table_->SetWorking(table_->slots[slot_], working, MonotonicNs());
}

int64_t DeviceLedger::BusyNs() {
  Locked lock(fd_, LOCK_SH);
  return table_->BusyNs(MonotonicNs());
}

LedgerView DeviceLedger::View() {
  Locked lock(fd_, LOCK_SH);
  return ViewOf(*table_, device_);
}

Result<Reservation> Reservation::Take(DeviceLedger* ledger, int64_t bytes, const std::string& what) {
  FM_RETURN_IF_ERROR(ledger->Reserve(bytes, what));
  Reservation r;
  r.ledger_ = ledger;
  r.bytes_ = bytes;
  return r;
}

Reservation& Reservation::operator=(Reservation&& o) noexcept {
  if (this != &o) {
    if (ledger_ != nullptr) ledger_->Release(bytes_);
    ledger_ = std::exchange(o.ledger_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

Reservation::~Reservation() {
  if (ledger_ != nullptr) ledger_->Release(bytes_);
}

}  // namespace framemill::gpu
