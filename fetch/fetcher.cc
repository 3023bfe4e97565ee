#include "fetch/fetcher.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <curl/curl.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <deque>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "fetch/address_policy.h"
#include "fetch/content_store.h"
#include "fetch/failures.h"
#include "media/content_hash.h"
#include "media/sniff.h"

namespace framemill::fetch {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Enough for every signature SniffMedia knows (MPEG-TS needs 377 bytes).
constexpr size_t kSniffBytes = 512;
// Bodies are gathered in memory up to this size before reaching the file, so a
// typical image costs one write(2).
constexpr size_t kWriteChunk = 256 << 10;

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

}  // namespace

struct Fetcher::Impl {
  // One transfer in flight; curl holds a pointer to it, so it never moves.
  struct Transfer {
    Impl* impl = nullptr;
    size_t index = 0;
    std::string host;
    CURL* easy = nullptr;
    TempFile file;
    XXH3_state_t* xxh = nullptr;
    int64_t bytes = 0;
    std::string head;  // the first kSniffBytes of the body
    std::string buf;   // body bytes not yet written
    bool checked = false, discard = false, sniffed = false;
    std::optional<Sniffed> kind;
    FailureClass abort_class = FailureClass::kNone;
    std::string abort_msg;
    std::string retry_after;
    std::string blocked;  // the refused address, when block_private stopped a connection
    Clock::time_point start;
    char errbuf[CURL_ERROR_SIZE] = {0};
  };

  FetchOptions opt;
  ContentStore store;
  CURLM* multi = nullptr;

  // Recorded paths must not depend on the working directory of the run that fetched.
  static FetchOptions Normalized(FetchOptions o) {
    std::error_code ec;
    if (!o.out_dir.empty()) {
      auto abs = fs::absolute(o.out_dir, ec);
      if (!ec) o.out_dir = abs.lexically_normal().string();
    }
    o.concurrency = std::max(1, o.concurrency);
    o.per_host = std::max(1, o.per_host);
    return o;
  }

