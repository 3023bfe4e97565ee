// Placement of a plan's buffers (plan_builder.h): weights packed one after another, activations
// in one arena, each at the lowest offset free over its lifetime.
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <numeric>
#include <set>

#include "engine/plan_builder.h"

namespace framemill::engine::plan_detail {

// Greedy best-offset placement, largest buffers first: each goes at the lowest offset
// where it overlaps no placed buffer whose lifetime intersects its own.
void PlanBuilder::Place() {
  std::vector<int> order;
  int64_t woff = 0;
  for (size_t b = 0; b < plan_.buffers.size(); ++b) {
    Buffer& buf = plan_.buffers[b];
    if (buf.weight) {
      buf.offset = woff;
      woff += AlignUp(buf.bytes);
    } else {
      order.push_back(static_cast<int>(b));
      plan_.activation_bytes += AlignUp(buf.bytes);
    }
  }
  plan_.weight_bytes = woff;
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return plan_.buffers[a].bytes > plan_.buffers[b].bytes;
  });
  std::vector<int> placed;
  int64_t arena = 0;
  for (int b : order) {
    Buffer& buf = plan_.buffers[b];
    int64_t size = AlignUp(buf.bytes);
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (int o : placed) {
      const Buffer& ob = plan_.buffers[o];
      if (ob.first_step <= buf.last_step && buf.first_step <= ob.last_step)
        busy.emplace_back(ob.offset, ob.offset + AlignUp(ob.bytes));
    }
    std::sort(busy.begin(), busy.end());
    int64_t off = 0;
    for (const auto& [lo, hi] : busy) {
      if (off + size <= lo) break;
      off = std::max(off, hi);
    }
    buf.offset = off;
    arena = std::max(arena, off + size);
    placed.push_back(b);
  }
  plan_.arena_bytes = arena;
  int64_t scratch = 0;
  for (const Step& s : plan_.steps) scratch = std::max(scratch, s.scratch_bytes);
  plan_.scratch_bytes = AlignUp(scratch);
}

}  // namespace framemill::engine::plan_detail
