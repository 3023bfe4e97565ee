// Why a download failed (FailureClass, fetch/fetcher.h): how libcurl's codes, HTTP statuses
// and Retry-After map to a class and a Status whose code says whether to retry. Pure
// functions, testable without a transfer.
#pragma once

#include <curl/curl.h>

#include <cstdint>
#include <string>

#include "fetch/fetcher.h"

namespace framemill::fetch {

// Sets r's failure class and status.
void Fail(FetchResult& r, FailureClass c, Status s);
// A transfer that ended with libcurl's error `rc`; `msg` says where.
void MapCurlError(CURLcode rc, const std::string& msg, FetchResult& r);
// A final response that is not 2xx; 429 and 5xx carry their Retry-After.
void MapHttpStatus(int code, const std::string& retry_after, const std::string& where, FetchResult& r);
// Retry-After is either delta-seconds or an HTTP date; -1 when neither parses. Saturates
// (a year of digits, a date centuries ahead) instead of overflowing.
int64_t ParseRetryAfter(const std::string& v);
// A wait for messages: "12 s", "3 days".
std::string FormatWait(int64_t ms);

}  // namespace framemill::fetch
