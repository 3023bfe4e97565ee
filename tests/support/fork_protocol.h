// What the test launcher (tests/support/test_launcher_main.cc) and a test binary's fork
// server (tests/support/fork_server.h) say to each other over a Unix socket.
//
// Why: a test binary links ~260 shared libraries (OpenCV's imgcodecs and videoio bring GDAL,
// GStreamer and their trees), and the dynamic loader spends ~0.2 s of CPU resolving their
// symbols before main() (perf on the 2-core VM: 84% of a test process that runs no test is
// in ld.so's relocation). ctest starts one process per test, 909 of them. A fork server
// loads the binary once and forks a process per test, which starts in ~2 ms.
//
// The request: the client's standard input, output and error (SCM_RIGHTS), then its
// working directory and the test's arguments, each ending in a NUL. The answers: the test
// process's pid once it is forked, then its wait status. Header-only, libc only: the
// launcher links nothing else.
#pragma once

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace framemill::testing::fork_protocol {

// The flag that makes a test binary serve forks on the socket named after '='.
inline constexpr const char kServeFlag[] = "--framemill_fork_server=";
// How long a server with nothing to do waits for a request before it exits.
inline constexpr int kIdleExitSeconds = 30;

inline bool WriteAll(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

inline bool ReadAll(int fd, void* data, size_t n) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t r = ::read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

inline bool SendInt(int fd, int32_t v) { return WriteAll(fd, &v, sizeof v); }
inline bool ReadInt(int fd, int32_t* v) { return ReadAll(fd, v, sizeof *v); }

// Sends fds 0, 1 and 2, then the payload's length and the payload (cwd and args, NUL-ended).
inline bool SendRequest(int sock, const std::string& cwd, const std::vector<std::string>& args) {
  std::string payload = cwd + '\0';
  for (const std::string& a : args) payload += a + '\0';
  const uint32_t len = static_cast<uint32_t>(payload.size());
  int fds[3] = {0, 1, 2};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof fds)] = {};
  iovec iov{const_cast<uint32_t*>(&len), sizeof len};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof fds);
  std::memcpy(CMSG_DATA(c), fds, sizeof fds);
  ssize_t sent;
  do sent = ::sendmsg(sock, &msg, MSG_NOSIGNAL);
  while (sent < 0 && errno == EINTR);
  return sent == static_cast<ssize_t>(sizeof len) && WriteAll(sock, payload.data(), payload.size());
}

// The other side of SendRequest: fds[3] receives the client's standard streams.
inline bool ReceiveRequest(int sock, int fds[3], std::string* cwd, std::vector<std::string>* args) {
  uint32_t len = 0;
  alignas(cmsghdr) char control[CMSG_SPACE(3 * sizeof(int))] = {};
  iovec iov{&len, sizeof len};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t got;
  do got = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
  while (got < 0 && errno == EINTR);
  const cmsghdr* c = CMSG_FIRSTHDR(&msg);
  if (got != static_cast<ssize_t>(sizeof len) || c == nullptr || c->cmsg_type != SCM_RIGHTS ||
      c->cmsg_len != CMSG_LEN(3 * sizeof(int)) || len > (1u << 20))
    return false;
  std::memcpy(fds, CMSG_DATA(c), 3 * sizeof(int));
  std::string payload(len, '\0');
  if (!ReadAll(sock, payload.data(), len)) return false;
  std::vector<std::string> parts;
  for (size_t at = 0; at < payload.size();) {
    const size_t end = payload.find('\0', at);
    if (end == std::string::npos) return false;
    parts.push_back(payload.substr(at, end - at));
    at = end + 1;
  }
  if (parts.empty()) return false;
  *cwd = parts.front();
  args->assign(parts.begin() + 1, parts.end());
  return true;
}

// A Unix socket address for `path`; false if the path is too long for one.
inline bool SocketAddress(const std::string& path, sockaddr_un* a) {
  *a = sockaddr_un{};
  a->sun_family = AF_UNIX;
  if (path.size() >= sizeof a->sun_path) return false;
  std::memcpy(a->sun_path, path.c_str(), path.size() + 1);
  return true;
}

}  // namespace framemill::testing::fork_protocol
