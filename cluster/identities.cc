#include "cluster/identities.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "cluster/cluster.h"
#include "gpu/ops.h"
#include "media/geometry.h"

namespace framemill::cluster {
namespace {

float Cosine(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size() || a.empty()) return -1;
  const int n = static_cast<int>(a.size());
  const float ab = gpu::DotCpu(a.data(), b.data(), n);
  const float aa = gpu::DotCpu(a.data(), a.data(), n), bb = gpu::DotCpu(b.data(), b.data(), n);
  return aa > 0 && bb > 0 ? ab / std::sqrt(aa * bb) : -1;
}

bool FaceOrder(const FaceRef& a, const FaceRef& b) {
  return std::tie(a.item, a.frame, a.face) < std::tie(b.item, b.frame, b.face);
}

// Tracks within each item of `faces` (sorted by FaceOrder), as indices into `faces`.
std::vector<std::vector<size_t>> TracksOf(const std::vector<FaceRef>& faces, const IdentityOptions& o) {
  std::vector<std::vector<size_t>> tracks;
  for (size_t b = 0, e; b < faces.size(); b = e) {
    for (e = b; e < faces.size() && faces[e].item == faces[b].item;) ++e;
    std::vector<FaceRef> item(faces.begin() + b, faces.begin() + e);
    for (auto& t : LinkTracks(item, o)) {
      for (size_t& i : t) i += b;
      tracks.push_back(std::move(t));
    }
  }
  return tracks;
}

// One unit point per track: the normalised sum of its faces' unit embeddings.
Result<Embeddings> TrackPoints(const std::vector<FaceRef>& faces,
                               const std::vector<std::vector<size_t>>& tracks) {
  Embeddings e;
  e.n = static_cast<int64_t>(tracks.size());
  e.dim = faces.empty() ? 1 : static_cast<int>(faces[0].embedding.size());
  for (const FaceRef& f : faces)
    if (static_cast<int>(f.embedding.size()) != e.dim)
      return Status::InvalidArgument(
          "face embeddings of different sizes (" + std::to_string(e.dim) + " and " +
          std::to_string(f.embedding.size()) +
          "): the faces stage ran with different embedding models; rerun it with one");
  e.data.assign(static_cast<size_t>(e.n) * e.dim, 0.f);
  for (size_t t = 0; t < tracks.size(); ++t) {
    for (size_t i : tracks[t]) {
      const std::vector<float>& v = faces[i].embedding;
      const float norm = std::sqrt(std::max(1e-12f, gpu::DotCpu(v.data(), v.data(), e.dim)));
      for (int d = 0; d < e.dim; ++d) e.data[t * e.dim + d] += v[d] / norm;
    }
  }
  Normalize(&e);
  return e;
}

// Tracks whose best face is good enough to found an identity.
std::vector<bool> SeedsOf(const std::vector<FaceRef>& faces,
                          const std::vector<std::vector<size_t>>& tracks, double seed_quality) {
  std::vector<bool> seed(tracks.size(), false);
  for (size_t t = 0; t < tracks.size(); ++t) {
    float q = 0;
    for (size_t i : tracks[t]) q = std::max(q, faces[i].quality);
    seed[t] = q >= seed_quality;
  }
  return seed;
}

ClusterOptions ClusterOptionsOf(const IdentityOptions& o) {
  ClusterOptions co;
  co.hdbscan.min_cluster_size = o.min_cluster_size;
  co.hdbscan.max_distance = static_cast<float>(1.0 - o.similarity);
  co.member_similarity = static_cast<float>(o.member_similarity);
  co.hdbscan.epsilon = static_cast<float>(std::max(0.0, 1.0 - o.split_similarity));
  co.neighbours = o.neighbours;
  co.exact_up_to = o.exact_up_to;
  return co;
}

// Clusters the seeds' points; the labels per track (-1: none yet), and how the graph was built.
Result<std::vector<int>> ClusterSeeds(const Embeddings& e, const std::vector<bool>& seed,
                                      const IdentityOptions& o, gpu::ComputeBackend* device,
                                      Identities* out) {
  Embeddings seeds;
  seeds.dim = e.dim;
  std::vector<size_t> seed_track;
  for (size_t t = 0; t < seed.size(); ++t) {
    if (!seed[t]) continue;
    seed_track.push_back(t);
    seeds.data.insert(seeds.data.end(), e.row(static_cast<int64_t>(t)), e.row(static_cast<int64_t>(t)) + e.dim);
  }
  seeds.n = static_cast<int64_t>(seed_track.size());
  auto run = ClusterEmbeddings(seeds, ClusterOptionsOf(o), device);
  if (!run.ok()) return run.status();
  out->seeds = seed_track.size();
  out->graph = run->graph;
  out->bridges = run->bridges;
  std::vector<int> label(seed.size(), -1);
  for (size_t j = 0; j < seed_track.size(); ++j) label[seed_track[j]] = run->clustering.label[j];
  return label;
}

// Members (faces, not tracks) per identity, in item order, and the noise; the representative
// is the member whose track is closest to the identity's mean direction.
void GatherMembers(const std::vector<std::vector<size_t>>& tracks, const Embeddings& e,
                   const std::vector<int>& label, Identities* out) {
  const int clusters = label.empty() ? 0 : std::max(0, *std::max_element(label.begin(), label.end()) + 1);
  out->members.assign(clusters, {});
  std::vector<std::vector<float>> mean(clusters, std::vector<float>(e.dim, 0.f));
  for (size_t t = 0; t < tracks.size(); ++t) {
    const int l = label[t];
    for (size_t i : tracks[t]) (l >= 0 ? out->members[l] : out->noise).push_back(i);
    if (l >= 0)
      for (int d = 0; d < e.dim; ++d) mean[l][d] += e.data[t * e.dim + d];
  }
  out->representative.assign(clusters, 0);
  std::vector<float> best(clusters, -2.f);
  for (size_t t = 0; t < tracks.size(); ++t) {
    const int l = label[t];
    if (l < 0) continue;
    const float s = gpu::DotCpu(mean[l].data(), e.row(static_cast<int64_t>(t)), e.dim);
    if (s > best[l]) {
      best[l] = s;
      out->representative[l] = tracks[t].front();
    }
  }
  for (auto& m : out->members) std::sort(m.begin(), m.end());
  std::sort(out->noise.begin(), out->noise.end());
}

}  // namespace

