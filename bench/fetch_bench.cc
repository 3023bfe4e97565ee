// Fetch throughput, after bench/store_bench.cc: a plain executable that prints its
// setup, then one line per run. It measures only; nothing is asserted about timings.
//
//   fetch_bench [--num=5000] [--concurrency=64] [--per_host=16] [--hosts=4]
//               [--batch=5000] [--out_dir=DIR] [--data=DIR]
//
// The server is part of this file: one epoll thread serving keep-alive HTTP/1.1 on
// --hosts loopback addresses (127.0.0.1, 127.0.0.2, ...: distinct hosts for the
// per-host cap, as a crawl over several sites). It holds real JPEGs of 70-130 KB from
// Debian's OpenCV samples in memory and appends 16 unique bytes after each image's
// end marker, so every download is distinct content (decoders ignore the trailer) and
// each one costs a real hash, file write and link. A Python server does not reach
// 1,000 requests/s and nginx is not installed.
// The Fetcher runs on the main thread: "fetcher cpu" is that thread's CPU time
// (RUSAGE_THREAD); "process cpu" adds the server's.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "bench/bench_support.h"
#include "fetch/fetcher.h"

namespace framemill {
namespace {

namespace fs = std::filesystem;

struct Flags {
  int64_t num = 5000;
  int concurrency = 64;
  int per_host = 16;
  int hosts = 4;
  int64_t batch = 5000;
  std::string out_dir;
  std::string data = "/usr/share/doc/opencv-doc/examples/data";
} FLAGS;

// ---------------------------------------------------------------- server

class LoopbackServer {
 public:
  LoopbackServer(std::vector<std::string> bodies, int hosts) : bodies_(std::move(bodies)) {
    ep_ = epoll_create1(EPOLL_CLOEXEC);
    for (int h = 0; h < hosts; ++h) {
      int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      int one = 1;
      setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(0x7F000001 + h);  // 127.0.0.(1+h)
      if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(fd, 1024) != 0) {
        std::perror("bind/listen");
        std::exit(1);
      }
      socklen_t len = sizeof a;
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
      urls_base_.push_back("http://127.0.0." + std::to_string(1 + h) + ":" +
                           std::to_string(ntohs(a.sin_port)));
      listeners_.push_back(fd);
      Watch(fd, EPOLLIN);
    }
    thread_ = std::thread([this] { Loop(); });
  }
  ~LoopbackServer() {
    stop_ = true;
    thread_.join();
    for (auto& [fd, c] : conns_) close(fd);
    for (int fd : listeners_) close(fd);
    close(ep_);
  }
  const std::vector<std::string>& bases() const { return urls_base_; }
  int64_t requests() const { return requests_; }

 private:
  struct Conn {
    std::string in;
    std::string head, trailer;
    const std::string* body = nullptr;
    size_t off = 0;  // bytes of head+body+trailer already sent
    bool writing = false;
  };

  void Watch(int fd, uint32_t ev, int op = EPOLL_CTL_ADD) {
    epoll_event e{};
    e.events = ev;
    e.data.fd = fd;
    epoll_ctl(ep_, op, fd, &e);
  }

