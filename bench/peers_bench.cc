// framemill against the plain Python baselines a user would otherwise write
// (../shared/peers/, each a multiprocessing.Pool(2) doing a stage's per-item work), after
// leveldb's db_bench: a plain executable that prints its setup, then one line per run and
// the paired ratios. Whole processes are timed; the two sides alternate run by run (one
// rep A then B, the next B then A) so that a drift of the shared machine hits both; the
// ratio is taken pair by pair and its median printed. It measures only.
//
//   peers_bench [--benchmarks=motion_videos,lighting_photos] [--reps=3] [--photos=600]
//               [--peers=../shared/peers] [--python=/usr/bin/python3] [--framemill=PATH]
//
//   motion_videos    vtest.avi, Megamind.avi, Megamind_bugy.avi (opencv-doc) and
//                    cockatoo.mp4 (python3-imageio): `framemill enqueue --stages motion` and
//                    `run --workers 2` (a fresh store each time, so no cost history) against
//                    py_pool_motion.py; with how many jobs each worker did
//   lighting_photos  make_photo_set.py's --photos JPEGs: `enqueue --stages lighting` and
//                    `run --workers 2` against py_pool_lighting.py and decode_floor.py
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "bench/bench_support.h"
#include "tests/support/test_support.h"

namespace framemill {
namespace {

namespace fs = std::filesystem;

struct Flags {
  std::string benchmarks = "motion_videos,lighting_photos";
  int reps = 3;
  int photos = 600;
  std::string peers = FRAMEMILL_SOURCE_DIR "/../shared/peers";
  std::string python = "/usr/bin/python3";
  std::string framemill = FRAMEMILL_DEFAULT_BIN;
};

struct Timed {
  double wall_s = 0, cpu_s = 0;
  bool ok = false;
  std::string note;
};

double ChildrenCpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_CHILDREN, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

Timed Time(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env = {}) {
  const double cpu0 = ChildrenCpuSeconds();
  const auto t0 = std::chrono::steady_clock::now();
  const testing::ProcResult r = testing::RunProcess(argv, env, "", 1800);
  Timed t;
  t.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  t.cpu_s = ChildrenCpuSeconds() - cpu0;
  t.ok = r.exit_code == 0;
  if (!t.ok) t.note = "exit " + std::to_string(r.exit_code) + ": " + r.err.substr(0, 300);
  return t;
}

// One framemill run of `stage` over `dir` in a fresh store; note: jobs done per worker.
Timed RunFramemill(const Flags& f, const std::string& stage, const std::string& dir, const std::string& work) {
  fs::remove_all(work);
  fs::create_directories(work);
  const std::map<std::string, std::string> env = {{"FRAMEMILL_DB", work + "/fm.db"}, {"FRAMEMILL_OUT", work + "/out"}};
  const testing::ProcResult e = testing::RunProcess({f.framemill, "enqueue", "--stages", stage, dir}, env);
  if (e.exit_code != 0) return {0, 0, false, "enqueue: " + e.err.substr(0, 300)};
  Timed t = Time({f.framemill, "run", "--workers", "2"}, env);
  if (t.ok) {
    for (const std::string& n : testing::QueryRows(work + "/fm.db", "SELECT jobs_done FROM workers ORDER BY id"))
      t.note += (t.note.empty() ? "jobs per worker: " : ", ") + n;
  }
  return t;
}

void Print(const char* what, int rep, const Timed& t) {
  std::printf("%-34s rep %d: %7.2f s wall, %7.2f s CPU%s%s\n", what, rep, t.wall_s, t.cpu_s,
              t.note.empty() ? "" : "  ", t.note.c_str());
  std::fflush(stdout);
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void MotionVideos(const Flags& f, const std::string& tmp) {
  const std::string dir = tmp + "/videos";
  fs::create_directories(dir);
  for (const std::string& v : {testing::SampleData("vtest.avi"), testing::SampleData("Megamind.avi"),
                               testing::SampleData("Megamind_bugy.avi"), testing::ImageioData("cockatoo.mp4")})
    fs::copy_file(v, dir + "/" + fs::path(v).filename().string(), fs::copy_options::overwrite_existing);
  std::vector<double> wall, cpu;
  for (int rep = 0; rep < f.reps; ++rep) {
    Timed fm, py;
    auto run_fm = [&] { fm = RunFramemill(f, "motion", dir, tmp + "/fm-motion"); };
    auto run_py = [&] { py = Time({f.python, f.peers + "/py_pool_motion.py", dir, tmp + "/py-motion.jsonl"}); };
    if (rep % 2 == 0) run_fm(), run_py(); else run_py(), run_fm();
    Print("motion_videos framemill", rep, fm);
    Print("motion_videos py_pool_motion", rep, py);
    if (fm.ok && py.ok) wall.push_back(fm.wall_s / py.wall_s), cpu.push_back(fm.cpu_s / py.cpu_s);
  }
  std::printf("motion_videos: framemill / python, median of %zu pairs: wall %.2fx, CPU %.2fx\n", wall.size(),
              Median(wall), Median(cpu));
}

void LightingPhotos(const Flags& f, const std::string& tmp) {
  const std::string dir = tmp + "/photos";
  const testing::ProcResult made =
      testing::RunProcess({f.python, f.peers + "/make_photo_set.py", dir, std::to_string(f.photos)});
  if (made.exit_code != 0) {
    std::printf("lighting_photos: make_photo_set.py failed: %s\n", made.err.substr(0, 300).c_str());
    return;
  }
  std::vector<double> vs_pool, vs_floor;
  for (int rep = 0; rep < f.reps; ++rep) {
    Timed fm, py, floor;
    auto run_fm = [&] { fm = RunFramemill(f, "lighting", dir, tmp + "/fm-lighting"); };
    auto run_py = [&] {
      fs::remove(tmp + "/py-lighting.jsonl");
      py = Time({f.python, f.peers + "/py_pool_lighting.py", dir, tmp + "/py-lighting.jsonl", "2"});
    };
    auto run_floor = [&] { floor = Time({f.python, f.peers + "/decode_floor.py", dir}); };
    if (rep % 2 == 0) run_fm(), run_py(), run_floor(); else run_floor(), run_py(), run_fm();
    Print("lighting_photos framemill", rep, fm);
    Print("lighting_photos py_pool_lighting", rep, py);
    Print("lighting_photos decode_floor", rep, floor);
    if (fm.ok && py.ok && floor.ok) vs_pool.push_back(fm.wall_s / py.wall_s), vs_floor.push_back(fm.wall_s / floor.wall_s);
  }
  std::printf("lighting_photos: framemill wall, median of %zu runs: %.2fx the Python lighting pool, %.2fx the decode floor\n",
              vs_pool.size(), Median(vs_pool), Median(vs_floor));
}

int Main(int argc, char** argv) {
  Flags f;
  if (!bench::ParseFlags("peers_bench", argc, argv,
                         {{"--benchmarks=", &f.benchmarks}, {"--reps=", &f.reps, 1},
                          {"--photos=", &f.photos, 1}, {"--peers=", &f.peers},
                          {"--python=", &f.python}, {"--framemill=", &f.framemill}}))
    return 2;
  testing::TempDir tmp;
  std::printf("peers_bench: %s against %s (%s); %d rep(s), sides alternating; 2 workers / Pool(2)\n",
              f.framemill.c_str(), f.peers.c_str(), f.python.c_str(), f.reps);
  std::printf("------------------------------------------------------------------\n");
  if (bench::Listed(f.benchmarks, "motion_videos")) MotionVideos(f, tmp.path());
  if (bench::Listed(f.benchmarks, "lighting_photos")) LightingPhotos(f, tmp.path());
  return 0;
}

}  // namespace
}  // namespace framemill

int main(int argc, char** argv) { return framemill::Main(argc, argv); }
