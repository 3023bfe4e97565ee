#include "fetch/failures.h"

#include <algorithm>
#include <cstdio>
#include <ctime>

namespace framemill::fetch {

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

void Fail(FetchResult& r, FailureClass c, Status s) {
  r.failure = c;
  r.status = std::move(s);
}

void MapCurlError(CURLcode rc, const std::string& msg, FetchResult& r) {
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

void MapHttpStatus(int code, const std::string& retry_after, const std::string& where,
                          FetchResult& r) {
  std::string msg = "HTTP " + std::to_string(code) + where;
  if (code == 429 || code >= 500) r.retry_after_ms = ParseRetryAfter(retry_after);
  if (code == 429 || code == 503) return Fail(r, FailureClass::kHttpStatus, Status::Busy(msg));
  if (code >= 500 || code == 408) return Fail(r, FailureClass::kHttpStatus, Status::IOError(msg));
  if (code == 404 || code == 410) return Fail(r, FailureClass::kHttpStatus, Status::NotFound(msg));
  Fail(r, FailureClass::kHttpStatus, Status::InvalidArgument(msg));
}

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

}  // namespace framemill::fetch
