#include "cli/enqueue.h"

#include <dirent.h>
#include <sys/stat.h>
#include <tbb/parallel_for.h>
#include <xxhash.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/json_text.h"
#include "cli/url_list.h"
#include "media/content_hash.h"
#include "media/sniff.h"

namespace framemill {
namespace fs = std::filesystem;
namespace {

// Items per transaction: 100k URLs into PostgreSQL in one went 10-15% faster than in ten
// (each commit and each ANALYZE of a grown jobs table costs; bench/README.md, "Enqueue
// through the command line"). A list of millions is still written 100k at a time.
constexpr size_t kChunk = 100'000;
constexpr size_t kHeadBytes = 256 * 1024;  // enough for any image header we probe

struct Candidate {
  std::string path;    // where this machine reads it
  std::string source;  // what the store records: the path in canonical form (PathMap)
  int64_t size = 0, mtime_ns = 0;
  bool known_unchanged = false;
  // Filled by the reader:
  bool keep = false;
  std::string skip_reason;
  NewItem item;
};

constexpr size_t kMaxRejectedExamples = 20;

void ReadAndClassify(Candidate& c) {
  std::FILE* f = std::fopen(c.path.c_str(), "rb");
  if (f == nullptr) {
    c.skip_reason = "unreadable";
    return;
  }
  XXH3_state_t* st = XXH3_createState();
  XXH3_64bits_reset(st);
  std::string head;
  // One read buffer per TBB thread, not a fresh zero-filled MiB per file.
  thread_local std::vector<char> buf(1 << 20);
  size_t n;
  int64_t total = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), f)) > 0) {
    XXH3_64bits_update(st, buf.data(), n);
    if (head.size() < kHeadBytes) head.append(buf.data(), std::min(n, kHeadBytes - head.size()));
    total += static_cast<int64_t>(n);
  }
  bool err = std::ferror(f);
  std::fclose(f);
  uint64_t h = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  if (err) {
    c.skip_reason = "unreadable";
    return;
  }
  c.item.source = c.source;
  c.item.size = total;
  c.item.mtime_ns = c.mtime_ns;
  c.item.content_hash = ContentHashHex(h);
  nlohmann::json info = nlohmann::json::object();
  auto sniffed = SniffMedia(head);
  if (sniffed) {
    c.item.kind = sniffed->kind;
    info["format"] = sniffed->format;
    if (sniffed->kind == MediaKind::kImage) {
      auto hdr = ProbeImageHeader(head, sniffed->format);
      if (hdr.ok()) {
        info["width"] = hdr->width;
        info["height"] = hdr->height;
      }
    }
    c.keep = true;
  } else if (auto k = KindFromExtension(c.path)) {
    // Named like media but is not: keep it, so its job fails with the reason recorded
    // where the user will look, rather than vanishing into a skip count.
    c.item.kind = *k;
    info["format"] = nullptr;
    info["note"] = "content does not match the file extension";
    c.keep = true;
  } else {
    c.skip_reason = total == 0 ? "empty file" : "not an image or video";
  }
  c.item.media_info = JsonDump(info);
}

// One `enqueue` call, step by step: sources into candidate files and URL lists; which
// files must be read; reading them; writing files, then URL lists, in large transactions.
class Enqueuer {
 public:
  Enqueuer(JobStore& store, const EnqueueOptions& options,
           const std::function<void(const EnqueueProgress&)>& progress)
      : store_(store), options_(options), progress_(progress) {}

  Result<EnqueueReport> Run(const std::vector<std::string>& sources) {
    for (const std::string& src : sources) FM_RETURN_IF_ERROR(Expand(src));
    report_.files_seen = static_cast<int64_t>(files_.size());
    auto to_read = FilesToRead();
    if (!to_read.ok()) return to_read.status();
    ReadFiles(*to_read);
    FM_RETURN_IF_ERROR(WriteFiles());
    for (const auto& [path, format] : url_lists_) FM_RETURN_IF_ERROR(WriteUrlList(path, format));
    prog_.done = true;
    Tell();
    return std::move(report_);
  }