  explicit Impl(FetchOptions o) : opt(Normalized(std::move(o))), store(opt.out_dir) {
    GlobalInit();
    multi = curl_multi_init();
    // Our own queue keeps first requests under per_host; this also caps redirects.
    curl_multi_setopt(multi, CURLMOPT_MAX_HOST_CONNECTIONS, static_cast<long>(opt.per_host));
    curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, static_cast<long>(opt.concurrency));
    curl_multi_setopt(multi, CURLMOPT_PIPELINING, CURLPIPE_MULTIPLEX);
  }
  ~Impl() {
    curl_multi_cleanup(multi);
  }

  static size_t OnHeader(char* p, size_t size, size_t n, void* ud) {
    auto* t = static_cast<Transfer*>(ud);
    std::string_view line(p, size * n);
    if (line.size() >= 5 && line.substr(0, 5) == "HTTP/") {
      t->retry_after.clear();  // a new response (after a redirect) starts
    } else if (line.size() > 12 && Lower(line.substr(0, 12)) == "retry-after:") {
      t->retry_after = Trim(line.substr(12));
    }
    return size * n;
  }

  static size_t OnWrite(char* p, size_t size, size_t n, void* ud) {
    auto* t = static_cast<Transfer*>(ud);
    const size_t len = size * n;
    if (!t->checked) {
      // Bodies of followed redirects never reach here, so this is the final
      // response: an error body is counted (the size cap holds) but not stored.
      long code = 0;
      curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &code);
      t->discard = code < 200 || code >= 300;
      t->checked = true;
    }
    if (t->bytes + static_cast<int64_t>(len) > t->impl->opt.max_bytes) {
      t->abort_class = FailureClass::kTooLarge;
      t->abort_msg = "body exceeds the size cap of " + std::to_string(t->impl->opt.max_bytes) +
                     " bytes (fetch.max_bytes); aborted while streaming";
      return 0;  // aborts the transfer: nothing more is read
    }
    t->bytes += static_cast<int64_t>(len);
    if (t->discard) return len;
    if (t->head.size() < kSniffBytes) {
      t->head.append(p, std::min(len, kSniffBytes - t->head.size()));
      if (t->head.size() >= kSniffBytes && !t->sniffed) {
        t->sniffed = true;
        t->kind = SniffMedia(t->head);
        if (!t->kind) {
          t->abort_class = FailureClass::kNotMedia;
          return 0;  // no reason to download the rest of, say, an HTML page
        }
      }
    }
    XXH3_128bits_update(t->xxh, p, len);
    t->buf.append(p, len);
    if (t->buf.size() >= kWriteChunk) {
      Status s = t->impl->store.Append(&t->file, &t->buf);
      if (!s.ok()) {
        t->abort_class = FailureClass::kTransfer;
        t->abort_msg = s.message();
        return 0;
      }
    }
    return len;
  }

  // A fresh handle per transfer: connections are pooled by the multi handle, not the
  // easy one, and a reset handle can keep timer state from its last transfer (a retry
  // on it was seen to time out "after 1 milliseconds").
  CURL* TakeEasy() { return curl_easy_init(); }

  void Start(Transfer* t, const std::string& url) {
    CURL* e = t->easy = TakeEasy();
    t->xxh = XXH3_createState();
    XXH3_128bits_reset(t->xxh);
    t->start = Clock::now();
    curl_easy_setopt(e, CURLOPT_URL, url.c_str());
    curl_easy_setopt(e, CURLOPT_PRIVATE, t);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t->errbuf);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &Impl::OnWrite);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, t);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, &Impl::OnHeader);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, t);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(e, CURLOPT_MAXREDIRS, static_cast<long>(opt.max_redirects));
    // No CURLOPT_AUTOREFERER: a redirect must not tell the next host where it came from.
    if (opt.block_private) {
      curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, &Impl::OpenSocket);
      curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, t);
    }
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(opt.connect_timeout_ms));
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, static_cast<long>(opt.total_timeout_ms));
    // Refuses a declared Content-Length over the cap before any body arrives;
    // OnWrite enforces the cap on bodies of unknown length.
    curl_easy_setopt(e, CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(opt.max_bytes));
    curl_easy_setopt(e, CURLOPT_USERAGENT, opt.user_agent.c_str());
    curl_easy_setopt(e, CURLOPT_BUFFERSIZE, 64L << 10);
    // No CURLOPT_PIPEWAIT: it parks a request behind a connection still being set up
    // until that transfer ends, so one slow HTTP/1.1 body held every other request to
    // its host past their time limit. HTTP/2 still multiplexes once a connection is up.
    curl_multi_add_handle(multi, e);
  }

  // Every connection curl makes (after DNS, at each redirect, each address tried) comes
  // through here, so a name that resolves to an internal address is refused too.
  static curl_socket_t OpenSocket(void* data, curlsocktype, struct curl_sockaddr* a) {
    if (IsPrivateAddress(&a->addr)) {
      char host[INET6_ADDRSTRLEN] = "?";
      if (a->family == AF_INET)
        inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&a->addr)->sin_addr, host, sizeof host);
      else if (a->family == AF_INET6)
        inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&a->addr)->sin6_addr, host, sizeof host);
      static_cast<Transfer*>(data)->blocked = host;
      return CURL_SOCKET_BAD;
    }
    return ::socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
  }

  void Finish(Transfer* t, CURLcode rc, FetchResult& r) {
    CURL* e = t->easy;
    r.seconds = std::chrono::duration<double>(Clock::now() - t->start).count();
    r.bytes = t->bytes;
    long code = 0;
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &code);
    r.http_status = static_cast<int>(code);
    char* eff = nullptr;
    curl_easy_getinfo(e, CURLINFO_EFFECTIVE_URL, &eff);
    if (eff) r.final_url = eff;
    const std::string where = " (" + r.final_url + ")";
    std::string detail = t->errbuf[0] ? t->errbuf : curl_easy_strerror(rc);

    if (!t->blocked.empty()) {
      Fail(r, FailureClass::kBlockedAddress,
           Status::InvalidArgument("refused to connect to " + t->blocked +
                                   ", a loopback, private or link-local address "
                                   "(fetch.block_private)" + where));
    } else if (t->abort_class == FailureClass::kTooLarge) {
      Fail(r, FailureClass::kTooLarge, Status::TooLarge(t->abort_msg + where));
    } else if (t->abort_class == FailureClass::kNotMedia) {
      Fail(r, FailureClass::kNotMedia,
           Status::Unsupported("not an image or video: the first bytes match no known format" +
                               where));
    } else if (t->abort_class == FailureClass::kTransfer) {
      Fail(r, FailureClass::kTransfer, Status::IOError(t->abort_msg));
    } else if (rc == CURLE_OPERATION_TIMEDOUT &&
               r.seconds * 1000 < std::min(opt.connect_timeout_ms, opt.total_timeout_ms) / 2.0) {
      // No limit was reached: Debian's libcurl (7.88) was seen to report a timeout "after 1
      // milliseconds" on a loaded machine when a request followed an empty reply from the
      // same server. The connection failed; calling it a timeout would misname the cause.
      const long ms = std::lround(r.seconds * 1000);
      Fail(r, FailureClass::kTransfer,
           Status::IOError("transfer: the connection failed after " + std::to_string(ms) +
                           " ms, before any time limit (libcurl: " + detail + ")" + where));
    } else if (rc != CURLE_OK) {
      MapCurlError(rc, detail + where, r);
    } else if (code < 200 || code >= 300) {
      MapHttpStatus(static_cast<int>(code), t->retry_after, where, r);
      if (r.retry_after_ms > opt.max_retry_after_ms) {
        // Waiting that long would hold the run (or the job) hostage: give up now.
        Fail(r, FailureClass::kRetryAfterTooLong,
             Status::Unsupported("HTTP " + std::to_string(code) + " asks to retry after " +
                                 FormatWait(r.retry_after_ms) + " (Retry-After: " +
                                 t->retry_after.substr(0, 64) + "), over fetch.max_retry_after_ms (" +
                                 FormatWait(opt.max_retry_after_ms) + "); not retried" + where));
      }
    } else {
      if (!t->sniffed) t->kind = SniffMedia(t->head);
      if (t->bytes == 0) {
        Fail(r, FailureClass::kNotMedia, Status::Unsupported("empty body" + where));
      } else if (!t->kind) {
        Fail(r, FailureClass::kNotMedia,
             Status::Unsupported("not an image or video: the first bytes match no known "
                                 "format" + where));
      } else {
        const XXH128_hash_t digest = XXH3_128bits_digest(t->xxh);
        const std::string hex = ContentHash128Hex(digest.high64, digest.low64);
        std::string target = ContentPath(opt.out_dir, hex, t->kind->format);
        Status s = store.Append(&t->file, &t->buf);
        if (s.ok()) s = store.Publish(&t->file, target);
        if (s.ok()) {
          r.path = std::move(target);
          r.content_hash = std::move(hex);
          r.kind = t->kind->kind;
          r.format = t->kind->format;
        } else {
          Fail(r, FailureClass::kTransfer, s);
        }
      }
    }
    store.Drop(&t->file);
    XXH3_freeState(t->xxh);
    t->xxh = nullptr;
    curl_multi_remove_handle(multi, e);
    curl_easy_cleanup(e);
    t->easy = nullptr;
  }

  std::vector<FetchResult> FetchAll(const std::vector<std::string>& urls) {
    std::vector<FetchResult> results(urls.size());
    struct HostQueue {
      std::deque<size_t> waiting;
      int in_flight = 0;
    };
    std::unordered_map<std::string, HostQueue> hosts;
    size_t waiting = 0;
    for (size_t i = 0; i < urls.size(); ++i) {
      std::string host;
      Status s = ParseFetchUrl(urls[i], &host);
      if (!s.ok()) {
        Fail(results[i], FailureClass::kBadUrl, s);
        results[i].final_url = urls[i];
        continue;
      }
      hosts[host].waiting.push_back(i);
      ++waiting;
    }

    std::deque<Transfer> slots;  // stable addresses
    std::vector<Transfer*> free_slots;
    int in_flight = 0;
    auto fill = [&] {
      for (auto it = hosts.begin(); it != hosts.end() && in_flight < opt.concurrency;) {
        HostQueue& q = it->second;
        while (!q.waiting.empty() && q.in_flight < opt.per_host && in_flight < opt.concurrency) {
          Transfer* t;
          if (free_slots.empty()) {
            t = &slots.emplace_back();
          } else {
            t = free_slots.back();
            free_slots.pop_back();
            *t = Transfer();
          }
          t->impl = this;
          t->index = q.waiting.front();
          t->host = it->first;
          q.waiting.pop_front();
          --waiting;
          ++q.in_flight;
          ++in_flight;
          Start(t, urls[t->index]);
        }
        if (q.waiting.empty() && q.in_flight == 0)
          it = hosts.erase(it);
        else
          ++it;
      }
    };

    fill();
    while (in_flight > 0) {
      int running = 0;
      curl_multi_perform(multi, &running);
      int left = 0;
      bool finished_any = false;
      while (CURLMsg* m = curl_multi_info_read(multi, &left)) {
        if (m->msg != CURLMSG_DONE) continue;
        Transfer* t = nullptr;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, reinterpret_cast<char**>(&t));
        Finish(t, m->data.result, results[t->index]);
        --hosts[t->host].in_flight;
        --in_flight;
        free_slots.push_back(t);
        finished_any = true;
      }
      if (finished_any && waiting > 0) {
        fill();
        continue;  // start the new transfers before sleeping
      }
      if (in_flight > 0) curl_multi_poll(multi, nullptr, 0, 200, nullptr);
    }
    return results;
  }
};

Fetcher::Fetcher(FetchOptions o) : impl_(std::make_unique<Impl>(std::move(o))) {}
Fetcher::~Fetcher() = default;

std::vector<FetchResult> Fetcher::FetchAll(const std::vector<std::string>& urls) {
  return impl_->FetchAll(urls);
}

}  // namespace framemill::fetch
