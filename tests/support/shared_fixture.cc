#include "tests/support/shared_fixture.h"

#include "tests/support/test_support.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>

namespace framemill::testing {
namespace fs = std::filesystem;

std::string FileKey(const std::string& path) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  const auto mtime = fs::last_write_time(path, ec).time_since_epoch();
  return std::to_string(size) + "-" +
         std::to_string(std::chrono::duration_cast<std::chrono::nanoseconds>(mtime).count());
}

SharedFolder MakeShared(const std::string& name, const std::string& key,
                        const std::function<std::string(const std::string& folder)>& make) {
  const fs::path root = FRAMEMILL_TEST_SHARED_DIR;
  fs::create_directories(root);
  const int lock = ::open((root / (name + ".lock")).c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0666);
  ::flock(lock, LOCK_EX);
  const fs::path folder = root / (name + "-" + std::to_string(std::hash<std::string>{}(key)));
  SharedFolder out{folder.string(), ""};
  if (fs::exists(folder / ".note")) {
    out.note = ReadFile((folder / ".note").string());
  } else {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(root, ec))  // what an older key made
      if (e.is_directory() && e.path().filename().string().rfind(name + "-", 0) == 0)
        fs::remove_all(e.path(), ec);
    fs::create_directories(folder);
    out.note = make(out.path);
    std::ofstream(folder / ".note.tmp") << out.note;
    fs::rename(folder / ".note.tmp", folder / ".note");
  }
  ::close(lock);
  return out;
}

}  // namespace framemill::testing
