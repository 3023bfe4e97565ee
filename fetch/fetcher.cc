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

std::string ExtensionFor(const std::string& format) {
  if (format == "jpeg") return ".jpg";
  if (format == "mpegts") return ".ts";
  if (format == "mpeg") return ".mpg";
  if (format == "tiff") return ".tif";
  if (format.empty()) return "";
  return "." + format;
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

// Retry-After is either delta-seconds or an HTTP date; -1 when neither parses. Saturates
// (a year of digits, a date centuries ahead) instead of overflowing.
int64_t ParseRetryAfter(const std::string& v) {
  constexpr int64_t kMaxMs = int64_t{1} << 53;
  if (v.empty()) return -1;
  if (std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    if (v.size() > 12) return kMaxMs;
    return std::min<int64_t>(kMaxMs, std::stoll(v) * 1000);
  }
  time_t when = curl_getdate(v.c_str(), nullptr);
  if (when < 0) return -1;
  const int64_t ahead = static_cast<int64_t>(when) - static_cast<int64_t>(time(nullptr));
  return std::clamp<int64_t>(ahead, 0, kMaxMs / 1000) * 1000;
}

std::string FormatWait(int64_t ms) {
  char buf[64];
  if (ms >= 86'400'000) std::snprintf(buf, sizeof buf, "%.0f days", ms / 86'400'000.0);
  else std::snprintf(buf, sizeof buf, "%.0f s", ms / 1000.0);
  return buf;
}

bool WriteAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

}  // namespace

const char* FailureClassName(FailureClass c) {
  switch (c) {
    case FailureClass::kNone: return "none";
    case FailureClass::kDns: return "dns";
    case FailureClass::kConnect: return "connect";
    case FailureClass::kTimeout: return "timeout";
    case FailureClass::kHttpStatus: return "http_status";
    case FailureClass::kTooLarge: return "too_large";
    case FailureClass::kNotMedia: return "not_media";
    case FailureClass::kBadUrl: return "bad_url";
    case FailureClass::kRetryAfterTooLong: return "retry_after_too_long";
    case FailureClass::kBlockedAddress: return "blocked_address";
    case FailureClass::kTransfer: return "transfer";
  }
  return "unknown";
}

bool IsPrivateAddress(const struct sockaddr* addr) {
  auto v4 = [](uint32_t a) {  // host byte order
    auto in = [a](uint32_t net, int bits) { return (a >> (32 - bits)) == (net >> (32 - bits)); };
    return in(0x00000000, 8) || in(0x0A000000, 8) || in(0x7F000000, 8) ||   // 0/8 10/8 127/8
           in(0x64400000, 10) || in(0xA9FE0000, 16) || in(0xAC100000, 12) ||  // CGNAT, link-local, 172.16/12
           in(0xC0A80000, 16) || in(0xC0000000, 24) || in(0xC6120000, 15) ||  // 192.168/16, 192.0.0/24, 198.18/15
           in(0xE0000000, 4) || in(0xF0000000, 4);                            // multicast, reserved + broadcast
  };
  if (addr->sa_family == AF_INET)
    return v4(ntohl(reinterpret_cast<const sockaddr_in*>(addr)->sin_addr.s_addr));
  if (addr->sa_family != AF_INET6) return true;  // nothing else is fetched over
  const uint8_t* b = reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr.s6_addr;
  static const uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
  static const uint8_t kZero[16] = {};
  static const uint8_t kNat64[12] = {0, 0x64, 0xFF, 0x9B, 0, 0, 0, 0, 0, 0, 0, 0};
  if (std::memcmp(b, kMapped, 12) == 0 || std::memcmp(b, kZero, 12) == 0 ||
      std::memcmp(b, kNat64, 12) == 0) {
    // IPv4-mapped (::ffff:a.b.c.d), NAT64 (64:ff9b::a.b.c.d) and IPv4-compatible
    // (::a.b.c.d, which also covers :: and ::1): judged by the IPv4 address inside.
    const uint32_t a = (uint32_t{b[12]} << 24) | (uint32_t{b[13]} << 16) | (uint32_t{b[14]} << 8) | b[15];
    return std::memcmp(b, kZero, 12) == 0 ? (a <= 1 || v4(a)) : v4(a);
  }
  return (b[0] & 0xFE) == 0xFC ||                  // fc00::/7 unique local
         (b[0] == 0xFE && (b[1] & 0xC0) == 0x80) ||  // fe80::/10 link-local
         (b[0] == 0xFE && (b[1] & 0xC0) == 0xC0) ||  // fec0::/10 site-local (deprecated)
         b[0] == 0xFF;                              // multicast
}

std::string ContentPath(const std::string& out_dir, const std::string& hash,
                        const std::string& format) {
  return (fs::path(out_dir) / "fetched" / hash.substr(0, 2) / (hash + ExtensionFor(format)))
      .string();
}

