// The crawler's download engine: many HTTP(S) transfers at once on libcurl's multi
// interface, each streamed into a temporary file of the content store
// (fetch/content_store.h), hashed (xxh3-128) and sniffed by magic bytes while it arrives,
// and stored under its content hash only when complete. Which requests are made at all is
// fetch/address_policy.h; how a failed transfer is classed, fetch/failures.h.
// Thread-safety: a Fetcher is not thread-safe; use one per worker thread. Distinct
// Fetchers (threads or processes) may share one out_dir.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/option_rows.h"
#include "base/status.h"
#include "fetch/address_policy.h"
#include "fetch/content_store.h"
#include "media/kind.h"

namespace framemill::fetch {

struct FetchOptions {  // the fetch.* settings, filled by the CLI
  int concurrency = 64;  // transfers in flight per Fetcher
  int per_host = 16;     // in flight per host (of the first URL; redirects are capped by
                         // curl's per-host connection limit, set to the same number)
  int64_t connect_timeout_ms = 5000, total_timeout_ms = 30000;
  int64_t max_bytes = 64 << 20;  // enforced while streaming (the transfer is aborted)
  int max_redirects = 5;
  std::string user_agent = "framemill/0.1";
  std::string out_dir;  // downloads land in out_dir/fetched/<hh>/<hash><ext>; made absolute
  // A 429/5xx asking to retry later than this fails for good (kRetryAfterTooLong).
  int64_t max_retry_after_ms = 300'000;
  // Refuse connections to loopback, private, link-local, CGNAT, multicast and unspecified
  // addresses (IPv4, IPv6 and IPv4-mapped), checked on the address actually connected to:
  // after DNS, and at every redirect. Tests serving from 127.0.0.1 turn it off.
  bool block_private = true;

  bool operator==(const FetchOptions&) const = default;
};

// The fetch.* rows bound to `o` (fetch/fetch_rows.cc): fetch.timeout_ms is total_timeout_ms.
void AddFetchRows(FetchOptions* o, OptionRows* rows);

// Why a download failed. The Status code in FetchResult says whether to retry.
//  kDns        name did not resolve                               transient (IOError)
//  kConnect    refused / unreachable / TLS handshake               transient (IOError);
//              certificate verification failed                     permanent (InvalidArgument)
//  kTimeout    connect or total timeout                            transient (IOError)
//  kHttpStatus 429, 503                                            transient (Busy), retry_after_ms
//              other 5xx, 408                                      transient (IOError)
//              404, 410                                            permanent (NotFound)
//              other 4xx, a final 1xx/3xx, too many redirects      permanent (InvalidArgument)
//  kTooLarge   over max_bytes (declared or streamed)               permanent (TooLarge)
//  kNotMedia   bytes are not an image or video (whatever the
//              Content-Type), or the body is empty                 permanent (Unsupported)
//  kBadUrl     unparsable URL, or a scheme other than http/https
//              for the first request or any redirect               permanent (InvalidArgument)
//  kTransfer   reset, cut off (Content-Length mismatch), other     transient (IOError)
// A redirect loop ends after max_redirects as kHttpStatus (http_status = the last 3xx).
enum class FailureClass {
  kNone, kDns, kConnect, kTimeout, kHttpStatus, kTooLarge, kNotMedia, kBadUrl, kTransfer,
  kRetryAfterTooLong, kBlockedAddress
};
const char* FailureClassName(FailureClass);  // "none","dns","connect","timeout","http_status",
                                             // "too_large","not_media","bad_url","transfer",
                                             // "retry_after_too_long","blocked_address"

struct FetchResult {
  Status status;  // OK, or a code whose IsTransient() says whether to retry (table above)
  FailureClass failure = FailureClass::kNone;
  int http_status = 0;          // last response's status code, 0 when none arrived
  int64_t retry_after_ms = -1;  // from Retry-After (seconds or HTTP date) on 429/5xx
  std::string path;             // final file (content-addressed), when ok
  std::string content_hash;     // 32 hex digits: xxh3-128 of the bytes
  int64_t bytes = 0;            // body bytes received (also on failure)
  MediaKind kind = MediaKind::kImage;  // sniffed from the bytes, when ok
  std::string format;           // "jpeg", "png", "mp4", ... (decides the file extension)
  std::string final_url;        // after redirects
  double seconds = 0;           // from the transfer's start to its end
};

class Fetcher {
 public:
  explicit Fetcher(FetchOptions o);
  ~Fetcher();
  Fetcher(const Fetcher&) = delete;
  Fetcher& operator=(const Fetcher&) = delete;

  // Downloads all urls concurrently, honouring the concurrency and per-host caps.
  // One result per url, in the same order. Never retries by itself: the caller
  // decides from each status (and retry_after_ms) when to try again.
  std::vector<FetchResult> FetchAll(const std::vector<std::string>& urls);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace framemill::fetch
