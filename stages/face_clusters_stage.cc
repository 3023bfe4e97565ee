#include "stages/face_clusters_stage.h"

#include <algorithm>
#include <optional>

#include "cluster/stable_ids.h"
#include "jobs/stage_names.h"

namespace framemill {
namespace {

using cluster::FaceRef;

constexpr const char* kFaceClusteringOperation = "FACE_CLUSTERING";

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

// The result: identities in id order with their members and representative, the noise,
// and what changed since the previous result.
nlohmann::json ResultJson(const cluster::Identities& c, const cluster::StableIds& ids) {
  std::vector<size_t> order(c.members.size());
  for (size_t l = 0; l < order.size(); ++l) order[l] = l;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ids.id[a] < ids.id[b]; });
  nlohmann::json clusters = nlohmann::json::array();
  for (size_t l : order) {
    nlohmann::json list = nlohmann::json::array();
    for (size_t i : c.members[l]) list.push_back(MemberJson(c.faces[i]));
    clusters.push_back({{"id", ids.id[l]}, {"size", c.members[l].size()},
                        {"representative", MemberJson(c.faces[c.representative[l]])},
                        {"members", std::move(list)}});
  }
  nlohmann::json noise = nlohmann::json::array();
  for (size_t i : c.noise) noise.push_back(MemberJson(c.faces[i]));
  auto changes = [](const std::vector<cluster::IdChange>& v, const char* other) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& ch : v) out.push_back({{"id", ch.id}, {other, ch.others}});
    return out;
  };
  return nlohmann::json{{"clusters", std::move(clusters)},
                        {"noise", std::move(noise)},
                        {"merges", changes(ids.merges, "merged")},
                        {"splits", changes(ids.splits, "into")},
                        {"retired", ids.retired},
                        {"next_id", ids.next_id},
                        {"faces", c.faces.size()},
                        {"tracks", c.tracks},
                        {"seeds", c.seeds},
                        {"graph", c.graph},
                        {"bridges", c.bridges}};
}

}  // namespace

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

FaceClustersStage::FaceClustersStage(FaceClustersOptions options) : options_(std::move(options)) {
  spec_.name = kName;
  spec_.deps = {stage_names::kFaces};
  spec_.dataset_level = true;
}

Result<nlohmann::json> FaceClustersStage::Cluster(std::vector<FaceRef> faces,
                                                  const nlohmann::json* previous,
                                                  gpu::ComputeBackend* device) const {
  auto found = cluster::FindIdentities(std::move(faces), options_, device);
  if (!found.ok()) return found.status();
  const cluster::Identities& c = *found;
  std::vector<std::vector<std::string>> keys(c.members.size());
  for (size_t l = 0; l < c.members.size(); ++l)
    for (size_t i : c.members[l]) keys[l].push_back(c.faces[i].Key());
  const cluster::StableIds ids = cluster::AssignStableIds(keys, PreviousOf(previous));
  nlohmann::json r = ResultJson(c, ids);
  r["settings"] = {{"min_cluster_size", options_.min_cluster_size},
                   {"similarity", options_.similarity},
                   {"member_similarity", options_.member_similarity},
                   {"split_similarity", options_.split_similarity},
                   {"seed_quality", options_.seed_quality},
                   {"neighbours", options_.neighbours}};
  return r;
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
      ctx.ladder != nullptr && ctx.ladder->OnDevice(kFaceClusteringOperation) ? ctx.ladder->gpu() : nullptr;
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
