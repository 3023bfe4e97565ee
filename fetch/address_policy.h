// Which requests the crawler makes at all: only absolute http(s) URLs with a host, and, under
// fetch.block_private, no connection to a loopback, private or link-local address (checked at
// every connection curl opens, after DNS and at each redirect: the SSRF guard). Pure functions.
#pragma once

#include <sys/socket.h>

#include <string>

#include "base/status.h"

namespace framemill::fetch {

// Whether connecting to this address is refused under block_private (see FetchOptions).
bool IsPrivateAddress(const struct sockaddr* addr);

// The lower-cased host of an absolute http(s) URL, or why it is refused without a request.
Status ParseFetchUrl(const std::string& url, std::string* host);

}  // namespace framemill::fetch