std::string FaceRef::Key() const {
  return item + '\x1f' + std::to_string(frame) + '\x1f' + std::to_string(face);
}

Result<Identities> FindIdentities(std::vector<FaceRef> faces, const IdentityOptions& options,
                                  gpu::ComputeBackend* device) {
  Identities out;
  std::stable_sort(faces.begin(), faces.end(), FaceOrder);
  // Tracks within each item, then one point per track.
  const std::vector<std::vector<size_t>> tracks = TracksOf(faces, options);
  auto e = TrackPoints(faces, tracks);
  if (!e.ok()) return e.status();
  const std::vector<bool> seed = SeedsOf(faces, tracks, options.seed_quality);
  auto label = ClusterSeeds(*e, seed, options, device, &out);
  if (!label.ok()) return label.status();
  std::vector<int> l = AttachToClusters(*e, seed, std::move(label).value(),
                                        static_cast<float>(options.member_similarity));
  // Two faces seen in the same picture at the same time are two people: a cluster keeps at
  // most one track of any (item, frame).
  l = SeparateCoOccurring(faces, tracks, *e, std::move(l), options.min_cluster_size);
  GatherMembers(tracks, *e, l, &out);
  out.tracks = tracks.size();
  out.faces = std::move(faces);
  return out;
}

std::vector<std::vector<size_t>> LinkTracks(const std::vector<FaceRef>& faces,
                                            const IdentityOptions& o) {
  std::map<int64_t, std::vector<size_t>> by_frame;
  for (size_t i = 0; i < faces.size(); ++i) by_frame[faces[i].frame].push_back(i);
  std::vector<std::vector<size_t>> tracks;
  std::vector<size_t> open;  // tracks whose last face is in the previous sampled frame
  for (const auto& [frame, here] : by_frame) {
    std::vector<std::tuple<float, size_t, size_t>> pairs;  // (-similarity, track, face)
    if (frame >= 0) {
      for (size_t t : open) {
        const FaceRef& last = faces[tracks[t].back()];
        for (size_t f : here) {
          if (IoU(last.box, faces[f].box) < o.track_iou) continue;
          const float s = Cosine(last.embedding, faces[f].embedding);
          if (s >= o.track_similarity) pairs.emplace_back(-s, t, f);
        }
      }
    }
    std::sort(pairs.begin(), pairs.end());
    std::vector<size_t> next;
    std::vector<bool> used_track(tracks.size(), false), used_face(faces.size(), false);
    for (const auto& [neg, t, f] : pairs) {
      if (used_track[t] || used_face[f]) continue;
      used_track[t] = used_face[f] = true;
      tracks[t].push_back(f);
      next.push_back(t);
    }
    for (size_t f : here) {
      if (used_face[f]) continue;
      tracks.push_back({f});
      next.push_back(tracks.size() - 1);
    }
    open = frame >= 0 ? next : std::vector<size_t>{};
  }
  return tracks;
}

