#include "outputs/webdataset.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <unordered_set>

#include "base/atomic_file.h"
#include "base/json_text.h"
#include "media/content_hash.h"
#include "outputs/clip_records.h"
#include "outputs/result_json.h"

namespace framemill {
namespace {

namespace fs = std::filesystem;

std::string ShardName(int64_t index) {
  char name[32];
  std::snprintf(name, sizeof name, "shard-%06lld.tar", static_cast<long long>(index));
  return name;
}

bool IsShardName(const std::string& name, int64_t* index) {
  if (name.size() != 16 || name.rfind("shard-", 0) != 0 || name.substr(12) != ".tar") return false;
  int64_t n = 0;
  for (char c : name.substr(6, 6)) {
    if (c < '0' || c > '9') return false;
    n = n * 10 + (c - '0');
  }
  *index = n;
  return true;
}

// The media file's bytes, checked against the content hash the results were made from.
Status ReadMedia(const std::string& path, const std::string& content_hash, std::string* bytes) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return Status::NotFound(std::string("cannot open ") + path + ": " + std::strerror(errno));
  bytes->clear();
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) bytes->append(buf, n);
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed) return Status::IOError("cannot read " + path);
  if (!content_hash.empty() && !ContentHashMatches(*bytes, content_hash))
    return Status::Corruption(path + " changed since it was analysed (its content hash is not "
                              "the store's " + content_hash + "); enqueue it again");
  return Status::OK();
}

// One tar shard being written: to a hidden temporary name, renamed into place by Finish.
class Shard {
 public:
  Shard(std::string dir, int64_t index)
      : final_(dir + "/" + ShardName(index)), temp_(dir + "/." + ShardName(index) + ".tmp") {}
  ~Shard() {
    if (archive_ != nullptr) archive_write_free(archive_);
    if (fd_ >= 0) ::close(fd_);
    if (!finished_) ::unlink(temp_.c_str());
  }

  Status Open() {
    fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) return Status::IOError("cannot write " + temp_ + ": " + std::strerror(errno));
    archive_ = archive_write_new();
    // POSIX pax, restricted: plain ustar headers unless a name or size needs more.
    if (archive_write_set_format_pax_restricted(archive_) != ARCHIVE_OK ||
        archive_write_set_bytes_in_last_block(archive_, 1) != ARCHIVE_OK ||
        archive_write_open_fd(archive_, fd_) != ARCHIVE_OK)
      return Error();
    return Status::OK();
  }

  Status Add(const std::string& name, const std::string& bytes, int64_t mtime_s) {
    std::unique_ptr<archive_entry, void (*)(archive_entry*)> e(archive_entry_new(),
                                                               archive_entry_free);
    archive_entry_set_pathname(e.get(), name.c_str());
    archive_entry_set_size(e.get(), static_cast<la_int64_t>(bytes.size()));
    archive_entry_set_filetype(e.get(), AE_IFREG);
    archive_entry_set_perm(e.get(), 0644);
    archive_entry_set_mtime(e.get(), mtime_s, 0);
    if (archive_write_header(archive_, e.get()) != ARCHIVE_OK) return Error();
    size_t off = 0;
    while (off < bytes.size()) {
      const la_ssize_t n = archive_write_data(archive_, bytes.data() + off, bytes.size() - off);
      if (n <= 0) return Error();
      off += static_cast<size_t>(n);
    }
    bytes_ += static_cast<int64_t>(bytes.size());
    return Status::OK();
  }

  // Completes the archive, makes it durable, then gives it its name.
  Status Finish() {
    if (archive_write_close(archive_) != ARCHIVE_OK) return Error();
    if (::fsync(fd_) != 0 || ::close(fd_) != 0) {
      fd_ = -1;
      return Status::IOError("writing " + temp_ + ": " + std::strerror(errno));
    }
    fd_ = -1;
    FM_RETURN_IF_ERROR(RenameIntoPlace(temp_, final_));
    finished_ = true;
    return Status::OK();
  }
  int64_t bytes() const { return bytes_; }

 private:
  Status Error() {
    const char* why = archive_ != nullptr ? archive_error_string(archive_) : nullptr;
    return Status::IOError("writing " + temp_ + ": " + (why ? why : std::strerror(errno)));
  }

  std::string final_, temp_;
  int fd_ = -1;
  archive* archive_ = nullptr;
  bool finished_ = false;
  int64_t bytes_ = 0;
};

void SyncDirectory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

// Shards beyond `count` left by an earlier export into the same directory, and temporary
// files of a killed one: removed, so the directory holds exactly this export.
int64_t RemoveStale(const std::string& dir, int64_t count) {
  int64_t removed = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    int64_t index = 0;
    const bool stale_shard = IsShardName(name, &index) && index >= count;
    const bool temp = name.rfind(".shard-", 0) == 0 && name.size() > 4 &&
                      name.substr(name.size() - 4) == ".tmp";
    if ((stale_shard || temp) && fs::remove(entry.path(), ec)) removed += stale_shard ? 1 : 0;
  }
  return removed;
}

}  // namespace

std::string WebDatasetKey(const ItemView& item, bool duplicate) {
  std::string key = item.content_hash;
  if (duplicate) key += "_" + std::to_string(item.id);
  return key;
}