 private:
  void Tell() {
    if (progress_) progress_(prog_);
  }

  void AddFile(const fs::path& p) {
    struct stat sb;
    if (::stat(p.c_str(), &sb) != 0 || !S_ISREG(sb.st_mode)) return;
    Candidate c;
    c.path = p.string();
    c.source = options_.path_map.ToCanonical(c.path);
    c.size = sb.st_size;
    c.mtime_ns = static_cast<int64_t>(sb.st_mtim.tv_sec) * 1'000'000'000 + sb.st_mtim.tv_nsec;
    files_.push_back(std::move(c));
    ++prog_.files_seen;
    if (prog_.files_seen % 20'000 == 0) Tell();
  }

  // An entry the walk could not read: counted with its reason, and the walk goes on.
  void Unreadable(const std::string& path, int err) {
    const std::string reason = std::strerror(err);
    if (report_.unreadable[reason]++ == 0) report_.unreadable_example[reason] = path;
  }

  // Every regular file under `root` (symbolic links to files too; links to directories
  // are not followed, so a loop cannot trap the walk). An entry that cannot be read (a
  // directory removed or locked mid-walk, a name past PATH_MAX, no file descriptors
  // left, a dangling link) is skipped and counted, never the end of the walk.
  void Walk(const std::string& root) {
    std::vector<std::string> dirs{root};
    while (!dirs.empty()) {
      const std::string dir = std::move(dirs.back());
      dirs.pop_back();
      DIR* d = opendir(dir.c_str());
      if (d == nullptr) {
        Unreadable(dir, errno);
        continue;
      }
      for (;;) {
        errno = 0;
        const dirent* e = readdir(d);
        if (e == nullptr) {
          if (errno != 0) Unreadable(dir, errno);
          break;
        }
        const std::string name = e->d_name;
        if (name == "." || name == "..") continue;
        const std::string path = dir.back() == '/' ? dir + name : dir + "/" + name;
        struct stat sb;
        if (lstat(path.c_str(), &sb) != 0) {
          Unreadable(path, errno);
        } else if (S_ISDIR(sb.st_mode)) {
          dirs.push_back(path);
        } else if (S_ISLNK(sb.st_mode)) {
          if (stat(path.c_str(), &sb) != 0) Unreadable(path, errno);
          else if (S_ISREG(sb.st_mode)) AddFile(path);
        } else if (S_ISREG(sb.st_mode)) {
          AddFile(path);
        }
      }
      closedir(d);
    }
  }

  // A source into candidate files (a directory, recursively) or a URL list.
  Status Expand(const std::string& src) {
    std::error_code ec;
    fs::path p = fs::absolute(src, ec).lexically_normal();
    auto status = fs::status(p, ec);
    if (ec || !fs::exists(status))
      return Status::InvalidArgument("source '" + src + "': no such file or directory");
    if (fs::is_directory(status)) {
      // No trailing separator: the same file must get the same source however the
      // directory was spelled ("media/./sub/../").
      Walk(p.has_filename() ? p.string() : p.parent_path().string());
      return Status::OK();
    }
    if (!fs::is_regular_file(status))
      return Status::InvalidArgument("source '" + src + "' is neither a file nor a directory");
    // Named like a list and not media by its bytes: a URL list. Only a source named
    // on the command line is read as one; a .txt inside a directory is just a file.
    if (auto format = UrlListFormatOf(p.string())) {
      auto head = ReadFileBytes(p.string(), 64);
      if (!head.ok() || !SniffMedia(*head)) {
        url_lists_.emplace_back(p.string(), *format);
        return Status::OK();
      }
    }
    AddFile(p);
    return Status::OK();
  }

  // Indices of the files that must be read: those not stored, or whose size or mtime
  // moved. The others keep what the store knows.
  Result<std::vector<size_t>> FilesToRead() {
    auto known = store_.LoadItems();
    if (!known.ok()) return known.status();
    std::vector<size_t> to_read;
    for (size_t i = 0; i < files_.size(); ++i) {
      Candidate& c = files_[i];
      auto it = known->find(c.source);
      if (it != known->end() && it->second.size == c.size && it->second.mtime_ns == c.mtime_ns) {
        c.known_unchanged = true;
        c.keep = true;
        c.item.source = c.source;
        c.item.kind = it->second.kind;
        c.item.size = c.size;
        c.item.mtime_ns = c.mtime_ns;
        c.item.content_hash = it->second.content_hash;
      } else {
        to_read.push_back(i);
      }
    }
    prog_.to_read = static_cast<int64_t>(to_read.size());
    Tell();
    return to_read;
  }

  // Reads, sniffs and hashes in parallel, in chunks so progress and memory stay bounded.
  void ReadFiles(const std::vector<size_t>& to_read) {
    for (size_t start = 0; start < to_read.size(); start += kChunk) {
      size_t end = std::min(to_read.size(), start + kChunk);
      tbb::parallel_for(start, end, [&](size_t k) { ReadAndClassify(files_[to_read[k]]); });
      prog_.files_read = static_cast<int64_t>(end);
      Tell();
    }
  }

  Status Flush() {
    if (batch_.empty()) return Status::OK();
    auto st = store_.Enqueue(batch_, options_);
    if (!st.ok()) return st.status();
    EnqueueStats& r = report_.stats;
    r.items_added += st->items_added;
    r.items_changed += st->items_changed;
    r.items_unchanged += st->items_unchanged;
    r.jobs_added += st->jobs_added;
    r.jobs_requeued += st->jobs_requeued;
    r.jobs_not_applicable += st->jobs_not_applicable;
    prog_.items_written += static_cast<int64_t>(batch_.size());
    batch_.clear();
    Tell();
    return Status::OK();
  }

  Status WriteFiles() {
    for (Candidate& c : files_) {
      if (!c.keep) {
        ++report_.skipped[c.skip_reason];
        report_.skipped_example.emplace(c.skip_reason, c.path);
        continue;
      }
      ++report_.media_files;
      batch_.push_back(std::move(c.item));
      if (batch_.size() >= kChunk) FM_RETURN_IF_ERROR(Flush());
    }
    return Flush();
  }

  // Streamed: memory stays bounded by one transaction's items.
  Status WriteUrlList(const std::string& path, UrlListFormat format) {
    ++report_.url_lists;
    UrlListReport list;
    Status s = ReadUrlList(
        path, format,
        [&](UrlEntry&& e) -> Status {
          NewItem item;
          item.source = std::move(e.url);
          item.is_url = true;
          // The fetch stage sees the metadata through media_info (and records it in its
          // result); once fetched, media_info describes the file instead.
          item.media_info = "{\"metadata\":" + e.metadata + "}";
          item.metadata = std::move(e.metadata);
          if (batch_.empty()) batch_.reserve(kChunk);  // growing it was 9% of enqueue's CPU
          batch_.push_back(std::move(item));
          ++prog_.urls_read;
          if (batch_.size() >= kChunk) return Flush();
          return Status::OK();
        },
        &list);
    FM_RETURN_IF_ERROR(s);
    FM_RETURN_IF_ERROR(Flush());
    report_.urls_seen += list.urls;
    for (const auto& [reason, n] : list.rejected) report_.urls_rejected[reason] += n;
    for (const BadLine& b : list.examples)
      if (report_.rejected_examples.size() < kMaxRejectedExamples)
        report_.rejected_examples.push_back(path + ":" + std::to_string(b.line) + ": " + b.reason);
    return Status::OK();
  }

  JobStore& store_;
  const EnqueueOptions& options_;
  const std::function<void(const EnqueueProgress&)>& progress_;
  EnqueueReport report_;
  EnqueueProgress prog_;
  std::vector<Candidate> files_;
  std::vector<std::pair<std::string, UrlListFormat>> url_lists_;
  std::vector<NewItem> batch_;
};

}  // namespace

Result<EnqueueReport> EnqueueSources(JobStore& store, const std::vector<std::string>& sources,
                                     const EnqueueOptions& options,
                                     const std::function<void(const EnqueueProgress&)>& progress) {
  return Enqueuer(store, options, progress).Run(sources);
}

}  // namespace framemill
