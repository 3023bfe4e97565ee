// The pictures of a worker's claim, each decoded once (issue 38). A worker claims an item's
// jobs of several stages together (JobStore::ClaimItems); the neural stages read the same
// full-size BGR picture, so it is decoded once for all of them, instead of once per stage.
// With decode threads, the pictures are decoded ahead, in parallel, while the worker's
// thread runs the device on what is already decoded.
//
// Memory is bounded: a picture is kept while the pictures held stay within
// `budget_mb` (a larger one is decoded for its caller and not kept), and the worker
// forgets the claim's pictures when it is done with them (Clear). A decode that fails is
// kept as its Status, so every stage of that item fails with the same reason and the file
// is not read again.
//
// The pictures are shared (cv::Mat headers over one buffer): a caller must not write to
// one. Thread-safety: Prefetch, Get and Clear may be called from any thread; the decoding
// threads are the cache's own.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <opencv2/core.hpp>

#include "base/status.h"
#include "media/image.h"

namespace framemill {

struct PictureCacheOptions {
  // Threads that decode ahead (Prefetch); 0: none, each picture is decoded by its first
  // Get, on the caller's thread, and kept for the stages after it.
  int threads = 0;
  int64_t budget_mb = 512;  // MiB of pictures kept at once, at most (run.picture_cache_mb)
  ImageLimits limits;                  // media.max_image_pixels: what every stage decodes with
};

// How the pictures of a cache fared (a worker's whole life).
struct PictureCacheStats {
  int64_t decoded = 0;   // decodes done (each picture once, unless it did not fit the budget)
  int64_t reused = 0;    // Gets served by an earlier decode
  int64_t not_kept = 0;  // pictures decoded for their caller alone: over the budget
};

class PictureCache {
 public:
  explicit PictureCache(PictureCacheOptions options);
  ~PictureCache();  // waits for the decodes under way
  PictureCache(const PictureCache&) = delete;
  PictureCache& operator=(const PictureCache&) = delete;

  // Queues `path` to be decoded on the cache's threads, unless it is held or queued already
  // (no-op without threads).
  void Prefetch(const std::string& path);
  // The picture at `path` decoded with `limits`: the one held (waiting, as decoding time, for
  // a decode under way), else decoded now on this thread and kept if it fits. Other limits
  // than the cache's bypass it.
  Result<cv::Mat> Get(const std::string& path, const ImageLimits& limits);
  // Forgets every picture held and drops the queue (a decode under way finishes, unkept).
  void Clear();

  PictureCacheStats stats() const;
  int64_t held_bytes() const;

 private:
  struct Entry;
  void DecodeLoop();
  // Decodes `path` into `e` and keeps it if it fits (called without the lock).
  void Fill(const std::string& path, const std::shared_ptr<Entry>& e);

  const PictureCacheOptions options_;
  const int64_t budget_bytes_;
  mutable std::mutex mu_;
  std::condition_variable queued_;   // the decoding threads wait on it
  std::condition_variable decoded_;  // a Get waits on it for a decode under way
  std::map<std::string, std::shared_ptr<Entry>> entries_;
  std::deque<std::string> queue_;
  int64_t held_bytes_ = 0;
  uint64_t generation_ = 0;  // Clear's count: a decode of an older claim is not kept
  bool stopping_ = false;
  PictureCacheStats stats_;
  std::vector<std::thread> threads_;
};

}  // namespace framemill