std::string MediaExtension(const ItemView& item) {
  nlohmann::json info = nlohmann::json::parse(item.media_info, nullptr, false);
  std::string format = info.is_object() && info.value("format", nlohmann::json()).is_string()
                           ? info["format"].get<std::string>()
                           : "";
  if (format.empty()) {
    const std::string path = item.fetched_path.empty() ? item.source : item.fetched_path;
    format = fs::path(path).extension().string();
    if (!format.empty()) format.erase(0, 1);
  }
  std::string ext;
  for (char c : format) {
    if (std::isalnum(static_cast<unsigned char>(c))) ext += static_cast<char>(std::tolower(c));
  }
  if (ext == "jpeg") ext = "jpg";
  if (ext == "tiff") ext = "tif";
  return ext.empty() ? "bin" : ext;
}

namespace {

// Shards one after another: each sample's members go into the open shard, a new one is
// begun every `shard_size` samples, and Finish completes the last and removes stale ones.
class ShardSeries {
 public:
  ShardSeries(const WebDatasetOptions& options, WebDatasetStats* stats)
      : options_(options), stats_(stats) {}

  static Status MakeDirectory(const std::string& dir) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec || !fs::is_directory(dir))
      return Status::InvalidArgument("-o: cannot make the directory " + dir + ": " + ec.message());
    return Status::OK();
  }

  Status Add(const std::vector<std::pair<std::string, const std::string*>>& members, int64_t mtime_s) {
    if (shard_ == nullptr) {
      shard_ = std::make_unique<Shard>(options_.dir, stats_->shards);
      FM_RETURN_IF_ERROR(shard_->Open());
    }
    for (const auto& [name, bytes] : members) FM_RETURN_IF_ERROR(shard_->Add(name, *bytes, mtime_s));
    ++stats_->items;
    if (++in_shard_ == options_.shard_size) FM_RETURN_IF_ERROR(Close());
    return Status::OK();
  }

  Status Finish(Status walked) {
    if (walked.ok() && shard_ != nullptr) walked = Close();
    shard_.reset();
    if (!walked.ok()) return walked;
    stats_->stale_removed = RemoveStale(options_.dir, stats_->shards);
    SyncDirectory(options_.dir);
    return Status::OK();
  }

 private:
  Status Close() {
    FM_RETURN_IF_ERROR(shard_->Finish());
    stats_->bytes += shard_->bytes();
    ++stats_->shards;
    shard_.reset();
    in_shard_ = 0;
    return Status::OK();
  }

  const WebDatasetOptions& options_;
  WebDatasetStats* stats_;
  std::unique_ptr<Shard> shard_;
  int64_t in_shard_ = 0;
};

int64_t NewestFinish(const ItemView& item) {
  int64_t mtime_s = 0;
  for (const JobView& j : item.jobs) mtime_s = std::max(mtime_s, j.finished_at / 1000);
  return mtime_s;
}

}  // namespace

Result<WebDatasetStats> WriteWebDataset(JobStore& store, const WebDatasetOptions& options) {
  if (options.shard_size < 1) return Status::InvalidArgument("--shard-size must be at least 1");
  FM_RETURN_IF_ERROR(ShardSeries::MakeDirectory(options.dir));
  WebDatasetStats stats;
  ShardSeries shards(options, &stats);
  std::unordered_set<std::string> seen;
  std::string media;
  Status walked = store.ForEachItem([&](const ItemView& item) -> Status {
    if (item.kind == MediaKind::kDataset || !options.selection.Keeps(item.source)) return Status::OK();
    if (item.is_url && item.fetched_path.empty()) {
      stats.left_out.push_back(item.source + ": not fetched yet");
      return Status::OK();
    }
    const std::string path = options.path_map.ToLocal(item.is_url ? item.fetched_path : item.source);
    if (Status s = ReadMedia(path, item.content_hash, &media); !s.ok()) {
      stats.left_out.push_back(item.source + ": " + s.message());
      return Status::OK();
    }
    const bool duplicate = !seen.insert(item.content_hash).second;
    stats.duplicates += duplicate ? 1 : 0;
    const std::string key = WebDatasetKey(item, duplicate);
    const std::string json = JsonDump(ItemJson(item, key)) + "\n";
    return shards.Add({{key + "." + MediaExtension(item), &media}, {key + ".json", &json}}, NewestFinish(item));
  });
  FM_RETURN_IF_ERROR(shards.Finish(walked));
  return stats;
}

Result<WebDatasetStats> WriteClipsWebDataset(JobStore& store, const WebDatasetOptions& options,
                                             const ClipFilter& clips, const ExportFilter& found) {
  if (options.shard_size < 1) return Status::InvalidArgument("--shard-size must be at least 1");
  FM_RETURN_IF_ERROR(ShardSeries::MakeDirectory(options.dir));
  WebDatasetStats stats;
  ShardSeries shards(options, &stats);
  std::string media;
  Status walked = ForEachClip(store, options.selection, clips, found,
                              [&](const ItemView& item, const ClipRecord& r) -> Status {
    Status read = ReadMedia(options.path_map.ToLocal(r.artifact), "", &media);
    if (read.ok() && static_cast<int64_t>(media.size()) != r.clip.value("bytes", int64_t{-1}))
      read = Status::Corruption(r.artifact + " is not the clip the result names (its size differs)");
    if (!read.ok()) {
      stats.left_out.push_back(r.key + ": " + read.message());
      return Status::OK();
    }
    nlohmann::json meta = r.clip;
    meta.erase("artifact");
    SetBytesField(meta, "item", r.item);
    meta["key"] = r.key;
    const std::string json = JsonDump(meta) + "\n";
    return shards.Add({{r.key + ".mp4", &media}, {r.key + ".json", &json}}, NewestFinish(item));
  });
  FM_RETURN_IF_ERROR(shards.Finish(walked));
  return stats;
}

}  // namespace framemill
