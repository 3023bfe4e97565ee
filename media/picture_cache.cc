#include "media/picture_cache.h"

#include <exception>
#include <new>

#include "base/time_split.h"

namespace framemill {

struct PictureCache::Entry {
  enum State { kQueued, kDecoding, kDone } state = kQueued;
  Result<cv::Mat> picture = Status::Internal("not decoded yet");
  uint64_t generation = 0;
};

namespace {

// DecodeImageFile, with what OpenCV or the allocator throws turned into the item's failure
// (as the stages' own decoding does): a decoding thread must not die of one bad file.
Result<cv::Mat> DecodeGuarded(const std::string& path, const ImageLimits& limits) {
  try {
    return DecodeImageFile(path, limits);
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory("out of host memory decoding " + path);
  } catch (const std::exception& e) {
    return Status::Corruption(std::string("decoding failed: ") + e.what());
  }
}

int64_t BytesOf(const Result<cv::Mat>& r) {
  return r.ok() ? static_cast<int64_t>(r->total() * r->elemSize()) : 0;
}

}  // namespace

PictureCache::PictureCache(PictureCacheOptions options)
    : options_(std::move(options)), budget_bytes_(options_.budget_mb << 20) {
  for (int i = 0; i < options_.threads; ++i) threads_.emplace_back([this] { DecodeLoop(); });
}

PictureCache::~PictureCache() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stopping_ = true;
    queue_.clear();
  }
  queued_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void PictureCache::Prefetch(const std::string& path) {
  if (threads_.empty()) return;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (entries_.count(path) > 0) return;
    auto e = std::make_shared<Entry>();
    e->generation = generation_;
    entries_.emplace(path, std::move(e));
    queue_.push_back(path);
  }
  queued_.notify_one();
}

void PictureCache::DecodeLoop() {
  std::unique_lock<std::mutex> l(mu_);
  for (;;) {
    queued_.wait(l, [this] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    const std::string path = std::move(queue_.front());
    queue_.pop_front();
    auto it = entries_.find(path);
    if (it == entries_.end() || it->second->state != Entry::kQueued) continue;  // cleared, or a Get took it
    if (held_bytes_ >= budget_bytes_) {
      entries_.erase(it);  // no room ahead: its first Get decodes it
      continue;
    }
    std::shared_ptr<Entry> e = it->second;
    e->state = Entry::kDecoding;
    l.unlock();
    Fill(path, e);
    l.lock();
  }
}

void PictureCache::Fill(const std::string& path, const std::shared_ptr<Entry>& e) {
  Result<cv::Mat> picture = DecodeGuarded(path, options_.limits);
  const int64_t bytes = BytesOf(picture);
  {
    std::lock_guard<std::mutex> l(mu_);
    ++stats_.decoded;
    e->picture = std::move(picture);
    e->state = Entry::kDone;
    auto it = entries_.find(path);
    const bool current = it != entries_.end() && it->second == e && e->generation == generation_;
    if (current && held_bytes_ + bytes <= budget_bytes_) {
      held_bytes_ += bytes;
    } else if (current) {
      ++stats_.not_kept;  // its waiters have it; later stages decode it again
      entries_.erase(it);
    }
  }
  decoded_.notify_all();
}

Result<cv::Mat> PictureCache::Get(const std::string& path, const ImageLimits& limits) {
  if (!(limits == options_.limits)) return DecodeGuarded(path, limits);
  std::unique_lock<std::mutex> l(mu_);
  auto it = entries_.find(path);
  if (it != entries_.end() && it->second->state != Entry::kQueued) {
    std::shared_ptr<Entry> e = it->second;
    if (e->state == Entry::kDecoding) {
      TimeSpent waiting(TimePart::kDecode);  // the job waits for its picture
      decoded_.wait(l, [&] { return e->state == Entry::kDone; });
    } else {
      ++stats_.reused;
    }
    return e->picture;
  }
  // Not held, or queued and not started: decoded here, now.
  std::shared_ptr<Entry> e;
  if (it != entries_.end()) {
    e = it->second;
  } else {
    e = std::make_shared<Entry>();
    e->generation = generation_;
    entries_.emplace(path, e);
  }
  e->state = Entry::kDecoding;
  l.unlock();
  Fill(path, e);
  return e->picture;
}

void PictureCache::Clear() {
  std::lock_guard<std::mutex> l(mu_);
  ++generation_;
  entries_.clear();
  queue_.clear();
  held_bytes_ = 0;
}

PictureCacheStats PictureCache::stats() const {
  std::lock_guard<std::mutex> l(mu_);
  return stats_;
}

int64_t PictureCache::held_bytes() const {
  std::lock_guard<std::mutex> l(mu_);
  return held_bytes_;
}

}  // namespace framemill
