#include "stages/face_clusters_stage.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <optional>
#include <tuple>

#include "cluster/cluster.h"
#include "cluster/stable_ids.h"
#include "gpu/ops.h"
#include "jobs/stage_names.h"
#include "media/geometry.h"

namespace framemill {
namespace {

constexpr const char* kOperation = "FACE_CLUSTERING";

float Cosine(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size() || a.empty()) return -1;
  const int n = static_cast<int>(a.size());
  const float ab = gpu::DotCpu(a.data(), b.data(), n);
  const float aa = gpu::DotCpu(a.data(), a.data(), n), bb = gpu::DotCpu(b.data(), b.data(), n);
  return aa > 0 && bb > 0 ? ab / std::sqrt(aa * bb) : -1;
}

Status ParseFaces(const nlohmann::json& faces, const std::string& item, int64_t frame,
                  std::vector<FaceRef>* out) {
  if (!faces.is_array()) return Status::Corruption("`faces` is not a list");
  for (size_t i = 0; i < faces.size(); ++i) {
    const nlohmann::json& f = faces[i];
    if (!f.is_object() || !f.contains("embedding") || !f["embedding"].is_array() ||
        !f.contains("box") || !f["box"].is_array() || f["box"].size() != 4)
      return Status::Corruption("face " + std::to_string(i) + " has no box or embedding");
    FaceRef r;
    r.item = item;
    r.frame = frame;
    r.face = static_cast<int>(i);
    for (int k = 0; k < 4; ++k) {
      if (!f["box"][k].is_number()) return Status::Corruption("a box value is not a number");
      r.box[k] = f["box"][k].get<float>();
    }
    r.embedding.reserve(f["embedding"].size());
    for (const auto& v : f["embedding"]) {
      if (!v.is_number()) return Status::Corruption("an embedding value is not a number");
      r.embedding.push_back(v.get<float>());
    }
    if (r.embedding.empty()) return Status::Corruption("an embedding is empty");
    if (f.contains("quality") && f["quality"].is_number()) r.quality = f["quality"].get<float>();
    out->push_back(std::move(r));
  }
  return Status::OK();
}

nlohmann::json MemberJson(const FaceRef& f) {
  nlohmann::json m = {{"item", f.item}};
  if (f.frame >= 0) m["frame"] = f.frame;
  m["face"] = f.face;
  return m;
}

bool FaceOrder(const FaceRef& a, const FaceRef& b) {
  return std::tie(a.item, a.frame, a.face) < std::tie(b.item, b.frame, b.face);
}

// The previous result's ids by member key, and its next id.
cluster::PreviousIds PreviousOf(const nlohmann::json* previous) {
  cluster::PreviousIds p;
  if (previous == nullptr || !previous->is_object()) return p;
  if (previous->contains("next_id") && (*previous)["next_id"].is_number_integer())
    p.next_id = (*previous)["next_id"].get<int64_t>();
  if (!previous->contains("clusters") || !(*previous)["clusters"].is_array()) return p;
  for (const auto& c : (*previous)["clusters"]) {
    if (!c.contains("id") || !c["id"].is_number_integer() || !c.contains("members")) continue;
    const int64_t id = c["id"].get<int64_t>();
    p.next_id = std::max(p.next_id, id + 1);
    for (const auto& m : c["members"]) {
      FaceRef f;
      f.item = m.value("item", "");
      f.frame = m.value("frame", int64_t{-1});
      f.face = m.value("face", 0);
      p.id_of[f.Key()] = id;
    }
  }
  return p;
}

}  // namespace

std::string FaceRef::Key() const {
  return item + '\x1f' + std::to_string(frame) + '\x1f' + std::to_string(face);
}

Status ParseFacesResult(const std::string& item, const std::string& result_json,
                        std::vector<FaceRef>* out) {
  nlohmann::json r = nlohmann::json::parse(result_json, nullptr, /*allow_exceptions=*/false);
  if (r.is_discarded() || !r.is_object()) return Status::Corruption("the faces result is not JSON");
  std::vector<FaceRef> faces;
  if (r.contains("frames")) {
    if (!r["frames"].is_array()) return Status::Corruption("`frames` is not a list");
    for (const auto& f : r["frames"]) {
      if (!f.is_object() || !f.contains("frame") || !f["frame"].is_number_integer() ||
          !f.contains("faces"))
        return Status::Corruption("a frame has no number or no faces");
      FM_RETURN_IF_ERROR(ParseFaces(f["faces"], item, f["frame"].get<int64_t>(), &faces));
    }
  } else if (r.contains("faces")) {
    FM_RETURN_IF_ERROR(ParseFaces(r["faces"], item, -1, &faces));
  } else {
    return Status::Corruption("the faces result has neither `faces` nor `frames`");
  }
  out->insert(out->end(), std::make_move_iterator(faces.begin()),
              std::make_move_iterator(faces.end()));
  return Status::OK();
}

