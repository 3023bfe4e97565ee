// Helpers for tests that drive the real framemill binary: temp dirs, child
// processes with captured output, and real media made from Debian's sample photos.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include <opencv2/core.hpp>

namespace framemill::testing {

// The framemill binary the tests drive: FRAMEMILL_TEST_BIN when set (ctest sets it for the
// CPU-only variant's tests), else the build's own (FRAMEMILL_DEFAULT_BIN).
const char* FramemillBin();
#define FRAMEMILL_BIN ::framemill::testing::FramemillBin()

// A fresh directory removed (recursively) on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

struct ProcResult {
  int exit_code = -1;    // -1 when killed by a signal
  int term_signal = 0;
  std::string out, err;
};

// Runs argv to completion (killed after timeout_s) in `cwd` with `env` added to
// the current environment.
ProcResult RunProcess(const std::vector<std::string>& argv,
                      const std::map<std::string, std::string>& env = {},
                      const std::string& cwd = "", int timeout_s = 300);

// Starts argv in the background, stdout+stderr appended to `log`.
pid_t StartProcess(const std::vector<std::string>& argv,
                   const std::map<std::string, std::string>& env, const std::string& cwd,
                   const std::string& log);
// Waits for pid; returns its exit code, or 128+signal.
int WaitProcess(pid_t pid);
// Forks; the child runs fn and exits with its result. Returns the exit code, or -1 when
// the child did not finish within timeout_s (it is then killed). `meanwhile` runs in the
// parent with the child's pid, before the wait.
int RunInChild(const std::function<int()>& fn, int timeout_s, pid_t* child = nullptr,
               const std::function<void(pid_t)>& meanwhile = nullptr);
// Direct children of pid (from /proc).
std::vector<pid_t> ChildPids(pid_t pid);
// Whether pid is a live process (a zombie left for an init that does not reap counts as
// dead); whether it is stopped (SIGSTOP has taken effect).
bool Alive(pid_t pid);
bool Stopped(pid_t pid);
// Sends sig to pid's direct children first (a run's workers), then to pid.
void SignalTree(pid_t pid, int sig);
// SIGSTOPs pid and its direct children and waits (up to 30 s) until the kernel shows
// every one stopped: from then on nothing they hold can change, heartbeats included.
bool FreezeTree(pid_t pid);
// Asks `done` every 10 ms until it holds or timeout_s passes; whether it held. For
// waiting on an event (a lease taken, a line logged), with a timeout that only a
// broken program reaches, never for letting time pass.
// A loopback TCP port that was free a moment ago (0 when none could be bound).
int FreePort();
bool WaitUntil(const std::function<bool()>& done, double timeout_s = 60);
// Waits until none of `pids` is Alive(); whether that came within timeout_s.
bool WaitUntilGone(const std::vector<pid_t>& pids, double timeout_s = 60);
// pid and its direct children, comma-separated: an SQL list for workers.pid IN (...).
std::string TreePids(pid_t pid);

// Path of the sample data shipped by Debian's opencv-doc.
std::string SampleData(const std::string& name);
// A sample file shipped by Debian's python3-imageio (cockatoo.mp4, realshort.mp4).
std::string ImageioData(const std::string& name);
// Writes `count` distinct real images (crops/scales/flips of the sample photos,
// JPEG and PNG) of at most max_side pixels into dir; returns their paths.
std::vector<std::string> MakeRealImages(const std::string& dir, int count, int max_side);

// A camera filming a large real photo, with motion known exactly (the motion tests'
// and bench's ground truth). Per frame the view travels `velocity` photo px, zooms in by
// `zoom` and turns `turn_deg` clockwise on screen, plus a uniform random shake of up to
// `shake_px` about its path.
struct SyntheticCamera {
  cv::Point2d velocity{0, 0};
  double zoom = 1, turn_deg = 0, shake_px = 0;
};
// `frames` views of `view` size, starting centred on the photo.
std::vector<cv::Mat> FilmPhoto(const cv::Mat& photo, const SyntheticCamera& camera, cv::Size view,
                               int frames);
// Copies the first `fraction` of src to dst.
void WriteTruncated(const std::string& src, const std::string& dst, double fraction);
std::string ReadFile(const std::string& path);
void WriteFile(const std::string& path, const std::string& bytes);

// One integer from a query on the SQLite file at db.
long long QueryInt(const std::string& db, const std::string& sql);
// Jobs leased now (state 1) to the workers of process pid: pid itself or its direct
// children (`run`'s supervisor and its workers). SQLite file or PostgreSQL URI.
long long LeasesHeldBy(const std::string& db, pid_t pid);
// Freezes pid and its children (FreezeTree) at a moment they hold leases, trying again
// after a SIGCONT when they were caught between batches; the leases cannot change while
// they are stopped. Sets *held to their number; false when none was caught in timeout_s.
bool FreezeHoldingLeases(const std::string& db, pid_t pid, long long* held,
                         double timeout_s = 60);
// Rows of a query as strings, columns joined by '|'.
std::vector<std::string> QueryRows(const std::string& db, const std::string& sql);

}  // namespace framemill::testing