Status RemoveStaleTempFiles(const std::string& out_dir, int64_t max_age_s) {
  std::error_code ec;
  fs::path dir = fs::path(out_dir) / "fetched" / "tmp";
  if (!fs::exists(dir, ec)) return Status::OK();
  const auto now = fs::file_time_type::clock::now();
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    if (it->path().extension() != ".part") continue;
    auto mtime = fs::last_write_time(it->path(), ec);
    if (ec) continue;  // gone meanwhile: another process finished with it
    if (now - mtime >= std::chrono::seconds(max_age_s)) fs::remove(it->path(), ec);
  }
  if (ec) return Status::IOError("cleaning " + dir.string() + ": " + ec.message());
  return Status::OK();
}


struct Fetcher::Impl {
  // One transfer in flight; curl holds a pointer to it, so it never moves.
  struct Transfer {
    Impl* impl = nullptr;
    size_t index = 0;
    std::string host;
    CURL* easy = nullptr;
    int fd = -1;
    std::string tmp_path;  // set only for a named temporary file (no O_TMPFILE)
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
  CURLM* multi = nullptr;
  std::string tmp_dir;
  std::unordered_set<std::string> made_dirs;
  bool tmpfile_ok = true;  // O_TMPFILE works here (turned off on the first refusal)
  uint64_t tmp_counter = 0;

  explicit Impl(FetchOptions o) : opt(std::move(o)) {
    GlobalInit();
    // Recorded paths must not depend on the working directory of the run that fetched.
    std::error_code ec;
    if (!opt.out_dir.empty()) {
      auto abs = fs::absolute(opt.out_dir, ec);
      if (!ec) opt.out_dir = abs.lexically_normal().string();
    }
    opt.concurrency = std::max(1, opt.concurrency);
    opt.per_host = std::max(1, opt.per_host);
    multi = curl_multi_init();
    // Our own queue keeps first requests under per_host; this also caps redirects.
    curl_multi_setopt(multi, CURLMOPT_MAX_HOST_CONNECTIONS, static_cast<long>(opt.per_host));
    curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, static_cast<long>(opt.concurrency));
    curl_multi_setopt(multi, CURLMOPT_PIPELINING, CURLPIPE_MULTIPLEX);
    tmp_dir = (fs::path(opt.out_dir) / "fetched" / "tmp").string();
    // Naming an O_TMPFILE file goes through /proc/self/fd (no CAP_DAC_READ_SEARCH).
    tmpfile_ok = ::access("/proc/self/fd", F_OK) == 0;
  }
  ~Impl() {
    curl_multi_cleanup(multi);
  }

