#include "engine/dnnl/layouts.h"

#include "engine/dnnl/own_loops.h"

#include <algorithm>

namespace framemill::engine::dnnl_detail {

void Layouts::Freed(void* p) {
  auto it = live_.find(p);
  if (it == live_.end()) return;
  const char* lo = static_cast<const char*>(p);
  auto inside = [&](const void* q) { return q >= lo && static_cast<const char*>(q) < lo + it->second; };
  std::erase_if(nhwc_, [&](const auto& t) { return inside(t.first); });
  std::erase_if(reordered_, [&](const auto& t) { return inside(t.first); });
  live_.erase(it);
}

void Layouts::Plain(const void* p) {
  auto it = nhwc_.find(p);
  if (it == nhwc_.end()) return;
  const Nhwc s = it->second;
  nhwc_.erase(it);
  const size_t bytes = static_cast<size_t>(s.elements()) * 4;
  void* t = plain_tmp_.Get(bytes);
  Reorder(p, s.md(), t, memory::desc(s.dims(), Dt::f32, Tag::nchw));
  ParallelCopy(const_cast<void*>(p), t, bytes);
}

memory::desc Layouts::MdOf(const void* p, const Nhwc& want) {
  if (const Nhwc* t = TagOf(p); t && t->dims() == want.dims()) return t->md();
  Plain(p);
  return memory::desc(want.dims(), Dt::f32, Tag::nchw);
}

void Layouts::Reorder(const void* src, const memory::desc& s, void* dst, const memory::desc& d) {
  memory sm(s, eng_, const_cast<void*>(src)), dm(d, eng_, dst);
  prims_.Reorder(s, d, &note_).execute(strm_, sm, dm);
}

void Layouts::Download(void* dst, const void* src, size_t bytes) {
  const Nhwc* t = TagOf(src);
  if (t && static_cast<size_t>(t->elements()) * 4 == bytes) {
    Reorder(src, t->md(), dst, memory::desc(t->dims(), Dt::f32, Tag::nchw));
  } else {
    Plain(src);
    ParallelCopy(dst, src, bytes);
  }
}

memory Layouts::WeightsFor(const memory::desc& chosen, const memory::desc& plain, const void* w, const void* owner) {
  auto t = reordered_.find(w);
  const memory::desc have = t == reordered_.end() ? plain : t->second;
  if (chosen == have) return memory(chosen, eng_, const_cast<void*>(w));
  if (t == reordered_.end() && chosen.get_size() <= plain.get_size()) {
    void* tmp = plain_tmp_.Get(chosen.get_size());
    Reorder(w, have, tmp, chosen);
    std::memcpy(const_cast<void*>(w), tmp, chosen.get_size());
    reordered_[w] = chosen;
    return memory(chosen, eng_, const_cast<void*>(w));
  }
  std::string key(reinterpret_cast<const char*>(&w), sizeof w);
  key.append(reinterpret_cast<const char*>(&owner), sizeof owner);
  auto it = weights_.find(key);
  if (it != weights_.end()) return it->second;
  memory src(have, eng_, const_cast<void*>(w));
  memory dst(chosen, eng_);
  prims_.Reorder(have, chosen, &note_).execute(strm_, src, dst);
  return weights_.emplace(key, dst).first->second;
}

const void* Layouts::PlainWeights(const memory::desc& plain, const void* w, Temp& tmp) {
  auto t = reordered_.find(w);
  if (t == reordered_.end()) return w;
  void* out = tmp.Get(plain.get_size());
  Reorder(w, t->second, out, plain);
  return out;
}

}  // namespace framemill::engine::dnnl_detail
