#include "tests/support/test_support.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <libpq-fe.h>
#include <sqlite3.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

extern char** environ;

namespace framemill::testing {
namespace fs = std::filesystem;

TempDir::TempDir() {
  std::string tmpl = (fs::temp_directory_path() / "framemill-test-XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}
TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

namespace {
std::vector<std::string> Environment(const std::map<std::string, std::string>& extra) {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv(*e);
    size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  // Each test process gets device ledgers of its own: simulated devices of tests that ctest
  // runs at once are different cards, not one card shared (gpu/device_ledger.h).
  static const TempDir ledgers;
  env.try_emplace("FRAMEMILL_DEVICE_LEDGER_DIR", ledgers.path());
  for (const auto& [k, v] : extra) env[k] = v;
  std::vector<std::string> out;
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

[[noreturn]] void Exec(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                       const std::string& cwd) {
  if (!cwd.empty() && chdir(cwd.c_str()) != 0) _exit(126);
  std::vector<char*> a, e;
  for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
  a.push_back(nullptr);
  for (const auto& s : env) e.push_back(const_cast<char*>(s.c_str()));
  e.push_back(nullptr);
  execve(a[0], a.data(), e.data());
  _exit(127);
}

// Forks `argv` with stdout to `out`, stderr to `err` (the same file, appended to, where
// they are one), stdin from /dev/null.
pid_t Spawn(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
            const std::string& cwd, const std::string& out, const std::string& err) {
  auto envv = Environment(env);
  const bool one = out == err;
  pid_t pid = fork();
  if (pid == 0) {
    const int flags = O_WRONLY | O_CREAT | (one ? O_APPEND : O_TRUNC);
    int o = open(out.c_str(), flags, 0644);
    dup2(o, 1);
    dup2(one ? o : open(err.c_str(), flags, 0644), 2);
    int devnull = open("/dev/null", O_RDONLY);
    dup2(devnull, 0);
    Exec(argv, envv, cwd);
  }
  return pid;
}
}  // namespace

ProcResult RunProcess(const std::vector<std::string>& argv,
                      const std::map<std::string, std::string>& env, const std::string& cwd,
                      int timeout_s) {
  TempDir tmp;
  std::string out = tmp / "out", err = tmp / "err";
  const pid_t pid = Spawn(argv, env, cwd, out, err);
  ProcResult r;
  int status = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  for (;;) {
    pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.term_signal = WTERMSIG(status);
  r.out = ReadFile(out);
  r.err = ReadFile(err);
  return r;
}

pid_t StartProcess(const std::vector<std::string>& argv,
                   const std::map<std::string, std::string>& env, const std::string& cwd,
                   const std::string& log) {
  return Spawn(argv, env, cwd, log, log);
}

int RunInChild(const std::function<int()>& fn, int timeout_s, pid_t* child,
               const std::function<void(pid_t)>& meanwhile) {
  pid_t pid = fork();
  if (pid == 0) _exit(fn());
  if (child != nullptr) *child = pid;
  if (meanwhile) meanwhile(pid);
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  while (std::chrono::steady_clock::now() < until) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid)
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  return -1;
}

int WaitProcess(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + WTERMSIG(status);
}

std::vector<pid_t> ChildPids(pid_t pid) {
  std::vector<pid_t> out;
  std::ifstream f("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
  pid_t c;
  while (f >> c) out.push_back(c);
  return out;
}

namespace {
char ProcState(pid_t pid) {
  const std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos || paren + 2 >= stat.size()) return 'X';
  return stat[paren + 2];
}
}  // namespace

bool Alive(pid_t pid) {
  const char state = ProcState(pid);
  return state != 'Z' && state != 'X';
}

bool Stopped(pid_t pid) { return ProcState(pid) == 'T'; }

void SignalTree(pid_t pid, int sig) {
  for (pid_t child : ChildPids(pid)) kill(child, sig);
  kill(pid, sig);
}

bool FreezeTree(pid_t pid) {
  std::vector<pid_t> tree = ChildPids(pid);
  tree.push_back(pid);
  for (pid_t p : tree) kill(p, SIGSTOP);
  return WaitUntil([&] {
    for (pid_t p : tree)
      if (Alive(p) && !Stopped(p)) return false;
    return true;
  }, 30);
}

int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

bool WaitUntil(const std::function<bool()>& done, double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  for (;;) {
    if (done()) return true;
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

bool WaitUntilGone(const std::vector<pid_t>& pids, double timeout_s) {
  return WaitUntil([&] {
    for (pid_t p : pids)
      if (Alive(p)) return false;
    return true;
  }, timeout_s);
}

std::string TreePids(pid_t pid) {
  std::string pids = std::to_string(pid);
  for (pid_t child : ChildPids(pid)) pids += "," + std::to_string(child);
  return pids;
}

const char* FramemillBin() {
  static const std::string bin = [] {
    const char* e = std::getenv("FRAMEMILL_TEST_BIN");
    return std::string(e != nullptr && *e != '\0' ? e : FRAMEMILL_DEFAULT_BIN);
  }();
  return bin.c_str();
}

std::string SampleData(const std::string& name) {
  return "/usr/share/doc/opencv-doc/examples/data/" + name;
}

std::string ImageioData(const std::string& name) {
  return "/usr/lib/python3/dist-packages/imageio/resources/images/" + name;
}

std::vector<std::string> MakeRealImages(const std::string& dir, int count, int max_side) {
  const char* photos[] = {"messi5.jpg", "baboon.jpg", "fruits.jpg", "building.jpg",
                          "orange.jpg", "apple.jpg",  "home.jpg",   "starry_night.jpg",
                          "leuvenA.jpg", "aero1.jpg", "HappyFish.jpg", "smarties.png"};
  std::vector<cv::Mat> src;
  for (const char* p : photos) {
    cv::Mat m = cv::imread(SampleData(p));
    if (!m.empty()) src.push_back(m);
  }
  if (src.empty()) throw std::runtime_error("opencv-doc sample photos missing");
  std::mt19937 rng(1234);
  std::vector<std::string> paths;
  fs::create_directories(dir);
  for (int i = 0; i < count; ++i) {
    const cv::Mat& m = src[i % src.size()];
    std::uniform_real_distribution<double> frac(0.5, 1.0);
    int w = std::max(16, static_cast<int>(m.cols * frac(rng)));
    int h = std::max(16, static_cast<int>(m.rows * frac(rng)));
    int x = std::uniform_int_distribution<int>(0, m.cols - w)(rng);
    int y = std::uniform_int_distribution<int>(0, m.rows - h)(rng);
    cv::Mat crop = m(cv::Rect(x, y, w, h)).clone();
    double scale = std::min(1.0, static_cast<double>(max_side) / std::max(w, h));
    if (scale < 1.0) cv::resize(crop, crop, cv::Size(), scale, scale, cv::INTER_AREA);
    if (i % 3 == 1) cv::flip(crop, crop, 1);
    std::string path = dir + "/img-" + std::to_string(i) + (i % 4 == 0 ? ".png" : ".jpg");
    cv::imwrite(path, crop);
    paths.push_back(path);
  }
  return paths;
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f << bytes;
}

void WriteTruncated(const std::string& src, const std::string& dst, double fraction) {
  std::string b = ReadFile(src);
  WriteFile(dst, b.substr(0, static_cast<size_t>(b.size() * fraction)));
}

namespace {
// The same rows from a PostgreSQL store (FRAMEMILL_DB set to a URI).
std::vector<std::string> QueryPgRows(const std::string& uri, const std::string& sql) {
  PGconn* c = PQconnectdb(uri.c_str());
  if (PQstatus(c) != CONNECTION_OK) {
    std::string e = PQerrorMessage(c);
    PQfinish(c);
    throw std::runtime_error("cannot connect to " + uri + ": " + e);
  }
  PGresult* r = PQexec(c, sql.c_str());
  if (PQresultStatus(r) != PGRES_TUPLES_OK) {
    std::string e = PQresultErrorMessage(r);
    PQclear(r);
    PQfinish(c);
    throw std::runtime_error("bad query: " + e + ": " + sql);
  }
  std::vector<std::string> rows;
  for (int i = 0; i < PQntuples(r); ++i) {
    std::string row;
    for (int col = 0; col < PQnfields(r); ++col)
      row += (col ? "|" : "") + std::string(PQgetisnull(r, i, col) ? "NULL" : PQgetvalue(r, i, col));
    rows.push_back(row);
  }
  PQclear(r);
  PQfinish(c);
  return rows;
}
}  // namespace

std::vector<std::string> QueryRows(const std::string& db, const std::string& sql) {
  if (db.rfind("postgresql://", 0) == 0) return QueryPgRows(db, sql);
  sqlite3* h = nullptr;
  std::vector<std::string> rows;
  if (sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK)
    throw std::runtime_error("cannot open " + db);
  sqlite3_busy_timeout(h, 10'000);
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(h, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) {
    std::string e = sqlite3_errmsg(h);
    sqlite3_close(h);
    throw std::runtime_error("bad query: " + e + ": " + sql);
  }
  while (sqlite3_step(st) == SQLITE_ROW) {
    std::string row;
    for (int c = 0; c < sqlite3_column_count(st); ++c) {
      const unsigned char* t = sqlite3_column_text(st, c);
      row += (c ? "|" : "") + std::string(t ? reinterpret_cast<const char*>(t) : "NULL");
    }
    rows.push_back(row);
  }
  sqlite3_finalize(st);
  sqlite3_close(h);
  return rows;
}

long long QueryInt(const std::string& db, const std::string& sql) {
  auto rows = QueryRows(db, sql);
  if (rows.empty()) throw std::runtime_error("no rows: " + sql);
  return std::stoll(rows[0]);
}

long long LeasesHeldBy(const std::string& db, pid_t pid) {
  return QueryInt(db, "SELECT count(*) FROM jobs WHERE state = 1 AND lease_owner IN"
                      " (SELECT id FROM workers WHERE pid IN (" + TreePids(pid) + "))");
}

bool FreezeHoldingLeases(const std::string& db, pid_t pid, long long* held, double timeout_s) {
  return WaitUntil([&] {
    if (LeasesHeldBy(db, pid) == 0) return false;
    if (FreezeTree(pid) && (*held = LeasesHeldBy(db, pid)) > 0) return true;
    SignalTree(pid, SIGCONT);
    return false;
  }, timeout_s);
}

std::vector<cv::Mat> FilmPhoto(const cv::Mat& photo, const SyntheticCamera& cam, cv::Size view,
                               int frames) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> shake(-cam.shake_px, cam.shake_px);
  const cv::Point2d start(photo.cols / 2.0, photo.rows / 2.0);
  const double hx = view.width / 2.0, hy = view.height / 2.0;
  std::vector<cv::Mat> out;
  for (int k = 0; k < frames; ++k) {
    const cv::Point2d centre = start + k * cam.velocity + cv::Point2d(shake(rng), shake(rng));
    const double scale = std::pow(cam.zoom, -k), a = k * cam.turn_deg * CV_PI / 180;
    const double c = std::cos(a) * scale, s = std::sin(a) * scale;
    // View pixel -> photo point: rotate and scale about the view's centre, then place it.
    const cv::Matx23d to_photo(c, -s, centre.x - (c * hx - s * hy), s, c, centre.y - (s * hx + c * hy));
    cv::Mat frame;
    cv::warpAffine(photo, frame, cv::Mat(to_photo), view, cv::INTER_LINEAR | cv::WARP_INVERSE_MAP,
                   cv::BORDER_REFLECT);
    out.push_back(frame);
  }
  return out;
}

}  // namespace framemill::testing
