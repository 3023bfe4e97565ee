// The crawler tests' HTTP server: tests/fetch/fault_server.py started on 127.0.0.1 (port 0,
// printed on its first line), its URLs, and its request log (/__log). The server lives as
// long as this object. Header-only; not thread-safe.
#pragma once

#include <curl/curl.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/test_support.h"

namespace framemill::testing {

class FaultServer {
 public:
  // Starts the server, logging to `log_path`; `args` go to fault_server.py (e.g. a folder
  // of images to serve). port() is 0 when it did not come up within 5 s.
  explicit FaultServer(const std::string& log_path, std::vector<std::string> args = {}) {
    std::vector<std::string> argv = {"/usr/bin/python3",
                                     std::string(FRAMEMILL_SOURCE_DIR) + "/tests/fetch/fault_server.py"};
    argv.insert(argv.end(), args.begin(), args.end());
    pid_ = StartProcess(argv, {}, "", log_path);
    for (int i = 0; i < 100 && port_ == 0; ++i) {
      std::string out = std::filesystem::exists(log_path) ? ReadFile(log_path) : "";
      if (out.find('\n') != std::string::npos) port_ = std::stoi(out);
      else std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  ~FaultServer() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      WaitProcess(pid_);
    }
  }
  FaultServer(const FaultServer&) = delete;
  FaultServer& operator=(const FaultServer&) = delete;

  int port() const { return port_; }
  std::string Url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }
  // A control route's JSON answer (/__log, /__reset).
  nlohmann::json Get(const std::string& path) const {
    std::string body;
    CURL* e = curl_easy_init();
    curl_easy_setopt(e, CURLOPT_URL, Url(path).c_str());
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &Collect);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &body);
    curl_easy_perform(e);
    curl_easy_cleanup(e);
    return nlohmann::json::parse(body);
  }
  // How many times `path` was requested.
  int Requests(const std::string& path) const {
    auto counts = Get("/__log")["counts"];
    return counts.contains(path) ? counts[path].get<int>() : 0;
  }

 private:
  static size_t Collect(char* p, size_t s, size_t n, void* ud) {
    static_cast<std::string*>(ud)->append(p, s * n);
    return s * n;
  }
  pid_t pid_ = -1;
  int port_ = 0;
};

}  // namespace framemill::testing
