// framemill_test_launcher BINARY ARGS...: how ctest runs a test binary (its
// CROSSCOMPILING_EMULATOR). It asks BINARY's fork server to run the test, starting the
// server if none is up, and exits as the test did; where no server can serve, or
// FRAMEMILL_TEST_FORKS=0, or for GoogleTest's listing, it executes BINARY itself.
// Why and how: tests/support/fork_protocol.h and fork_server.h.
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/fork_protocol.h"

extern char** environ;

namespace {

namespace fp = framemill::testing::fork_protocol;

// FNV-1a over what makes a server fit this request: the binary as built, and the environment.
std::string ServerKey(const std::string& binary) {
  struct stat st;
  char real[PATH_MAX];
  if (::stat(binary.c_str(), &st) != 0 || ::realpath(binary.c_str(), real) == nullptr) return "";
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](const void* p, size_t n) {
    for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<const unsigned char*>(p)[i]) * 1099511628211ull;
  };
  mix(real, std::strlen(real) + 1);
  for (auto v : {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino),
                 static_cast<uint64_t>(st.st_size), static_cast<uint64_t>(st.st_mtim.tv_sec),
                 static_cast<uint64_t>(st.st_mtim.tv_nsec)})
    mix(&v, sizeof v);
  for (char** e = environ; *e != nullptr; ++e) mix(*e, std::strlen(*e) + 1);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

// /tmp/framemill-test-forks-UID, ours alone; empty if it is not.
std::string ServerDir() {
  const std::string dir = "/tmp/framemill-test-forks-" + std::to_string(::getuid());
  ::mkdir(dir.c_str(), 0700);
  struct stat st;
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::getuid() ||
      (st.st_mode & 077) != 0)
    return "";
  return dir;
}

int Connect(const std::string& path) {
  sockaddr_un a;
  if (!fp::SocketAddress(path, &a)) return -1;
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) return fd;
  if (fd >= 0) ::close(fd);
  return -1;
}

// Starts `binary` as a server on `path`, detached (its own session, no streams of ours),
// and returns its pid, or -1.
pid_t SpawnServer(const std::string& binary, const std::string& path) {
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) return -1;
  const pid_t mid = ::fork();
  if (mid == 0) {
    ::setsid();
    const pid_t server = ::fork();
    if (server == 0) {
      const int null = ::open("/dev/null", O_RDWR);
      for (int i = 0; i < 3; ++i) ::dup2(null, i);
      ::close_range(3, ~0u, 0);
      const std::string flag = fp::kServeFlag + path;
      ::execl(binary.c_str(), binary.c_str(), flag.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    fp::WriteAll(pipefd[1], &server, sizeof server);
    ::_exit(0);
  }
  ::close(pipefd[1]);
  pid_t server = -1;
  if (mid < 0 || !fp::ReadAll(pipefd[0], &server, sizeof server)) server = -1;
  ::close(pipefd[0]);
  if (mid > 0) ::waitpid(mid, nullptr, 0);
  return server;
}

// A connection to a server for `binary`, started if need be; -1 if none can be had.
int ServerFor(const std::string& binary) {
  const std::string dir = ServerDir(), key = ServerKey(binary);
  if (dir.empty() || key.empty()) return -1;
  const std::string path = dir + "/" + key + ".sock";
  int conn = Connect(path);
  if (conn >= 0) return conn;
  // One client starts the server; the others wait on the lock, then connect.
  const int lock = ::open((dir + "/" + key + ".lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600);
  if (lock < 0) return -1;
  if (::flock(lock, LOCK_EX) != 0) {
    ::close(lock);
    return -1;
  }
  conn = Connect(path);
  if (conn < 0) {
    ::unlink(path.c_str());
    const pid_t server = SpawnServer(binary, path);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (server > 0 && conn < 0 && std::chrono::steady_clock::now() < deadline &&
           ::kill(server, 0) == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      conn = Connect(path);
    }
  }
  ::close(lock);
  return conn;
}

// Runs the test in a server: true with its wait status, or false if it did not start there.
bool RunInServer(const std::vector<std::string>& args, int* status) {
  const int conn = ServerFor(args.front());
  if (conn < 0) return false;
  char cwd[PATH_MAX];
  int32_t pid = 0, st = 0;
  if (::getcwd(cwd, sizeof cwd) == nullptr || !fp::SendRequest(conn, cwd, args) || !fp::ReadInt(conn, &pid)) {
    ::close(conn);
    return false;
  }
  if (!fp::ReadInt(conn, &st)) {
    std::fprintf(stderr, "framemill_test_launcher: the fork server lost test process %d\n", pid);
    st = 125 << 8;
  }
  *status = st;
  return true;
}

// Ends this process as the test process ended.
int ExitLike(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) {
    const rlimit none{0, 0};
    ::setrlimit(RLIMIT_CORE, &none);  // the test process has dumped its core, if any
    ::signal(WTERMSIG(status), SIG_DFL);
    ::raise(WTERMSIG(status));
    return 128 + WTERMSIG(status);
  }
  return 125;
}

bool RunDirectly(const std::vector<std::string>& args) {
  const char* forks = std::getenv("FRAMEMILL_TEST_FORKS");
  if (forks != nullptr && std::string(forks) == "0") return true;
  for (const std::string& a : args)
    if (a.rfind("--gtest_list_tests", 0) == 0 || a.rfind(fp::kServeFlag, 0) == 0) return true;
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: framemill_test_launcher TEST_BINARY [ARGS...]\n");
    return 2;
  }
  const std::vector<std::string> args(argv + 1, argv + argc);
  int status = 0;
  if (!RunDirectly(args) && RunInServer(args, &status)) return ExitLike(status);
  ::execv(argv[1], argv + 1);
  std::perror(argv[1]);
  return 127;
}