std::vector<std::vector<size_t>> LinkTracks(const std::vector<FaceRef>& faces,
                                            const FaceClustersOptions& o) {
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

std::vector<int> AttachToClusters(const cluster::Embeddings& e, const std::vector<bool>& seed,
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
                                     const cluster::Embeddings& e, std::vector<int> label,
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

FaceClustersStage::FaceClustersStage(FaceClustersOptions options) : options_(std::move(options)) {
  spec_.name = kName;
  spec_.deps = {stage_names::kFaces};
  spec_.dataset_level = true;
}

Result<nlohmann::json> FaceClustersStage::Cluster(std::vector<FaceRef> faces,
                                                  const nlohmann::json* previous,
                                                  gpu::ComputeBackend* device) const {
  std::stable_sort(faces.begin(), faces.end(), FaceOrder);
  // Tracks within each item, then one point per track.
  std::vector<std::vector<size_t>> tracks;
  for (size_t b = 0, e; b < faces.size(); b = e) {
    for (e = b; e < faces.size() && faces[e].item == faces[b].item;) ++e;
    std::vector<FaceRef> item(faces.begin() + b, faces.begin() + e);
    for (auto& t : LinkTracks(item, options_)) {
      for (size_t& i : t) i += b;
      tracks.push_back(std::move(t));
    }
  }
  cluster::Embeddings e;
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
  cluster::Normalize(&e);
  // Seeds: tracks whose best face is good enough to found an identity.
  std::vector<bool> seed(tracks.size(), false);
  cluster::Embeddings seeds;
  seeds.dim = e.dim;
  std::vector<size_t> seed_track;
  for (size_t t = 0; t < tracks.size(); ++t) {
    float q = 0;
    for (size_t i : tracks[t]) q = std::max(q, faces[i].quality);
    if (q < options_.seed_quality) continue;
    seed[t] = true;
    seed_track.push_back(t);
    seeds.data.insert(seeds.data.end(), e.row(static_cast<int64_t>(t)), e.row(static_cast<int64_t>(t)) + e.dim);
  }
  seeds.n = static_cast<int64_t>(seed_track.size());
  cluster::ClusterOptions co;
  co.hdbscan.min_cluster_size = options_.min_cluster_size;
  co.hdbscan.max_distance = static_cast<float>(1.0 - options_.similarity);
  co.member_similarity = static_cast<float>(options_.member_similarity);
  co.hdbscan.epsilon = static_cast<float>(std::max(0.0, 1.0 - options_.split_similarity));
  co.neighbours = options_.neighbours;
  co.exact_up_to = options_.exact_up_to;
  auto run = cluster::ClusterEmbeddings(seeds, co, device);
  if (!run.ok()) return run.status();
  cluster::Clustering c;
  c.label.assign(tracks.size(), -1);
  for (size_t j = 0; j < seed_track.size(); ++j) c.label[seed_track[j]] = run->clustering.label[j];
  c.label = AttachToClusters(e, seed, std::move(c.label), static_cast<float>(options_.member_similarity));
  // Two faces seen in the same picture at the same time are two people: a cluster keeps at
  // most one track of any (item, frame).
  c.label = SeparateCoOccurring(faces, tracks, e, std::move(c.label), options_.min_cluster_size);
  c.clusters = c.label.empty() ? 0 : std::max(0, *std::max_element(c.label.begin(), c.label.end()) + 1);

  // Members (faces, not tracks) per cluster, in item order; the representative is the
  // member whose track is closest to the cluster's mean direction.
  std::vector<std::vector<size_t>> members(c.clusters);
  std::vector<std::vector<float>> mean(c.clusters, std::vector<float>(e.dim, 0.f));
  std::vector<size_t> noise;
  for (size_t t = 0; t < tracks.size(); ++t) {
    const int l = c.label[t];
    for (size_t i : tracks[t]) (l >= 0 ? members[l] : noise).push_back(i);
    if (l >= 0)
      for (int d = 0; d < e.dim; ++d) mean[l][d] += e.data[t * e.dim + d];
  }
  std::vector<size_t> representative(c.clusters, 0);
  std::vector<float> best(c.clusters, -2.f);
  for (size_t t = 0; t < tracks.size(); ++t) {
    const int l = c.label[t];
    if (l < 0) continue;
    const float s = gpu::DotCpu(mean[l].data(), e.row(static_cast<int64_t>(t)), e.dim);
    if (s > best[l]) {
      best[l] = s;
      representative[l] = tracks[t].front();
    }
  }
  std::vector<std::vector<std::string>> keys(c.clusters);
  for (int l = 0; l < c.clusters; ++l) {
    std::sort(members[l].begin(), members[l].end());
    for (size_t i : members[l]) keys[l].push_back(faces[i].Key());
  }
  const cluster::StableIds ids = cluster::AssignStableIds(keys, PreviousOf(previous));

  std::vector<int> order(c.clusters);
  for (int l = 0; l < c.clusters; ++l) order[l] = l;
  std::sort(order.begin(), order.end(), [&](int a, int b) { return ids.id[a] < ids.id[b]; });
  nlohmann::json clusters = nlohmann::json::array();
  for (int l : order) {
    nlohmann::json list = nlohmann::json::array();
    for (size_t i : members[l]) list.push_back(MemberJson(faces[i]));
    clusters.push_back({{"id", ids.id[l]}, {"size", members[l].size()},
                        {"representative", MemberJson(faces[representative[l]])},
                        {"members", std::move(list)}});
  }
  std::sort(noise.begin(), noise.end());
  nlohmann::json noise_json = nlohmann::json::array();
  for (size_t i : noise) noise_json.push_back(MemberJson(faces[i]));
  auto changes = [](const std::vector<cluster::IdChange>& v, const char* other) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& ch : v) out.push_back({{"id", ch.id}, {other, ch.others}});
    return out;
  };
  return nlohmann::json{{"clusters", std::move(clusters)},
                        {"noise", std::move(noise_json)},
                        {"merges", changes(ids.merges, "merged")},
                        {"splits", changes(ids.splits, "into")},
                        {"retired", ids.retired},
                        {"next_id", ids.next_id},
                        {"faces", faces.size()},
                        {"tracks", tracks.size()},
                        {"seeds", seed_track.size()},
                        {"graph", run->graph},
                        {"bridges", run->bridges},
                        {"settings",
                         {{"min_cluster_size", options_.min_cluster_size},
                          {"similarity", options_.similarity},
                          {"member_similarity", options_.member_similarity},
                          {"split_similarity", options_.split_similarity},
                          {"seed_quality", options_.seed_quality},
                          {"neighbours", options_.neighbours}}}};
}

