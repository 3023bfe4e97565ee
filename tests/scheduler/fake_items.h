// Items for the worker tests, whose stages read no files: /data/img-<i>.png, hash "h<i>".
#pragma once

#include <string>
#include <vector>

#include "storage/job_store.h"

namespace framemill::testing {

inline std::string FakeSource(int i) { return "/data/img-" + std::to_string(i) + ".png"; }

inline NewItem FakeImage(int i) {
  NewItem it;
  it.source = FakeSource(i);
  it.kind = MediaKind::kImage;
  it.size = 100 + i;
  it.mtime_ns = 1;
  it.content_hash = "h" + std::to_string(i);
  return it;
}

inline std::vector<NewItem> FakeImages(int n) {
  std::vector<NewItem> items;
  for (int i = 0; i < n; ++i) items.push_back(FakeImage(i));
  return items;
}

}  // namespace framemill::testing
