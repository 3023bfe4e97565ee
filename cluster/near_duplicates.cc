#include "cluster/near_duplicates.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <set>

#include <opencv2/img_hash.hpp>
#include <opencv2/imgproc.hpp>

#include "cluster/knn.h"
#include "cluster/union_find.h"

namespace framemill::cluster {
namespace {

constexpr int kSharpnessSide = 256;

double Sharpness(const cv::Mat& bgr) {
  cv::Mat gray, small, lap;
  cv::cvtColor(bgr, gray, cv::COLOR_BGR2GRAY);
  const double scale = static_cast<double>(kSharpnessSide) / std::max(gray.cols, gray.rows);
  if (scale < 1) cv::resize(gray, small, cv::Size(), scale, scale, cv::INTER_AREA);
  else small = gray;
  cv::Laplacian(small, lap, CV_32F);
  cv::Scalar mean, sd;
  cv::meanStdDev(lap, mean, sd);
  return sd[0] * sd[0];
}

// v scaled to unit length; one with no length (zero, or not finite) becomes zero.
std::vector<float> Unit(std::vector<float> v) {
  double norm = 0;
  for (float x : v) norm += double(x) * x;
  if (!(norm > 0)) return std::vector<float>(v.size(), 0.f);
  for (float& x : v) x = static_cast<float>(x / std::sqrt(norm));
  return v;
}

int Hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

double Cosine(const PictureSignature& a, const PictureSignature& b) {
  if (a.embedding.size() != b.embedding.size()) return 0;
  double dot = 0;
  for (size_t i = 0; i < a.embedding.size(); ++i) dot += double(a.embedding[i]) * b.embedding[i];
  return dot;
}

// Pairs to join by the hash. Pictures with one hash are chained (n - 1 pairs, not n^2: a
// dataset of blank frames is one group, not a quadratic blow-up); then the distinct hashes
// that differ in at most `max_distance` bits are paired, one picture of each. With
// max_distance < 8, two such hashes agree exactly on at least one of the 8 bytes
// (pigeonhole), so only hashes sharing a byte in place are compared.
std::vector<std::pair<size_t, size_t>> HashPairs(const std::vector<PictureSignature>& p, int max_distance) {
  std::map<uint64_t, std::vector<size_t>> by_hash;
  for (size_t i = 0; i < p.size(); ++i) by_hash[p[i].phash].push_back(i);
  std::vector<std::pair<size_t, size_t>> out;
  std::vector<uint64_t> hashes;
  for (const auto& [h, ids] : by_hash) {
    hashes.push_back(h);
    for (size_t k = 1; k < ids.size(); ++k) out.push_back({ids[0], ids[k]});
  }
  std::set<std::pair<uint64_t, uint64_t>> near;
  auto consider = [&](uint64_t a, uint64_t b) {
    if (a != b && HammingDistance(a, b) <= max_distance) near.insert({std::min(a, b), std::max(a, b)});
  };
  if (max_distance < 8) {
    for (int band = 0; band < 8; ++band) {
      std::map<int, std::vector<uint64_t>> buckets;
      for (uint64_t h : hashes) buckets[static_cast<int>((h >> (8 * band)) & 0xFF)].push_back(h);
      for (const auto& [key, hs] : buckets)
        for (size_t x = 0; x < hs.size(); ++x)
          for (size_t y = x + 1; y < hs.size(); ++y) consider(hs[x], hs[y]);
    }
  } else {
    for (size_t a = 0; a < hashes.size(); ++a)
      for (size_t b = a + 1; b < hashes.size(); ++b) consider(hashes[a], hashes[b]);
  }
  for (const auto& [a, b] : near) {
    const size_t x = by_hash[a].front(), y = by_hash[b].front();
    out.push_back({std::min(x, y), std::max(x, y)});
  }
  return out;
}

// Pairs whose embeddings are at least `min_similarity` alike, from each picture's nearest.
Result<std::vector<std::pair<size_t, size_t>>> EmbeddingPairs(const std::vector<PictureSignature>& p,
                                                              const NearDuplicateOptions& o, std::string* how) {
  std::vector<std::pair<size_t, size_t>> out;
  const int dim = p.empty() ? 0 : static_cast<int>(p.front().embedding.size());
  Embeddings e;
  e.n = static_cast<int64_t>(p.size());
  e.dim = dim;
  for (const auto& s : p) {
    if (static_cast<int>(s.embedding.size()) != dim) return Status::InvalidArgument("embeddings of different lengths");
    e.data.insert(e.data.end(), s.embedding.begin(), s.embedding.end());
  }
  if (e.n < 2 || dim == 0) return out;
  const int k = static_cast<int>(std::min<int64_t>(o.neighbours, e.n - 1));
  Result<KnnGraph> g = Status::OK();
  if (e.n <= o.exact_up_to) {
    auto cpu = gpu::MakeCpuBackend();
    g = ExactKnn(e, k, *cpu);
    *how = "exact";
  } else {
    g = HnswKnn(e, k);
    *how = "hnsw";
  }
  if (!g.ok()) return g.status();
  std::set<std::pair<size_t, size_t>> pairs;
  for (int64_t i = 0; i < g->n; ++i)
    for (int j = 0; j < g->k; ++j) {
      const int32_t other = g->ids[i * g->k + j];
      if (other < 0 || 1.0 - g->dist[i * g->k + j] < o.candidate_similarity) continue;
      pairs.insert({std::min<size_t>(i, other), std::max<size_t>(i, other)});
    }
  return std::vector<std::pair<size_t, size_t>>(pairs.begin(), pairs.end());
}

}  // namespace

int HammingDistance(uint64_t a, uint64_t b) { return std::popcount(a ^ b); }

PictureSignature MakeSignature(const cv::Mat& bgr, const std::vector<float>& embedding) {
  PictureSignature s;
  cv::Mat hash;
  cv::img_hash::pHash(bgr, hash);  // 8 bytes
  for (int i = 0; i < 8 && i < static_cast<int>(hash.total()); ++i)
    s.phash |= static_cast<uint64_t>(hash.at<uint8_t>(i)) << (8 * i);
  s.embedding = Unit(embedding);
  s.pixels = static_cast<int64_t>(bgr.total());
  s.sharpness = Sharpness(bgr);
  return s;
}

nlohmann::json ToJson(const PictureSignature& s) {
  char hash[17];
  std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(s.phash));
  static const char* kDigits = "0123456789abcdef";
  std::string emb;
  emb.reserve(s.embedding.size() * 2);
  for (float v : s.embedding) {
    const int q = std::clamp(static_cast<int>(std::lround(v * 127)), -127, 127);
    const auto b = static_cast<uint8_t>(static_cast<int8_t>(q));
    emb += kDigits[b >> 4];
    emb += kDigits[b & 15];
  }
  return {{"phash", hash}, {"embedding", emb}, {"pixels", s.pixels}, {"bytes", s.bytes}, {"sharpness", s.sharpness}};
}

