// Where each buffer's tensor lies (engine/dnnl/ only). A tensor that a oneDNN primitive writes
// stays channels-last (NHWC) in its own buffer, the same bytes as NCHW, so the engine's memory
// plan holds, for as long as its readers take NHWC; an op that needs the plain NCHW the plan
// promises first turns it back in place (Plain), and so does Download. Layouts keeps, per
// buffer address, the 4-D shape of the NHWC tensor last written there (every write sets or
// clears it), and, per weights buffer, the layout its convolutions reordered it into.
#pragma once

#include <map>
#include <string>
#include <unordered_map>

#include "engine/dnnl/dnnl_internal.h"
#include "engine/dnnl/primitives.h"

namespace framemill::engine::dnnl_detail {

class Layouts {
 public:
  // `prims` makes the reorders (and notes a reference one into the step's note).
  Layouts(const dnnl::engine& eng, dnnl::stream& strm, Primitives& prims, StepNote& note)
      : eng_(eng), strm_(strm), prims_(prims), note_(note) {}

  // The block's lifetime: what lived in a freed block goes with it; an upload is plain.
  void Allocated(void* p, int64_t bytes) { live_[p] = bytes; }
  void Freed(void* p);
  void Uploaded(void* p) { nhwc_.erase(p); reordered_.erase(p); }

  const Nhwc* TagOf(const void* p) const {
    auto it = nhwc_.find(p);
    return it == nhwc_.end() ? nullptr : &it->second;
  }
  bool IsNhwc(const void* p, const Nhwc& s) const {
    const Nhwc* t = TagOf(p);
    return t && *t == s;
  }
  void Set(const void* p, const Nhwc& s) { nhwc_[p] = s; }
  void Clear(const void* p) { nhwc_.erase(p); }

  // Turns a channels-last buffer back into the plain NCHW the plan promises, in place.
  void Plain(const void* p);
  // Where `p`'s tensor is as `want`'s shape: its channels-last layout and type when it has
  // one of that shape, else (turned back first, if need be) plain fp32 NCHW.
  memory::desc MdOf(const void* p, const Nhwc& want);
  void Reorder(const void* src, const memory::desc& s, void* dst, const memory::desc& d);
  // `bytes` of `src` as the plan sees them (plain NCHW), into host memory.
  void Download(void* dst, const void* src, size_t bytes);

  // A convolution's weights in the layout its primitive chose (`chosen`), reordered once: in
  // the weights' own buffer where that layout is no larger (the pipeline's peak RSS: the plain
  // copy is not kept twice), else into a copy of their own, kept per weights and `owner`.
  memory WeightsFor(const memory::desc& chosen, const memory::desc& plain, const void* w, const void* owner);
  // Weights as the reference reads them (`plain`, OIHW fp32): `w` itself, or, where a
  // primitive reordered them in place, a plain copy in `tmp`.
  const void* PlainWeights(const memory::desc& plain, const void* w, Temp& tmp);

 private:
  dnnl::engine eng_;
  dnnl::stream& strm_;
  Primitives& prims_;
  StepNote& note_;
  std::map<const void*, int64_t> live_;  // allocated blocks' sizes, for Freed's tags
  std::unordered_map<const void*, Nhwc> nhwc_;
  std::unordered_map<std::string, memory> weights_;
  std::unordered_map<const void*, memory::desc> reordered_;  // weights reordered in place
  Temp plain_tmp_;
};

}  // namespace framemill::engine::dnnl_detail