  Status EnsureDir(const std::string& dir) {
    if (made_dirs.count(dir)) return Status::OK();
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) return Status::IOError("creating " + dir + ": " + ec.message());
    made_dirs.insert(dir);
    return Status::OK();
  }

  // An unnamed file (O_TMPFILE) vanishes by itself if we die; where the file system
  // lacks it, a named .part file that RemoveStaleTempFiles can clean up.
  Status OpenTemp(Transfer* t) {
    FM_RETURN_IF_ERROR(EnsureDir(tmp_dir));
    if (tmpfile_ok) {
      t->fd = ::open(tmp_dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
      if (t->fd >= 0) return Status::OK();
      if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)
        return Status::IOError("temporary file in " + tmp_dir + ": " + std::strerror(errno));
      tmpfile_ok = false;
    }
    t->tmp_path = tmp_dir + "/" + std::to_string(::getpid()) + "-" +
                  std::to_string(++tmp_counter) + ".part";
    t->fd = ::open(t->tmp_path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
    if (t->fd < 0) {
      std::string err = std::strerror(errno);
      t->tmp_path.clear();
      return Status::IOError("creating " + tmp_dir + "/*.part: " + err);
    }
    return Status::OK();
  }

  Status Flush(Transfer* t) {
    if (t->buf.empty()) return Status::OK();
    if (t->fd < 0) FM_RETURN_IF_ERROR(OpenTemp(t));
    if (!WriteAll(t->fd, t->buf.data(), t->buf.size()))
      return Status::IOError("writing a temporary file in " + tmp_dir + ": " +
                             std::strerror(errno));
    t->buf.clear();
    return Status::OK();
  }

  void DropTemp(Transfer* t) {
    if (t->fd >= 0) ::close(t->fd);
    t->fd = -1;
    if (!t->tmp_path.empty()) ::unlink(t->tmp_path.c_str());
    t->tmp_path.clear();
  }

  // Gives the complete file its content-addressed name. Same content already there
  // (another URL, another worker): keep that one, ours disappears.
  Status Publish(Transfer* t, const std::string& target) {
    FM_RETURN_IF_ERROR(Flush(t));
    if (t->fd < 0) FM_RETURN_IF_ERROR(OpenTemp(t));  // unreachable for a sniffed body
    FM_RETURN_IF_ERROR(EnsureDir(fs::path(target).parent_path().string()));
    if (t->tmp_path.empty()) {
      std::string proc = "/proc/self/fd/" + std::to_string(t->fd);
      if (::linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, target.c_str(), AT_SYMLINK_FOLLOW) != 0 &&
          errno != EEXIST)
        return Status::IOError("linking " + target + ": " + std::strerror(errno));
    } else {
      struct stat st;
      if (::stat(target.c_str(), &st) == 0) {
        ::unlink(t->tmp_path.c_str());
      } else if (::rename(t->tmp_path.c_str(), target.c_str()) != 0) {
        return Status::IOError("renaming to " + target + ": " + std::strerror(errno));
      }
      t->tmp_path.clear();
    }
    ::close(t->fd);
    t->fd = -1;
    return Status::OK();
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
      Status s = t->impl->Flush(t);
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

  static void Fail(FetchResult& r, FailureClass c, Status s) {
    r.failure = c;
    r.status = std::move(s);
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
        Status s = Publish(t, target);
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
    DropTemp(t);
    XXH3_freeState(t->xxh);
    t->xxh = nullptr;
    curl_multi_remove_handle(multi, e);
    curl_easy_cleanup(e);
    t->easy = nullptr;
  }

  static void MapCurlError(CURLcode rc, const std::string& msg, FetchResult& r) {
    switch (rc) {
      case CURLE_COULDNT_RESOLVE_HOST:
      case CURLE_COULDNT_RESOLVE_PROXY:
        return Fail(r, FailureClass::kDns, Status::IOError("DNS: " + msg));
      case CURLE_COULDNT_CONNECT:
      case CURLE_SSL_CONNECT_ERROR:
        return Fail(r, FailureClass::kConnect, Status::IOError("connect: " + msg));
      case CURLE_PEER_FAILED_VERIFICATION:
        return Fail(r, FailureClass::kConnect,
                    Status::InvalidArgument("TLS certificate: " + msg));
      case CURLE_OPERATION_TIMEDOUT:
        return Fail(r, FailureClass::kTimeout, Status::IOError("timeout: " + msg));
      case CURLE_FILESIZE_EXCEEDED:
        return Fail(r, FailureClass::kTooLarge,
                    Status::TooLarge("declared Content-Length over the size cap "
                                     "(fetch.max_bytes): " + msg));
      case CURLE_TOO_MANY_REDIRECTS:
        return Fail(r, FailureClass::kHttpStatus,
                    Status::InvalidArgument("too many redirects (fetch.max_redirects): " + msg));
      case CURLE_UNSUPPORTED_PROTOCOL:
      case CURLE_URL_MALFORMAT:
        return Fail(r, FailureClass::kBadUrl,
                    Status::InvalidArgument("only http and https are fetched: " + msg));
      default:  // resets, cut-off bodies (CURLE_PARTIAL_FILE), empty replies, ...
        return Fail(r, FailureClass::kTransfer, Status::IOError("transfer: " + msg));
    }
  }

  static void MapHttpStatus(int code, const std::string& retry_after, const std::string& where,
                            FetchResult& r) {
    std::string msg = "HTTP " + std::to_string(code) + where;
    if (code == 429 || code >= 500) r.retry_after_ms = ParseRetryAfter(retry_after);
    if (code == 429 || code == 503) return Fail(r, FailureClass::kHttpStatus, Status::Busy(msg));
    if (code >= 500 || code == 408) return Fail(r, FailureClass::kHttpStatus, Status::IOError(msg));
    if (code == 404 || code == 410) return Fail(r, FailureClass::kHttpStatus, Status::NotFound(msg));
    Fail(r, FailureClass::kHttpStatus, Status::InvalidArgument(msg));
  }

  // Scheme and host of an absolute http(s) URL, or why it is refused without a request.
  static Status ParseUrl(const std::string& url, std::string* host) {
    CURLU* u = curl_url();
    CURLUcode uc = curl_url_set(u, CURLUPART_URL, url.c_str(), 0);
    Status s;
    if (uc != CURLUE_OK) {
      s = Status::InvalidArgument(std::string("bad URL: ") + curl_url_strerror(uc) + " (" +
                                  url.substr(0, 200) + ")");
    } else {
      char* scheme = nullptr;
      char* h = nullptr;
      curl_url_get(u, CURLUPART_SCHEME, &scheme, 0);
      curl_url_get(u, CURLUPART_HOST, &h, 0);
      std::string sc = scheme ? Lower(scheme) : "";
      if (sc != "http" && sc != "https")
        s = Status::InvalidArgument("only http and https are fetched, not '" + sc + "' (" +
                                    url.substr(0, 200) + ")");
      else if (!h || !*h)
        s = Status::InvalidArgument("URL without a host (" + url.substr(0, 200) + ")");
      else
        *host = Lower(h);
      curl_free(scheme);
      curl_free(h);
    }
    curl_url_cleanup(u);
    return s;
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
      Status s = ParseUrl(urls[i], &host);
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