Result<PictureSignature> SignatureFromJson(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("phash") || !j.contains("embedding") || !j["phash"].is_string() ||
      !j["embedding"].is_string())
    return Status::Corruption("a signature needs phash and embedding strings");
  PictureSignature s;
  const std::string h = j["phash"].get<std::string>(), e = j["embedding"].get<std::string>();
  if (h.size() != 16 || e.size() % 2 != 0) return Status::Corruption("a signature's hex has the wrong length");
  for (char c : h) {
    const int d = Hex(c);
    if (d < 0) return Status::Corruption("a signature's phash is not hex");
    s.phash = (s.phash << 4) | static_cast<uint64_t>(d);
  }
  for (size_t i = 0; i < e.size(); i += 2) {
    const int hi = Hex(e[i]), lo = Hex(e[i + 1]);
    if (hi < 0 || lo < 0) return Status::Corruption("a signature's embedding is not hex");
    s.embedding.push_back(static_cast<float>(static_cast<int8_t>(static_cast<uint8_t>(hi * 16 + lo))) / 127.f);
  }
  s.embedding = Unit(std::move(s.embedding));
  s.pixels = j.value("pixels", int64_t{0});
  s.bytes = j.value("bytes", int64_t{0});
  s.sharpness = j.value("sharpness", 0.0);
  return s;
}