std::vector<int> AttachToClusters(const Embeddings& e, const std::vector<bool>& seed,
                                  std::vector<int> label, float min_similarity) {
  const int clusters = label.empty() ? 0 : *std::max_element(label.begin(), label.end()) + 1;
  std::vector<float> mean(static_cast<size_t>(std::max(0, clusters)) * e.dim, 0.f);
  for (int64_t t = 0; t < e.n; ++t)
    if (label[t] >= 0)
      for (int d = 0; d < e.dim; ++d) mean[static_cast<size_t>(label[t]) * e.dim + d] += e.row(t)[d];
  for (int l = 0; l < clusters; ++l) {
    float* m = mean.data() + static_cast<size_t>(l) * e.dim;
    const float norm = std::sqrt(std::max(1e-12f, gpu::DotCpu(m, m, e.dim)));
    for (int d = 0; d < e.dim; ++d) m[d] /= norm;
  }
  for (int64_t t = 0; t < e.n; ++t) {
    if (seed[t] || label[t] >= 0) continue;
    int best = -1;
    float best_s = min_similarity;
    for (int l = 0; l < clusters; ++l) {
      const float s = gpu::DotCpu(mean.data() + static_cast<size_t>(l) * e.dim, e.row(t), e.dim);
      if (s >= best_s) best_s = s, best = l;
    }
    label[t] = best;
  }
  return label;
}

std::vector<int> SeparateCoOccurring(const std::vector<FaceRef>& faces,
                                     const std::vector<std::vector<size_t>>& tracks,
                                     const Embeddings& e, std::vector<int> label,
                                     int min_cluster_size) {
  // The (item, frame) pairs a track is seen in: two tracks sharing one are two people.
  auto seen = [&](size_t t) {
    std::set<std::pair<std::string, int64_t>> at;
    for (size_t i : tracks[t]) at.emplace(faces[i].item, faces[i].frame);
    return at;
  };
  std::map<int, std::vector<size_t>> by_cluster;
  for (size_t t = 0; t < tracks.size(); ++t)
    if (label[t] >= 0) by_cluster[label[t]].push_back(t);
  for (auto& [l, members] : by_cluster) {
    std::vector<float> mean(e.dim, 0.f);
    for (size_t t : members)
      for (int d = 0; d < e.dim; ++d) mean[d] += e.data[t * e.dim + d];
    // Closest to the cluster's direction first: it keeps its place, a track seen beside a
    // kept one leaves for the noise.
    std::sort(members.begin(), members.end(), [&](size_t a, size_t b) {
      return gpu::DotCpu(mean.data(), e.row(static_cast<int64_t>(a)), e.dim) >
             gpu::DotCpu(mean.data(), e.row(static_cast<int64_t>(b)), e.dim);
    });
    std::set<std::pair<std::string, int64_t>> taken;
    std::vector<size_t> kept;
    for (size_t t : members) {
      const auto at = seen(t);
      const bool clash = std::any_of(at.begin(), at.end(), [&](const auto& p) { return taken.count(p); });
      if (clash) {
        label[t] = -1;
        continue;
      }
      taken.insert(at.begin(), at.end());
      kept.push_back(t);
    }
    if (static_cast<int>(kept.size()) < min_cluster_size)
      for (size_t t : kept) label[t] = -1;
  }
  std::map<int, int> renumber;  // clusters left, numbered 0.. in their old order
  for (int l : label)
    if (l >= 0) renumber.emplace(l, 0);
  int next = 0;
  for (auto& [old, now] : renumber) now = next++;
  for (int& l : label)
    if (l >= 0) l = renumber[l];
  return label;
}

}  // namespace framemill::cluster
