#include "outputs/pictures.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "base/atomic_file.h"
#include "media/content_hash.h"
#include "media/image.h"
#include "media/video_reader.h"

namespace framemill {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kMaxFramesDecoded = 20'000;  // a still or a face further in is left out

cv::Mat Fit(const cv::Mat& m, int side, int interpolation = cv::INTER_AREA) {
  const double s = std::min(1.0, static_cast<double>(side) / std::max(m.cols, m.rows));
  if (s >= 1.0) return m;
  cv::Mat out;
  cv::resize(m, out, cv::Size(std::max(1, static_cast<int>(std::lround(m.cols * s))),
                              std::max(1, static_cast<int>(std::lround(m.rows * s)))),
             0, 0, interpolation);
  return out;
}

// The frames of a video a request needs, decoded in one pass from the start.
Status DecodeFrames(const std::string& path, const std::set<int64_t>& wanted,
                    std::map<int64_t, cv::Mat>* frames) {
  VideoReaderOptions o;
  o.limits.max_frames = kMaxFramesDecoded;
  auto reader = VideoReader::Open(path, o);
  if (!reader.ok()) return reader.status();
  const int64_t last = wanted.empty() ? 0 : *wanted.rbegin();
  VideoFrame f;
  cv::Mat latest;
  for (;;) {
    auto more = (*reader)->Next(&f);
    if (!more.ok()) return more.status();
    if (!*more) break;
    latest = f.image;
    if (wanted.count(f.index)) (*frames)[f.index] = f.image.clone();
    if (f.index >= last) break;
  }
  // A still past the end (a damaged file): the last frame that decoded stands in.
  for (int64_t w : wanted)
    if (!frames->count(w) && !latest.empty()) (*frames)[w] = latest.clone();
  return frames->empty() ? Status::Corruption("no frame of " + path + " decodes") : Status::OK();
}

// A face's crop: its box and a quarter of it around, square, inside the picture.
cv::Rect FaceSquare(const FaceCrop& f, const cv::Size& picture) {
  const float cx = (f.box[0] + f.box[2]) / 2, cy = (f.box[1] + f.box[3]) / 2;
  const float half = 0.625f * std::max(f.box[2] - f.box[0], f.box[3] - f.box[1]);
  cv::Rect crop(static_cast<int>(cx - half), static_cast<int>(cy - half),
                static_cast<int>(2 * half), static_cast<int>(2 * half));
  return crop & cv::Rect(0, 0, picture.width, picture.height);
}

}  // namespace

ReportPictures::ReportPictures(std::string assets_dir, PathMap path_map)
    : dir_(std::move(assets_dir)), path_map_(std::move(path_map)) {}

std::string ReportPictures::StillName(const ItemView& item, int64_t frame, int side) {
  return "stills/" + item.content_hash + (frame >= 0 ? "-f" + std::to_string(frame) : "") + "-" +
         std::to_string(side) + ".jpg";
}

std::string ReportPictures::FaceName(const ItemView& item, const FaceCrop& face) {
  char box[64];
  std::snprintf(box, sizeof box, "%d_%d_%d_%d", static_cast<int>(face.box[0]),
                static_cast<int>(face.box[1]), static_cast<int>(face.box[2]),
                static_cast<int>(face.box[3]));
  return "faces/" + item.content_hash + "-f" + std::to_string(face.frame) + "-" + box + ".jpg";
}

std::string ReportPictures::ArtifactName(const std::string& path, int side, bool mask) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "";
  const std::string id = path + "|" + std::to_string(st.st_size) + "|" +
                         std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec);
  return std::string(mask ? "masks/" : "artifacts/") + ContentHashOf(id) +
         "-" + std::to_string(side) + (mask ? ".png" : ".jpg");
}

bool ReportPictures::Exists(const std::string& name) const {
  std::error_code ec;
  return fs::exists(dir_ + "/" + name, ec);
}

bool ReportPictures::Have(const std::string& name) {
  if (!Exists(name)) return false;
  ++reused_;
  return true;
}

// Written under a temporary name and renamed: a page being viewed never shows half a file.
Status ReportPictures::Write(const std::string& name, const void* mat) {
  const std::string path = dir_ + "/" + name;
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  const std::string ext = fs::path(name).extension().string();
  // Two items of the same content may be written at once: each under its own name.
  const std::string temp = path + ".tmp" + std::to_string(temp_++) + ext;
  const std::vector<int> params = ext == ".jpg" ? std::vector<int>{cv::IMWRITE_JPEG_QUALITY, 75, cv::IMWRITE_JPEG_OPTIMIZE, 1}
                                                : std::vector<int>{};
  bool ok = false;
  try {
    ok = cv::imwrite(temp, *static_cast<const cv::Mat*>(mat), params);
  } catch (const cv::Exception& e) {
    return Status::IOError("cannot write " + temp + ": " + e.what());
  }
  if (!ok) return Status::IOError("cannot write " + temp);
  FM_RETURN_IF_ERROR(RenameIntoPlace(temp, path));
  ++made_;
  return Status::OK();
}