  void Loop() {
    epoll_event evs[256];
    while (!stop_) {
      int n = epoll_wait(ep_, evs, 256, 50);
      for (int i = 0; i < n; ++i) {
        int fd = evs[i].data.fd;
        if (std::find(listeners_.begin(), listeners_.end(), fd) != listeners_.end()) {
          int c;
          while ((c = accept4(fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
            int one = 1;
            setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            conns_[c] = Conn();
            Watch(c, EPOLLIN);
          }
          continue;
        }
        auto it = conns_.find(fd);
        if (it == conns_.end()) continue;
        if (!Serve(fd, it->second)) {
          close(fd);
          conns_.erase(it);
        }
      }
    }
  }

  // false: close the connection.
  bool Serve(int fd, Conn& c) {
    if (!c.writing) {
      char buf[8192];
      ssize_t r = read(fd, buf, sizeof buf);
      if (r == 0) return false;
      if (r < 0) return errno == EAGAIN || errno == EINTR;
      c.in.append(buf, static_cast<size_t>(r));
    }
    for (;;) {
      if (c.writing) {
        const size_t total = c.head.size() + c.body->size() + c.trailer.size();
        while (c.off < total) {
          iovec iov[3];
          int k = 0;
          size_t off = c.off;
          const std::string* parts[3] = {&c.head, c.body, &c.trailer};
          for (const std::string* p : parts) {
            if (off >= p->size()) {
              off -= p->size();
              continue;
            }
            iov[k].iov_base = const_cast<char*>(p->data() + off);
            iov[k].iov_len = p->size() - off;
            off = 0;
            ++k;
          }
          ssize_t w = writev(fd, iov, k);
          if (w < 0) {
            if (errno == EAGAIN) {
              Watch(fd, EPOLLOUT, EPOLL_CTL_MOD);
              return true;
            }
            return false;
          }
          c.off += static_cast<size_t>(w);
        }
        c.writing = false;
        Watch(fd, EPOLLIN, EPOLL_CTL_MOD);
      }
      size_t end = c.in.find("\r\n\r\n");
      if (end == std::string::npos) return true;
      // "GET /i/<n> HTTP/1.1": body n % images, trailer unique per request.
      size_t sp = c.in.find(' ');
      size_t slash = c.in.rfind('/', c.in.find(' ', sp + 1));
      uint64_t n = std::strtoull(c.in.c_str() + slash + 1, nullptr, 10);
      c.in.erase(0, end + 4);
      c.body = &bodies_[n % bodies_.size()];
      char trailer[17];
      std::snprintf(trailer, sizeof trailer, "%016" PRIx64, static_cast<uint64_t>(++requests_));
      c.trailer.assign(trailer, 16);
      c.head = "HTTP/1.1 200 OK\r\nContent-Type: image/jpeg\r\nContent-Length: " +
               std::to_string(c.body->size() + 16) + "\r\n\r\n";
      c.off = 0;
      c.writing = true;
    }
  }

  std::vector<std::string> bodies_;
  std::vector<int> listeners_;
  std::vector<std::string> urls_base_;
  std::unordered_map<int, Conn> conns_;
  int ep_ = -1;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> requests_{0};
  std::thread thread_;
};

// ---------------------------------------------------------------- helpers

double CpuSeconds(int who) {
  rusage ru{};
  getrusage(who, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
         (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

using bench::CpuModel;

int Run() {
  std::vector<std::string> bodies, names;
  for (auto& e : fs::directory_iterator(FLAGS.data)) {
    if (e.path().extension() != ".jpg") continue;
    auto size = e.file_size();
    if (size < 70000 || size > 130000) continue;
    std::ifstream in(e.path(), std::ios::binary);
    bodies.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    names.push_back(e.path().filename().string());
  }
  if (bodies.empty()) {
    std::fprintf(stderr, "no 70-130 KB JPEGs in %s\n", FLAGS.data.c_str());
    return 1;
  }
  double avg = 0;
  for (auto& b : bodies) avg += static_cast<double>(b.size()) / bodies.size();

  bool own_dir = FLAGS.out_dir.empty();
  if (own_dir) {
    char tmpl[] = "/tmp/fetch_bench.XXXXXX";
    FLAGS.out_dir = mkdtemp(tmpl);
  }
  LoopbackServer server(bodies, FLAGS.hosts);

  char date[64];
  time_t now = time(nullptr);
  std::strftime(date, sizeof date, "%F %T", localtime(&now));
  std::printf("framemill fetch_bench\n");
  std::printf("Date:        %s\n", date);
  std::printf("CPU:         %u * %s\n", std::thread::hardware_concurrency(), CpuModel().c_str());
  std::printf("Server:      in-process epoll thread, keep-alive HTTP/1.1, %d loopback hosts\n",
              FLAGS.hosts);
  std::printf("Images:      %zu real JPEGs, avg %.1f KB (+16 unique bytes each): ", bodies.size(),
              avg / 1024);
  for (auto& n : names) std::printf("%s ", n.c_str());
  std::printf("\nFetcher:     concurrency %d, per_host %d, %" PRId64 " URLs per FetchAll\n",
              FLAGS.concurrency, FLAGS.per_host, FLAGS.batch);
  std::printf("Out dir:     %s (content-addressed files, O_TMPFILE + linkat)\n",
              FLAGS.out_dir.c_str());
  std::printf("------------------------------------------------\n");

  fetch::FetchOptions o;
  o.concurrency = FLAGS.concurrency;
  o.per_host = FLAGS.per_host;
  o.out_dir = FLAGS.out_dir;
  o.block_private = false;  // its servers are on 127.0.0.1
  fetch::Fetcher fetcher(o);

  std::vector<std::string> urls;
  for (int64_t i = 0; i < FLAGS.num; ++i)
    urls.push_back(server.bases()[i % server.bases().size()] + "/i/" + std::to_string(i));

  const double thread0 = CpuSeconds(RUSAGE_THREAD), proc0 = CpuSeconds(RUSAGE_SELF);
  const auto t0 = std::chrono::steady_clock::now();
  int64_t ok = 0, bytes = 0;
  std::unordered_map<std::string, int> failures;
  for (int64_t start = 0; start < FLAGS.num; start += FLAGS.batch) {
    std::vector<std::string> part(urls.begin() + start,
                                  urls.begin() + std::min(FLAGS.num, start + FLAGS.batch));
    for (auto& r : fetcher.FetchAll(part)) {
      if (r.status.ok()) {
        ++ok;
        bytes += r.bytes;
      } else {
        ++failures[fetch::FailureClassName(r.failure)];
        if (failures.size() == 1 && failures.begin()->second == 1)
          std::fprintf(stderr, "first failure: %s\n", r.status.ToString().c_str());
      }
    }
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double thread_cpu = CpuSeconds(RUSAGE_THREAD) - thread0;
  const double proc_cpu = CpuSeconds(RUSAGE_SELF) - proc0;

  std::printf("fetch_%-6" PRId64 "              : %8.0f downloads/s %8.1f MB/s  %.2f s wall\n",
              FLAGS.num, ok / wall, bytes / wall / 1e6, wall);
  std::printf("cpu per download          : fetcher %.3f ms, process (with server) %.3f ms\n",
              thread_cpu * 1e3 / std::max<int64_t>(ok, 1), proc_cpu * 1e3 / std::max<int64_t>(ok, 1));
  std::printf("ok %" PRId64 " of %" PRId64 ", server answered %" PRId64 " requests",
              ok, FLAGS.num, server.requests());
  for (auto& [k, v] : failures) std::printf(", %s %d", k.c_str(), v);
  std::printf("\n");
  if (own_dir) fs::remove_all(FLAGS.out_dir);
  return ok == FLAGS.num ? 0 : 1;
}

}  // namespace
}  // namespace framemill

int main(int argc, char** argv) {
  using framemill::FLAGS;
  const std::vector<framemill::bench::FlagRow> rows = {
      {"--num=", &FLAGS.num},         {"--concurrency=", &FLAGS.concurrency},
      {"--per_host=", &FLAGS.per_host}, {"--hosts=", &FLAGS.hosts},
      {"--batch=", &FLAGS.batch},     {"--out_dir=", &FLAGS.out_dir},
      {"--data=", &FLAGS.data}};
  const char* usage = "usage: fetch_bench [--num=N] [--concurrency=N] [--per_host=N] [--hosts=N]"
                      " [--batch=N] [--out_dir=DIR] [--data=DIR]\n";
  if (!framemill::bench::ParseFlags("fetch_bench", argc, argv, rows, usage)) return 2;
  if (FLAGS.num <= 0 || FLAGS.batch <= 0 || FLAGS.hosts < 1 || FLAGS.hosts > 200) {
    std::fprintf(stderr, "--num, --batch must be > 0; --hosts in 1..200\n");
    return 2;
  }
  return framemill::Run();
}
