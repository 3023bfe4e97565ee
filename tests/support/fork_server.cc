#include "tests/support/fork_server.h"

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "tests/support/fork_protocol.h"

namespace framemill::testing {
namespace {

namespace fp = fork_protocol;

// In the forked test process: the client's streams and directory, a process group of its
// own. Returns the test's argv.
std::vector<std::string> BecomeTest(int conn, const int fds[3], const std::string& cwd,
                                    std::vector<std::string> args) {
  ::setpgid(0, 0);
  for (int i = 0; i < 3; ++i) ::dup2(fds[i], i);  // dup2 leaves the copies inheritable
  for (int i = 0; i < 3; ++i)
    if (fds[i] > 2) ::close(fds[i]);
  ::close(conn);
  if (::chdir(cwd.c_str()) != 0) {
    std::perror(("fork server: chdir " + cwd).c_str());
    ::_exit(125);
  }
  return args;
}

// In the handler process, after the fork: until the test process ends (its wait status goes
// to the client) or the client goes (the test's process group is killed).
[[noreturn]] void WatchTest(int conn, pid_t test) {
  fp::SendInt(conn, static_cast<int32_t>(test));
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, test, 0));
  pollfd p[2] = {{conn, POLLIN, 0}, {pidfd, POLLIN, 0}};
  for (;;) {
    int status = 0;
    if (::waitpid(test, &status, WNOHANG) == test) {
      fp::SendInt(conn, status);
      ::_exit(0);
    }
    // Without pidfds (Linux < 5.3) the status is polled every 20 ms.
    const int n = ::poll(p, pidfd >= 0 ? 2 : 1, pidfd >= 0 ? -1 : 20);
    if (n > 0 && (p[0].revents & (POLLIN | POLLHUP | POLLERR))) {  // the client is gone
      ::kill(-test, SIGKILL);
      ::kill(test, SIGKILL);
      ::waitpid(test, &status, 0);
      ::_exit(0);
    }
  }
}

// One request on `conn`, in a process forked for it. Returns only in the test process.
std::vector<std::string> Handle(int conn) {
  int fds[3];
  std::string cwd;
  std::vector<std::string> args;
  if (!fp::ReceiveRequest(conn, fds, &cwd, &args) || args.empty()) ::_exit(1);
  const pid_t test = ::fork();
  if (test == 0) return BecomeTest(conn, fds, cwd, std::move(args));
  for (int fd : fds) ::close(fd);  // only the test holds the client's streams
  if (test < 0) ::_exit(1);       // no pid sent: the client runs the test itself
  WatchTest(conn, test);
}

int Listen(const std::string& path, ino_t* ino) {
  sockaddr_un a;
  if (!fp::SocketAddress(path, &a)) return -1;
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct stat st;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 64) != 0 ||
      ::stat(path.c_str(), &st) != 0) {
    if (fd >= 0) ::close(fd);
    return -1;
  }
  *ino = st.st_ino;
  return fd;
}

}  // namespace

std::optional<std::string> ForkServerSocket(const std::vector<std::string>& args) {
  const std::string flag = fp::kServeFlag;
  for (const std::string& a : args)
    if (a.rfind(flag, 0) == 0) return a.substr(flag.size());
  return std::nullopt;
}

std::vector<std::string> ServeForks(const std::string& socket_path) {
  ino_t ino = 0;
  const int listen_fd = Listen(socket_path, &ino);
  if (listen_fd < 0) ::_exit(1);
  using Clock = std::chrono::steady_clock;
  auto last = Clock::now();
  int handlers = 0;
  for (;;) {
    while (::waitpid(-1, nullptr, WNOHANG) > 0) --handlers;
    pollfd p{listen_fd, POLLIN, 0};
    if (::poll(&p, 1, 1000) > 0) {
      const int conn = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (conn < 0) continue;
      const pid_t h = ::fork();
      if (h == 0) {
        ::close(listen_fd);
        return Handle(conn);
      }
      ::close(conn);
      if (h > 0) ++handlers;
      last = Clock::now();
    } else if (handlers == 0 && Clock::now() - last > std::chrono::seconds(fp::kIdleExitSeconds)) {
      // Unlink only our own socket: a client may have replaced it with a new server's. The
      // lock beside it goes too (at worst two clients then start a server each, and both serve).
      struct stat st;
      if (::stat(socket_path.c_str(), &st) == 0 && st.st_ino == ino) {
        ::unlink(socket_path.c_str());
        const size_t dot = socket_path.rfind(".sock");
        if (dot != std::string::npos) ::unlink((socket_path.substr(0, dot) + ".lock").c_str());
      }
      ::_exit(0);
    }
  }
}

}  // namespace framemill::testing