Status ReportPictures::Make(const ItemView& item, const PictureRequest& r) {
  std::vector<int> sides;
  for (int side : r.still_sides)
    if (!Have(StillName(item, r.frame, side))) sides.push_back(side);
  std::vector<FaceCrop> faces;
  for (const FaceCrop& f : r.faces)
    if (!Have(FaceName(item, f))) faces.push_back(f);
  std::vector<int64_t> clips;
  for (int64_t f : r.clip_frames)
    if (!Have(StillName(item, f, r.clip_side))) clips.push_back(f);
  Status first_error;
  if (!sides.empty() || !faces.empty() || !clips.empty())
    FM_RETURN_IF_ERROR(MakeStillsAndFaces(item, r, sides, faces, clips, &first_error));
  FM_RETURN_IF_ERROR(MakeArtifacts(r, &first_error));
  return first_error;
}

Status ReportPictures::MakeStillsAndFaces(const ItemView& item, const PictureRequest& r,
                                        const std::vector<int>& sides,
                                        const std::vector<FaceCrop>& faces,
                                        const std::vector<int64_t>& clips, Status* first_error) {
  const std::string path = path_map_.ToLocal(item.is_url ? item.fetched_path : item.source);
  const bool video = item.kind == MediaKind::kVideo;
  const int64_t still_frame = video ? std::max<int64_t>(0, r.frame) : -1;
  std::map<int64_t, cv::Mat> frames;  // -1: the image
  if (video) {
    std::set<int64_t> wanted;
    if (!sides.empty()) wanted.insert(still_frame);
    for (const FaceCrop& f : faces) wanted.insert(f.frame);
    wanted.insert(clips.begin(), clips.end());
    *first_error = DecodeFrames(path, wanted, &frames);
  } else {
    auto image = DecodeImageFile(path, ImageLimits{});
    if (image.ok()) frames[-1] = std::move(*image);
    else *first_error = image.status();
  }
  if (auto it = frames.find(still_frame); it != frames.end()) {
    for (int side : sides) {
      const cv::Mat still = Fit(it->second, side);
      FM_RETURN_IF_ERROR(Write(StillName(item, r.frame, side), &still));
    }
  }
  for (const FaceCrop& f : faces) {
    auto it = frames.find(video ? f.frame : -1);
    if (it == frames.end()) continue;
    const cv::Rect crop = FaceSquare(f, it->second.size());
    if (crop.width < 2 || crop.height < 2) continue;
    const cv::Mat face = Fit(it->second(crop), 128);
    FM_RETURN_IF_ERROR(Write(FaceName(item, f), &face));
  }
  for (int64_t f : clips) {
    auto it = frames.find(f);
    if (it == frames.end()) continue;
    const cv::Mat still = Fit(it->second, r.clip_side);
    FM_RETURN_IF_ERROR(Write(StillName(item, f, r.clip_side), &still));
  }
  return Status::OK();
}

Status ReportPictures::MakeArtifacts(const PictureRequest& r, Status* first_error) {
  for (bool mask : {true, false}) {
    for (const std::string& artifact : mask ? r.masks : r.images) {
      const std::string name = ArtifactName(artifact, r.artifact_side, mask);
      if (name.empty() || Have(name)) continue;
      cv::Mat m = cv::imread(artifact, mask ? cv::IMREAD_GRAYSCALE : cv::IMREAD_COLOR);
      if (m.empty()) {
        if (first_error->ok()) *first_error = Status::Corruption("cannot decode " + artifact);
        continue;
      }
      m = Fit(m, r.artifact_side, mask ? cv::INTER_NEAREST : cv::INTER_AREA);
      if (mask) {
        // Inside: a translucent teal; outside: clear.
        cv::Mat rgba(m.size(), CV_8UC4, cv::Scalar(200, 160, 0, 0));
        rgba.setTo(cv::Scalar(200, 160, 0, 96), m > 0);
        m = rgba;
      }
      FM_RETURN_IF_ERROR(Write(name, &m));
    }
  }
  return Status::OK();
}

}  // namespace framemill