Outcome FaceClustersStage::RunOne(const StageContext& ctx) const {
  if (ctx.results == nullptr)
    return Outcome::Failed(Status::Internal("face_clusters needs the store's results to read"));
  std::optional<nlohmann::json> previous;
  Status s = ctx.results->ForEachResult(kName, [&](const ExportRow& r) {
    auto j = nlohmann::json::parse(r.result_json, nullptr, false);
    if (!j.is_discarded()) previous = std::move(j);
    return Status::OK();
  });
  if (!s.ok()) return Outcome::Failed(s);
  std::vector<FaceRef> faces;
  int64_t unreadable = 0;
  std::string example;
  s = ctx.results->ForEachResult(stage_names::kFaces, [&](const ExportRow& r) {
    Status p = ParseFacesResult(r.source, r.result_json, &faces);
    if (!p.ok() && unreadable++ == 0) example = r.source + ": " + std::string(p.message());
    return Status::OK();
  });
  if (!s.ok()) return Outcome::Failed(s);
  gpu::ComputeBackend* device =
      ctx.ladder != nullptr && ctx.ladder->OnDevice(kOperation) ? ctx.ladder->gpu() : nullptr;
  auto r = Cluster(std::move(faces), previous ? &*previous : nullptr, device);
  if (!r.ok()) return Outcome::Failed(r.status());
  (*r)["unreadable_results"] = unreadable;
  if (unreadable > 0) (*r)["unreadable_example"] = example;
  const std::string graph = (*r)["graph"].get<std::string>();
  const std::string on = graph.rfind("exact on ", 0) == 0 ? graph.substr(9) : "cpu";
  return Outcome::Done(std::move(r).value(), on);
}

std::vector<Outcome> FaceClustersStage::RunBatch(const std::vector<ClaimedJob>& jobs,
                                                 const StageContext& ctx) {
  std::vector<Outcome> out;
  for (size_t i = 0; i < jobs.size() && !ctx.stopped(); ++i) out.push_back(RunOne(ctx));
  return out;
}

}  // namespace framemill