namespace {

// Groups of pictures joined into one, with more than one item: the representative is the
// largest (pixels, then bytes, then sharpness; ties the first), each member with the signal
// that joined it and its cosine to the representative; in representative order.
std::vector<DuplicateGroup> GroupsOf(const std::vector<PictureSignature>& p, UnionFind<size_t>& uf,
                                     const std::vector<std::string>& signal_of,
                                     const std::function<int64_t(size_t)>& item) {
  std::map<size_t, std::vector<size_t>> by_root;
  for (size_t i = 0; i < p.size(); ++i) by_root[uf.Find(i)].push_back(i);
  std::vector<DuplicateGroup> out;
  for (const auto& [root, ids] : by_root) {
    std::set<int64_t> items;
    for (size_t id : ids) items.insert(item(id));
    if (items.size() < 2) continue;
    DuplicateGroup g;
    g.representative = *std::max_element(ids.begin(), ids.end(), [&](size_t a, size_t b) {
      if (p[a].pixels != p[b].pixels) return p[a].pixels < p[b].pixels;
      if (p[a].bytes != p[b].bytes) return p[a].bytes < p[b].bytes;
      if (p[a].sharpness != p[b].sharpness) return p[a].sharpness < p[b].sharpness;
      return a > b;  // ties: the first
    });
    for (size_t id : ids) {
      if (id == g.representative) continue;
      // The signal of the pair that first joined it; the cosine to the representative.
      g.members.push_back({id, Cosine(p[id], p[g.representative]), signal_of[id]});
    }
    out.push_back(std::move(g));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.representative < b.representative; });
  return out;
}

}  // namespace

Result<std::vector<DuplicateGroup>> GroupNearDuplicates(const std::vector<PictureSignature>& p,
                                                        const NearDuplicateOptions& o,
                                                        const ConfirmFn& confirm, GroupingStats* stats,
                                                        const std::vector<int64_t>& item_of) {
  if (!item_of.empty() && item_of.size() != p.size())
    return Status::InvalidArgument("item_of must name an item for every picture");
  const std::function<int64_t(size_t)> item = [&](size_t i) {
    return item_of.empty() ? static_cast<int64_t>(i) : item_of[i];
  };
  GroupingStats st;
  UnionFind<size_t> uf(static_cast<int64_t>(p.size()));
  std::map<int64_t, size_t> first_of_item;
  for (size_t i = 0; i < p.size(); ++i) uf.Join(first_of_item.emplace(item(i), i).first->second, i);
  std::set<std::pair<size_t, size_t>> joined;  // (a, b), a < b: pairs the hash proposed
  std::vector<std::string> signal_of(p.size());  // the signal of the first pair that joined it
  auto mark = [&](size_t a, size_t b, const char* signal) {
    if (signal_of[a].empty()) signal_of[a] = signal;
    if (signal_of[b].empty()) signal_of[b] = signal;
  };
  for (const auto& [a, b] : HashPairs(p, o.phash_distance)) {
    ++st.proposed_by_hash;
    uf.Join(a, b);
    joined.insert({a, b});
    mark(a, b, "phash");
  }
  auto emb = EmbeddingPairs(p, o, &st.neighbours);
  if (!emb.ok()) return emb.status();
  for (const auto& [a, b] : *emb) {
    if (joined.count({a, b})) continue;
    ++st.proposed_by_embedding;
    if (uf.Find(a) == uf.Find(b)) continue;  // already one group: nothing to confirm
    if (!confirm(a, b)) {
      ++st.refused;
      continue;
    }
    ++st.confirmed;
    uf.Join(a, b);
    mark(a, b, "embedding");
  }
  if (stats != nullptr) *stats = st;
  return GroupsOf(p, uf, signal_of, item);
}

}  // namespace framemill::cluster
