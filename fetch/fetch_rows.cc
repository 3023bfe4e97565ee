// The crawler's settings: each fetch.* key bound to its field of FetchOptions.
#include "fetch/fetcher.h"

namespace framemill::fetch {

void AddFetchRows(FetchOptions* o, OptionRows* rows) {
  rows->push_back(IntRow("fetch.concurrency", "FRAMEMILL_FETCH_CONCURRENCY", "",
                         {&o->concurrency}, 1, 4096));
  rows->push_back(IntRow("fetch.per_host", "FRAMEMILL_FETCH_PER_HOST", "", {&o->per_host}, 1,
                         4096));
  rows->push_back(IntRow("fetch.connect_timeout_ms", "FRAMEMILL_FETCH_CONNECT_TIMEOUT_MS", "",
                         {&o->connect_timeout_ms}, 1, 3'600'000));
  rows->push_back(IntRow("fetch.timeout_ms", "FRAMEMILL_FETCH_TIMEOUT_MS", "",
                         {&o->total_timeout_ms}, 1, 86'400'000));
  rows->push_back(IntRow("fetch.max_bytes", "FRAMEMILL_FETCH_MAX_BYTES", "", {&o->max_bytes}, 1,
                         1'000'000'000'000));
  rows->push_back(IntRow("fetch.max_redirects", "FRAMEMILL_FETCH_MAX_REDIRECTS", "",
                         {&o->max_redirects}, 0, 100));
  rows->push_back(TextRow("fetch.user_agent", "FRAMEMILL_FETCH_USER_AGENT", "", &o->user_agent));
  rows->push_back(IntRow("fetch.max_retry_after_ms", "FRAMEMILL_FETCH_MAX_RETRY_AFTER_MS", "",
                         {&o->max_retry_after_ms}, 0, 30LL * 86'400'000));
  rows->push_back(BoolRow("fetch.block_private", "FRAMEMILL_FETCH_BLOCK_PRIVATE",
                          &o->block_private));
}

}  // namespace framemill::fetch
