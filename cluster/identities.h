// Face identities over a dataset (the face_clusters stage's computation): the faces of a
// video are linked into tracks across its sampled frames (box overlap and embedding), a track
// counts as one point, tracks whose best face is good enough seed identities by density
// (ClusterEmbeddings: HDBSCAN* over a k-NN graph), the others attach to the closest identity
// or stay noise, and two faces seen in one picture at one time are never one identity.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "cluster/identity_options.h"
#include "cluster/knn.h"
#include "gpu/compute_backend.h"

namespace framemill::cluster {

// One face as the faces result names it: the item (as export names it), the frame for a
// video (-1 for an image), its index in that item's or frame's `faces` list.
struct FaceRef {
  std::string item;
  int64_t frame = -1;
  int face = 0;
  float box[4] = {0, 0, 0, 0};
  std::vector<float> embedding;
  float quality = 1;  // the faces stage's `quality` (1 for results written before it had one)
  std::string Key() const;  // unique per face, for stable ids
};

// The identities found, before their stable ids (cluster/stable_ids.h).
struct Identities {
  std::vector<FaceRef> faces;                // in (item, frame, face) order
  std::vector<std::vector<size_t>> members;  // per identity, indices into faces, in order
  std::vector<size_t> representative;        // per identity: the member of its most central track
  std::vector<size_t> noise;                 // faces in no identity, in order
  size_t tracks = 0, seeds = 0;
  std::string graph;  // how the neighbour graph was built (ClusterRun::graph)
  int bridges = 0;
};

Result<Identities> FindIdentities(std::vector<FaceRef> faces, const IdentityOptions& options,
                                  gpu::ComputeBackend* device);

// Groups the faces of one item into tracks: consecutive sampled frames, greedy by
// similarity among pairs whose boxes overlap by track_iou and whose embeddings are at
// least track_similarity alike. Images: one face, one track. Returns per track the
// indices into `faces`.
std::vector<std::vector<size_t>> LinkTracks(const std::vector<FaceRef>& faces,
                                            const IdentityOptions& options);

// Attaches each unlabelled track whose quality kept it from seeding (label -1 and not a
// seed) to the cluster whose mean direction is closest, when at least `min_similarity`;
// the others stay noise. Returns the labels.
std::vector<int> AttachToClusters(const Embeddings& e, const std::vector<bool>& seed,
                                  std::vector<int> label, float min_similarity);

// Two faces seen in the same picture at the same time are two people: within each cluster,
// tracks are kept closest to the cluster's mean direction first, and a track seen in an
// (item, frame) a kept track is seen in goes to the noise (label -1); a cluster left with
// fewer than min_cluster_size tracks becomes noise. Returns the labels, per track, the
// clusters left numbered 0.. in their old order.
std::vector<int> SeparateCoOccurring(const std::vector<FaceRef>& faces,
                                     const std::vector<std::vector<size_t>>& tracks,
                                     const Embeddings& e, std::vector<int> label,
                                     int min_cluster_size);

}  // namespace framemill::cluster
