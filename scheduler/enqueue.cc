#include "scheduler/enqueue.h"

#include <sys/stat.h>
#include <tbb/parallel_for.h>
#include <xxhash.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "scheduler/url_list.h"
#include "stages/media.h"

namespace framemill {
namespace fs = std::filesystem;
namespace {

constexpr size_t kChunk = 10'000;       // items per transaction
constexpr size_t kHeadBytes = 256 * 1024;  // enough for any image header we probe

struct Candidate {
  std::string path;
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
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  c.item.source = c.path;
  c.item.size = total;
  c.item.mtime_ns = c.mtime_ns;
  c.item.content_hash = hex;
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
  c.item.media_info = info.dump();
}

}  // namespace

Result<EnqueueReport> EnqueueSources(JobStore& store, const std::vector<std::string>& sources,
                                     const EnqueueOptions& options,
                                     const std::function<void(const EnqueueProgress&)>& progress) {
  EnqueueReport report;
  EnqueueProgress prog;
  auto tell = [&] {
    if (progress) progress(prog);
  };

  // 1. Expand sources into candidate files and URL lists.
  std::vector<Candidate> files;
  std::vector<std::pair<std::string, UrlListFormat>> url_lists;
  auto add_file = [&](const fs::path& p) {
    struct stat sb;
    if (::stat(p.c_str(), &sb) != 0 || !S_ISREG(sb.st_mode)) return;
    Candidate c;
    c.path = p.string();
    c.size = sb.st_size;
    c.mtime_ns = static_cast<int64_t>(sb.st_mtim.tv_sec) * 1'000'000'000 + sb.st_mtim.tv_nsec;
    files.push_back(std::move(c));
    ++prog.files_seen;
    if (prog.files_seen % 20'000 == 0) tell();
  };
  for (const std::string& src : sources) {
    std::error_code ec;
    fs::path p = fs::absolute(src, ec).lexically_normal();
    auto status = fs::status(p, ec);
    if (ec || !fs::exists(status))
      return Status::InvalidArgument("source '" + src + "': no such file or directory");
    if (fs::is_directory(status)) {
      auto it = fs::recursive_directory_iterator(
          p, fs::directory_options::skip_permission_denied, ec);
      if (ec) return Status::InvalidArgument("source '" + src + "': " + ec.message());
      for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
        if (ec) break;
        if (it->is_regular_file(ec)) add_file(it->path());
      }
    } else if (fs::is_regular_file(status)) {
      // Named like a list and not media by its bytes: a URL list. Only a source named
      // on the command line is read as one; a .txt inside a directory is just a file.
      if (auto format = UrlListFormatOf(p.string())) {
        auto head = ReadFileBytes(p.string(), 64);
        if (!head.ok() || !SniffMedia(*head)) {
          url_lists.emplace_back(p.string(), *format);
          continue;
        }
      }
      add_file(p);
    } else {
      return Status::InvalidArgument("source '" + src + "' is neither a file nor a directory");
    }
  }
  report.files_seen = static_cast<int64_t>(files.size());

  // 2. Which files must be read: those not stored, or whose size/mtime moved.
  auto known = store.LoadItems();
  if (!known.ok()) return known.status();
  std::vector<size_t> to_read;
  for (size_t i = 0; i < files.size(); ++i) {
    Candidate& c = files[i];
    auto it = known->find(c.path);
    if (it != known->end() && it->second.size == c.size && it->second.mtime_ns == c.mtime_ns) {
      c.known_unchanged = true;
      c.keep = true;
      c.item.source = c.path;
      c.item.kind = it->second.kind;
      c.item.size = c.size;
      c.item.mtime_ns = c.mtime_ns;
      c.item.content_hash = it->second.content_hash;
    } else {
      to_read.push_back(i);
    }
  }
  prog.to_read = static_cast<int64_t>(to_read.size());
  tell();

  // 3. Read, sniff and hash in parallel, in chunks so progress and memory stay bounded.
  for (size_t start = 0; start < to_read.size(); start += kChunk) {
    size_t end = std::min(to_read.size(), start + kChunk);
    tbb::parallel_for(start, end, [&](size_t k) { ReadAndClassify(files[to_read[k]]); });
    prog.files_read = static_cast<int64_t>(end);
    tell();
  }

  // 4. Write in large transactions.
  std::vector<NewItem> batch;
  auto flush = [&]() -> Status {
    if (batch.empty()) return Status::OK();
    auto st = store.Enqueue(batch, options);
    if (!st.ok()) return st.status();
    report.stats.items_added += st->items_added;
    report.stats.items_changed += st->items_changed;
    report.stats.items_unchanged += st->items_unchanged;
    report.stats.jobs_added += st->jobs_added;
    report.stats.jobs_requeued += st->jobs_requeued;
    report.stats.jobs_not_applicable += st->jobs_not_applicable;
    prog.items_written += static_cast<int64_t>(batch.size());
    batch.clear();
    tell();
    return Status::OK();
  };
  for (Candidate& c : files) {
    if (!c.keep) {
      ++report.skipped[c.skip_reason];
      report.skipped_example.emplace(c.skip_reason, c.path);
      continue;
    }
    ++report.media_files;
    batch.push_back(std::move(c.item));
    if (batch.size() >= kChunk) FM_RETURN_IF_ERROR(flush());
  }
  FM_RETURN_IF_ERROR(flush());

  // 5. URL lists, streamed: memory stays bounded by one transaction's items.
  for (const auto& [path, format] : url_lists) {
    ++report.url_lists;
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
          batch.push_back(std::move(item));
          ++prog.urls_read;
          if (batch.size() >= kChunk) return flush();
          return Status::OK();
        },
        &list);
    FM_RETURN_IF_ERROR(s);
    FM_RETURN_IF_ERROR(flush());
    report.urls_seen += list.urls;
    for (const auto& [reason, n] : list.rejected) report.urls_rejected[reason] += n;
    for (const BadLine& b : list.examples)
      if (report.rejected_examples.size() < kMaxRejectedExamples)
        report.rejected_examples.push_back(path + ":" + std::to_string(b.line) + ": " + b.reason);
  }
  prog.done = true;
  tell();
  return report;
}

}  // namespace framemill
