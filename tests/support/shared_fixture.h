// What several test processes of one ctest run can share, made once: ctest runs each test
// in a process of its own, so a suite's SetUpTestSuite runs once per test. A suite whose
// set-up is a whole run of the binary (ReportBinaryTest's analysed store: 25 s on the
// 2-core VM, for each of its four tests) makes it here once and each test works on a copy.
#pragma once

#include <functional>
#include <string>

namespace framemill::testing {

// The folder that holds `name` made for `key` (say, the binary and models it was made
// with), under the build's test-shared/. The first process to ask makes it with
// `make(folder)`, which returns a note kept beside it (what the set-up saw); the others
// wait for it (a file lock), then get the same folder and note. A different key replaces
// what was made before. Treat the folder as read-only: copy what a test changes.
struct SharedFolder {
  std::string path;
  std::string note;
};
SharedFolder MakeShared(const std::string& name, const std::string& key,
                        const std::function<std::string(const std::string& folder)>& make);

// A key that changes whenever the file at `path` does (its size and modification time).
std::string FileKey(const std::string& path);

}  // namespace framemill::testing
