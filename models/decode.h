// Host post-processing of model heads (manifest "postprocess"): the decode tails the
// converter cut off because OpenCV 4.6 cannot run them, plus the decodes
// @vladmandic/human does in JavaScript. Each model family has one entry point, from a
// manifest and one image's outputs to a typed result (Decode*, at the end), used by the
// stages and, through DecodeOutputs, by `framemill infer`.
// Pure functions on plain data; thread-safe.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <opencv2/core.hpp>

#include "base/status.h"
#include "models/manifest.h"
#include "models/output_tensor.h"

namespace framemill::models {

// ---- embeddings (mobilefacenet; faceres' global_pooling/Mean)
struct Embedding {
  std::vector<float> values;  // unit length (all zero when the input was)
  float norm = 0;             // length before normalising
};
Embedding L2Normalize(const std::vector<float>& v);

// faceres: embedding plus the age/gender heads, decoded as human's faceres.ts does.
struct FaceDescription {
  Embedding embedding;
  bool has_attributes = false;  // age and gender below (faceres); false: embedding only
  float gender_score = 0;  // sigmoid output: > 0.5 male
  std::string gender;      // "male" / "female"
  float gender_confidence = 0;
  float age = 0;           // years, interpolated between neighbouring decades as human does
};
FaceDescription DecodeFaceRes(const std::vector<float>& embedding, const std::vector<float>& age,
                              float gender);

// ---- blazeface (human's blazeface.ts; anchors of MediaPipe's front model)
struct FaceBox {
  float x1 = 0, y1 = 0, x2 = 0, y2 = 0;      // original image pixels
  float score = 0;                            // sigmoid of the logit
  std::array<cv::Point2f, 6> keypoints{};     // eyes, nose, mouth, ears: image pixels
};
struct BlazeFaceOptions {
  int input_size = 256;
  // human's defaults (0.2, 0.1) suit one face in a webcam frame; a dataset wants fewer
  // false positives and nearby faces kept apart (as tools/models/reference.mjs decodes).
  float min_score = 0.5f;
  float iou_threshold = 0.3f;
  int max_faces = 20;           // human keeps 1 by default; a dataset tool wants all
  bool weighted_nms = false;    // false: tf.image.nonMaxSuppression as human; true: MediaPipe's blend
  float containment = 0;        // weighted only: drop a weaker face this much inside a kept one
};
// Anchor centres in input pixels: 16x16x2 at stride 16, then 8x8x6 at stride 32.
std::vector<cv::Point2f> BlazeFaceAnchors(int input_size);
// rows: anchors x 17 (logit, cx, cy, w, h, 6 x (x, y)) in the anchor order above.
// From one [..,17] head, or from score [..,1] / regressor [..,16] heads paired by anchor
// count, the 512 stride-16 anchors first.
Result<std::vector<float>> BlazeFaceRows(const std::vector<OutputTensor>& outs);
std::vector<FaceBox> DecodeBlazeFace(const std::vector<float>& rows, cv::Size image,
                                     const BlazeFaceOptions& opt = {});
// Every anchor's face above opt.min_score, before any suppression (for MergeFaces).
std::vector<FaceBox> BlazeFaceCandidates(const std::vector<float>& rows, cv::Size image,
                                         const BlazeFaceOptions& opt);

// ---- movenet singlepose (the graph's own decode after its four heads)
struct PoseKeypoint {
  float y = 0, x = 0, score = 0;  // y, x normalised to [0,1] of the model input (Identity:0)
};
struct MoveNetHeads {
  int h = 48, w = 48, k = 17;
  const float* heatmap = nullptr;  // h*w*k, sigmoid probabilities (NHWC)
  const float* center = nullptr;   // h*w, sigmoid probabilities
  bool center_weighted = false;    // already divided by the centre-distance weight
  const float* regress = nullptr;  // h*w*2k (dy, dx) per keypoint
  const float* offset = nullptr;   // h*w*2k (dy, dx) per keypoint
};
std::vector<PoseKeypoint> DecodeMoveNet(const MoveNetHeads& heads);

// ---- movenet multipose (the graph's own decode after its six heads; manifest notes)
struct MultiPoseHeads {
  int h = 64, w = 64, k = 17, people = 6;
  const float* center = nullptr;      // h*w, sigmoid probabilities
  const float* box_scale = nullptr;   // h*w*2 (height, width) in cells
  const float* box_offset = nullptr;  // h*w*2 (dy, dx)
  const float* regress = nullptr;     // h*w*2k (dy, dx) per keypoint from the centre cell
  const float* heatmap = nullptr;     // h*w*k, sigmoid probabilities
  const float* offset = nullptr;      // h*w*2k (dy, dx) per keypoint
};
struct PosePerson {
  std::vector<PoseKeypoint> keypoints;  // 17, normalised to the model input
  float ymin = 0, xmin = 0, ymax = 0, xmax = 0;  // normalised to the model input
  float score = 0;
};
// Always `people` rows, strongest centre first, as Identity:0 (callers filter by score).
std::vector<PosePerson> DecodeMultiPose(const MultiPoseHeads& heads);

// ---- blazepose (ld_3d: 39 x (x, y, z, visibility logit, presence logit), input pixels)
struct PoseLandmark {
  float x = 0, y = 0, z = 0;     // input pixels (z relative, as the model gives it)
  float visibility = 0, presence = 0;  // sigmoids
};
std::vector<PoseLandmark> DecodeBlazePose(const std::vector<float>& ld_3d);

// ---- centernet (COCO; the graph's own tower_0/detections, then human's filtering)
struct Detection {
  float x1 = 0, y1 = 0, x2 = 0, y2 = 0;  // input pixels (raw) or image pixels (filtered)
  float score = 0;
  int class_id = 0;
};
// heat: h*w*c sigmoid scores (NHWC), wh: h*w*4 (left, top, right, bottom distances in
// input pixels). Peaks survive a 3x3 max-pool; the top k (ties: lower index first) are
// returned like tower_0/detections: rows (x1, y1, x2, y2, score, class).
std::vector<Detection> CenterNetTopK(const float* heat, const float* wh, int h, int w, int c,
                                     int k = 100, float stride = 4.f);
struct DetectionOptions {
  float min_score = 0.2f;      // human's object.minConfidence
  float iou_threshold = 0.4f;  // human's object.iouThreshold (class-agnostic NMS)
  int max_detections = 10;     // human's object.maxDetected
};
// NMS over raw detections, scaled from input pixels to the image's.
std::vector<Detection> FilterDetections(const std::vector<Detection>& raw, cv::Size input,
                                        cv::Size image, const DetectionOptions& opt = {});
const char* CocoLabel(int class_id);

// ---- yolov8 (models/decode_yolo.cc; heads head_8, head_16, head_32 [1,144,g,g]: 4 sides x 16
// distance bins, then 80 COCO class logits). Each anchor's best class at or above
// opt.min_score; class-aware NMS at opt.iou_threshold; best first, at most
// opt.max_detections; boxes in image pixels, mapped back through the letterbox the
// manifest's input was made with.
Result<std::vector<Detection>> DecodeYolo(const ModelManifest& m, const std::vector<OutputTensor>& outs,
                                          cv::Size image, const DetectionOptions& opt);

// ---- masks (selfie, isnet, blazepose segmentation)
struct Mask {
  cv::Mat prob;     // CV_32F at the model's resolution, values as the model gives them
  cv::Mat binary;   // CV_8U 0/255 at the image's resolution: bilinear resize, > threshold
  double coverage = 0;  // foreground fraction of binary
  cv::Rect bbox;        // of the foreground; empty when none
};
// t: [1,H,W,1] or [1,1,H,W] (or [1,H,W]).
Result<Mask> DecodeMask(const OutputTensor& t, cv::Size image, float threshold = 0.5f);

// Non-maximum suppression (tf.image.nonMaxSuppression semantics): indices kept, by
// descending score; a box is dropped when its IoU (media/geometry.h) with a kept box exceeds iou.
std::vector<int> Nms(const std::vector<cv::Rect2f>& boxes, const std::vector<float>& scores,
                     float iou, float min_score, int max_out);

// ---- facemesh (MediaPipe's face mesh, human-models; 468 landmarks of one face crop)
struct FaceMesh {
  std::vector<cv::Point3f> points;  // crop pixels; z relative depth in the same units
  float presence = 0;               // face presence probability (faceflag, sigmoid applied)
};
// Inner-lip gap (mesh points 13, 14) over mouth width (61, 291): 0 closed, about 0.3 to 0.5
// wide open. Unset when the mouth is narrower than a pixel (a degenerate mesh).
std::optional<double> MouthOpening(const FaceMesh& mesh);
// How frontal the face is, from the nose tip's place between the face's edges (mesh points
// 1, 234, 454), in x: 1 - |left - right| / (left + right). 1 facing the camera, about 0.4
// turned 30 degrees (messi5.jpg), 0 in full profile; 0 for a degenerate mesh.
double FaceFrontalness(const FaceMesh& mesh);

nlohmann::json ToJson(const Embedding& e);
nlohmann::json ToJson(const FaceDescription& d);
nlohmann::json ToJson(const std::vector<FaceBox>& faces);
nlohmann::json ToJson(const std::vector<PoseKeypoint>& kps, cv::Size image);
nlohmann::json ToJson(const std::vector<PoseLandmark>& lms, cv::Size input, cv::Size image);
nlohmann::json ToJson(const std::vector<Detection>& dets);
nlohmann::json ToJson(const Mask& m);
nlohmann::json ToJson(const FaceMesh& mesh);

// ---- one entry point per model family, on one image's outputs (`image`: its size)
// blazeface: faces in image pixels (opt.input_size is taken from the manifest).
Result<std::vector<FaceBox>> DecodeFaceDetections(const ModelManifest& m,
                                                  const std::vector<OutputTensor>& outs,
                                                  cv::Size image, BlazeFaceOptions opt = {});
Result<std::vector<FaceBox>> DecodeFaceCandidates(const ModelManifest& m,
                                                  const std::vector<OutputTensor>& outs,
                                                  cv::Size image, BlazeFaceOptions opt = {});
// faceres (embedding, age, gender) or l2_normalize (mobilefacenet: embedding only).
Result<FaceDescription> DecodeFaceDescription(const ModelManifest& m,
                                              const std::vector<OutputTensor>& outs);
// centernet or yolov8 (DecodeYolo): COCO objects in image pixels, after NMS.
// The detector's own NMS overlap and room (DetectionDefaults), down to `min_score`:
// CenterNet human's 0.4 class-agnostic overlap and 20 objects; YOLOv8 Ultralytics' own 0.7
// class-aware overlap (the one its published mAP is measured at) and 100, since it finds many
// more objects a picture (a crowd).
DetectionOptions DetectionDefaults(const ModelManifest& m, float min_score);
Result<std::vector<Detection>> DecodeObjects(const ModelManifest& m,
                                             const std::vector<OutputTensor>& outs,
                                             cv::Size image, const DetectionOptions& opt = {});
// movenet (17 keypoints), movenet_multipose (people) or blazepose (39 landmarks and the
// pose flag).
struct PoseDecoded {
  std::vector<PoseKeypoint> keypoints;  // movenet
  std::vector<PosePerson> people;       // movenet_multipose, every row of the graph
  std::vector<PoseLandmark> landmarks;  // blazepose, in input pixels
  cv::Size input;                       // the model's input size (landmarks' pixels)
  bool has_pose_score = false;
  float pose_score = 0;                 // blazepose's pose flag
};
Result<PoseDecoded> DecodePose(const ModelManifest& m, const std::vector<OutputTensor>& outs);
// facemesh: the landmarks scaled from the model's input to `crop` (the face crop it saw).
Result<FaceMesh> DecodeFaceMesh(const ModelManifest& m, const std::vector<OutputTensor>& outs,
                                cv::Size crop);
// selfie, isnet, sigmoid_mask: the largest output as a mask at the image's size.
Result<Mask> DecodeSegmentation(const ModelManifest& m, const std::vector<OutputTensor>& outs,
                                cv::Size image, float threshold = 0.5f);

nlohmann::json ToJson(const PoseDecoded& p, cv::Size image);

// nsfw (nsfwjs): the five class probabilities, and photo or drawing from the manifest's
// content probe on the pooled features. `unsafe` is porn + hentai: "sexy" fires on ordinary
// sports photos (docs/MODELS.md), so it is reported but not counted.
struct ContentDecoded {
  std::array<float, 5> classes{};  // drawing, hentai, neutral, porn, sexy (the model's order)
  float unsafe = 0;
  float photo = 0;                 // p(photo) from the probe
  bool is_photo = false;
};
inline constexpr std::array<const char*, 5> kNsfwClasses = {"drawing", "hentai", "neutral", "porn", "sexy"};
Result<ContentDecoded> DecodeContent(const ModelManifest& m, const std::vector<OutputTensor>& outs);
// {"content": {"type": "photo"|"drawing", "p": its probability}, "nsfw": {the classes, "unsafe"}}
nlohmann::json ToJson(const ContentDecoded& c);

// The entry point manifest.postprocess names, as JSON (infer's "decoded"); null for "none".
Result<nlohmann::json> DecodeOutputs(const ModelManifest& manifest,
                                     const std::vector<OutputTensor>& outputs, cv::Size image);

}  // namespace framemill::models
