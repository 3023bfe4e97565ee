#include "fetch/address_policy.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>

#include <cctype>
#include <cstdint>
#include <cstring>

namespace framemill::fetch {
namespace {

std::string Lower(const std::string& s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

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

Status ParseFetchUrl(const std::string& url, std::string* host) {
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

}  // namespace framemill::fetch
