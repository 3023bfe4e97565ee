// The settings of face identities (cluster/identities.h), apart so that the options the CLI
// fills (stages/stage_options.h) stay light.
#pragma once

#include <cstdint>

namespace framemill::cluster {

// The identities' settings (face_clusters.* in the configuration; stages/stage_rows.cc).
struct IdentityOptions {
  int min_cluster_size = 3;         // fewer faces (tracks) never make an identity (face_clusters.min_cluster_size)
  double similarity = 0.6;          // cosine below which two faces are never linked (face_clusters.similarity)
  double member_similarity = 0.7;   // a member this far from its cluster's mean is noise (face_clusters.member_similarity)
  double split_similarity = 0.7;    // parts linked this closely are never split (face_clusters.split_similarity)
  int neighbours = 16;              // k of the neighbour graph
  int64_t exact_up_to = 20000;      // on the CPU, an exact graph up to this many tracks, else HNSW
  double track_iou = 0.3;           // video: a face continues a track in the next sampled frame
  double track_similarity = 0.5;    //   when its box overlaps this much and its embedding is this close
  // Identities are seeded only by tracks whose best face has at least this `quality`
  // (analysis/face_quality.h); the others join the closest identity at member_similarity
  // or stay noise (face_clusters.seed_quality; bench/README "Faces: quality and identities").
  double seed_quality = 0.4;

  bool operator==(const IdentityOptions&) const = default;
};

}  // namespace framemill::cluster
