#include "stages/inpaint_stage.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "analysis/inpaint_fill.h"
#include "gpu/ops.h"
#include "jobs/stage_names.h"
#include "media/image.h"
#include "models/user_network.h"
#include "stages/artifact.h"

namespace framemill {

namespace fs = std::filesystem;

namespace {

constexpr const char* kInpaintOperation = "INPAINTING";
constexpr const char* kMaskExtensions[] = {".png", ".bmp", ".tif", ".tiff", ".jpg", ".jpeg", ".webp"};

// The mask file of `stem` in `dir`, "" when there is none; InvalidArgument when two
// files could be it.
Result<std::string> MaskInFolder(const std::string& dir, const std::string& stem) {
  std::string found;
  for (const char* ext : kMaskExtensions) {
    std::error_code ec;
    const fs::path p = fs::path(dir) / (stem + ext);
    if (!fs::is_regular_file(p, ec)) continue;
    if (!found.empty())
      return Status::InvalidArgument("two masks could be this item's: " + found + " and " + p.string());
    found = p.string();
  }
  return found;
}

// A mask file as 0/255, scaled (nearest) to `size`; `scaled` says whether it had to be.
Result<cv::Mat> ReadMask(const std::string& path, cv::Size size, bool* scaled) {
  cv::Mat m;
  try {
    m = cv::imread(path, cv::IMREAD_GRAYSCALE);
  } catch (const cv::Exception& e) {
    return Status::Corruption("mask " + path + ": " + e.what());
  }
  if (m.empty()) return Status::Corruption("mask " + path + " cannot be read as an image");
  *scaled = m.size() != size;
  if (*scaled) cv::resize(m, m, size, 0, 0, cv::INTER_NEAREST);
  return cv::Mat(m > 127);
}

// `mask` (0/255) grown by a disc of `grow` pixels: dilated on the mask's box only (a person's
// mask in a 1.3 MP photo: the same pixels as dilating the whole image, in a fraction of it).
cv::Mat Grown(const cv::Mat& mask, int grow) {
  cv::Mat out = cv::Mat::zeros(mask.size(), CV_8U);
  const cv::Rect box = HoleBox(mask, grow);
  if (box.area() == 0) return out;
  cv::Mat grown;
  cv::dilate(mask(box), grown,
             cv::getStructuringElement(cv::MORPH_ELLIPSE, cv::Size(2 * grow + 1, 2 * grow + 1)));
  grown.copyTo(out(box));
  return out;
}

// One step of the fill on the device the ladder chose for INPAINTING, stepping down to the
// CPU twin when the device runs out of memory. `device` gets who ran it.
template <class Out, class Task, class Spec, class Call>
std::function<Result<Out>(const Task&, const Spec&)> OnLadder(gpu::OomLadder& ladder, std::string* device,
                                                             int64_t (*bytes)(cv::Size), Call call) {
  return [&ladder, device, bytes, call](const Task& task, const Spec& spec) -> Result<Out> {
    // Each level's call sets *device; the last is the finest level's, the largest: its
    // device is the fill's.
    return ladder.RunOne<Out>(
        kInpaintOperation, static_cast<int64_t>(task.image.total()), bytes(task.image.size()),
        [&](gpu::ComputeBackend& backend) { return call(backend, task, spec); }, device);
  };
}

PatchSearchFn DeviceSearch(gpu::OomLadder& ladder, std::string* device) {
  return OnLadder<gpu::PatchMatchResult, gpu::PatchMatchTask, gpu::PatchMatchSpec>(
      ladder, device, gpu::PatchMatchBytesPerItem,
      [](gpu::ComputeBackend& b, const gpu::PatchMatchTask& t, const gpu::PatchMatchSpec& s) {
        return b.PatchMatchBatch({t}, s);
      });
}

HoleFillFn DeviceFill(gpu::OomLadder& ladder, std::string* device) {
  return OnLadder<cv::Mat, gpu::HoleFillTask, gpu::HoleFillSpec>(
      ladder, device, gpu::HoleFillBytesPerItem,
      [](gpu::ComputeBackend& b, const gpu::HoleFillTask& t, const gpu::HoleFillSpec& s) {
        return b.HoleFillBatch({t}, s);
      });
}

}  // namespace

// Where the hole came from, and the hole itself (0/255 at the image's size).
struct InpaintStage::Hole {
  cv::Mat mask;
  std::string source;  // segment | folder | file
  std::string path;    // the mask file read
  bool scaled = false;
};

struct InpaintStage::Network {
  std::unique_ptr<models::UserNetwork> net;
};

namespace {

// A 1x1xSxS tensor of the hole (0 or 1), nearest-neighbour at side x side.
gpu::Tensor HoleTensor(const cv::Mat& hole, int side) {
  cv::Mat small, ones;
  cv::resize(hole, small, cv::Size(side, side), 0, 0, cv::INTER_NEAREST);
  small.convertTo(ones, CV_32F, 1.0 / 255);
  gpu::Tensor t;
  t.shape = {1, 1, side, side};
  t.data.resize(static_cast<size_t>(side) * side * 4);
  std::memcpy(t.data.data(), ones.ptr<float>(), t.data.size());
  return t;
}

}  // namespace

// Video keyframes are not inpainted: their jobs are skipped with the reason. The segment
// stage's masks make it depend on segment.
InpaintStage::InpaintStage(InpaintOptions options, const std::string& out_dir)
    : PerJobStage(MakeSpec(stage_names::kInpaint, Takes::kImages,
                       options.masks == "segment" ? std::vector<std::string>{stage_names::kSegment}
                                                  : std::vector<std::string>{}),
                  out_dir),
      options_(std::move(options)) {
  if (options_.masks != "segment") options_.masks = AbsolutePath(options_.masks);
  if (!options_.model.empty()) options_.model = AbsolutePath(options_.model);
}

InpaintStage::~InpaintStage() = default;

Status InpaintStage::CheckSettings() const {
  std::error_code ec;
  if (options_.masks != "segment" && !fs::exists(options_.masks, ec))
    return Status::InvalidArgument("inpaint.masks: " + options_.masks + " does not exist");
  if (!options_.model.empty() && !fs::is_regular_file(options_.model, ec))
    return Status::InvalidArgument("inpaint.model: " + options_.model + " is not a file");
  return Status::OK();
}

Result<InpaintStage::Hole> InpaintStage::FindHole(const ClaimedJob& job, const StageContext& ctx,
                                                  cv::Size size) const {
  Hole hole;
  if (options_.masks != "segment") {
    std::error_code ec;
    if (fs::is_directory(options_.masks, ec)) {
      const std::string stem = fs::path(job.source).stem().string();
      auto path = MaskInFolder(options_.masks, stem);
      if (!path.ok()) return path.status();
      if (path->empty())
        return Status::NotFound("no mask named " + stem + ".* in " + options_.masks);
      hole.source = "folder";
      hole.path = *path;
    } else if (fs::is_regular_file(options_.masks, ec)) {
      hole.source = "file";
      hole.path = options_.masks;
    } else {
      return Status::InvalidArgument("inpaint.masks: " + options_.masks +
                                     " is neither a folder nor a file");
    }
    auto m = ReadMask(hole.path, size, &hole.scaled);
    if (!m.ok()) return m.status();
    hole.mask = std::move(*m);
    return hole;
  }
  if (ctx.results == nullptr)
    return Status::Internal("inpaint needs the store's results to read segment's mask");
  auto row = ctx.results->ResultOf(job.item_id, stage_names::kSegment);
  if (!row.ok()) return row.status();
  if (!row->has_value()) return Status::Aborted("the segment job of this item is not done");
  auto seg = nlohmann::json::parse((*row)->result_json, nullptr, false);
  if (seg.is_discarded() || !seg.contains("mask") || !seg["mask"].is_string())
    return Status::Corruption("segment's result names no mask");
  hole.source = "segment";
  hole.path = seg["mask"].get<std::string>();
  auto m = ReadMask(hole.path, size, &hole.scaled);
  if (!m.ok()) return m.status();
  const int grow = static_cast<int>(std::lround(options_.margin * std::hypot(size.width, size.height)));
  hole.mask = grow > 0 ? Grown(*m, grow) : std::move(*m);
  return hole;
}

Result<cv::Mat> InpaintStage::RunModel(const cv::Mat& bgr, const cv::Mat& hole) {
  const int side = options_.model_size;
  gpu::PreprocessSpec rgb;  // RGB in [0, 1], bilinear to side x side
  rgb.width = rgb.height = side;
  std::map<std::string, gpu::Tensor> inputs;
  inputs["image"] = gpu::PreprocessCpu({bgr}, rgb);
  inputs["mask"] = HoleTensor(hole, side);
  gpu::Tensor out;
  {
    std::lock_guard<std::mutex> lock(model_mu_);
    if (!model_) {
      auto net = models::UserNetwork::Open(options_.model);
      if (!net.ok())
        return Status::InvalidArgument("inpaint.model " + options_.model + " cannot be loaded: " +
                                       net.status().message());
      model_ = std::make_unique<Network>(Network{std::move(net).value()});
    }
    auto outs = model_->net->Run(inputs);
    if (!outs.ok())
      return Status::InvalidArgument("inpaint.model " + options_.model + " (inputs image 1x3xSxS, mask 1x1xSxS): " +
                                     outs.status().message());
    if (outs->empty()) return Status::InvalidArgument("inpaint.model " + options_.model + " has no output");
    out = std::move(outs->begin()->second);  // the graph's outputs by name: one is expected
  }
  if (out.shape.size() != 4 || out.shape[0] != 1 || out.shape[1] != 3)
    return Status::InvalidArgument("inpaint.model " + options_.model + " must output 1x3xHxW");
  const int h = static_cast<int>(out.shape[2]), w = static_cast<int>(out.shape[3]);
  auto* f = reinterpret_cast<float*>(out.data.data());
  std::vector<cv::Mat> planes;
  for (int c = 2; c >= 0; --c)  // RGB planes into BGR order
    planes.emplace_back(h, w, CV_32F, f + static_cast<size_t>(c) * h * w);
  cv::Mat merged, filled;
  cv::merge(planes, merged);
  merged.convertTo(filled, CV_8UC3, 255.0);
  cv::resize(filled, filled, bgr.size(), 0, 0, cv::INTER_CUBIC);
  cv::Mat result = bgr.clone();
  filled.copyTo(result, hole);
  return result;
}

Outcome InpaintStage::RunOne(const ClaimedJob& job, const StageContext& ctx) {
  auto image = ReadPicture(ctx, job, options_.limits);
  if (!image.ok()) return Outcome::Failed(image.status());
  auto hole = FindHole(job, ctx, image->size());
  if (!hole.ok()) {
    if (hole.status().code() == Status::Code::kNotFound)
      return Outcome::Skipped(std::string(hole.status().message()));
    return Outcome::Failed(hole.status());
  }
  const HoleShape shape = MeasureHole(hole->mask);
  if (shape.coverage == 0) return Outcome::Skipped("the mask (" + hole->source + ") is empty");
  if (shape.coverage > options_.max_coverage)
    return Outcome::Skipped("the mask covers " + std::to_string(int(std::lround(shape.coverage * 100))) +
                            "% of the image, over inpaint.max_coverage");
  std::string method, device;
  Result<cv::Mat> filled = Status::Internal("no method");
  if (!options_.model.empty()) {
    method = "model:" + fs::path(options_.model).stem().string();
    filled = RunModel(*image, hole->mask);
  } else {
    // A run with INPAINTING on a device: `auto` is the harmonic fill on every worker of it, on
    // the device where the worker has a seat there, else its CPU twin (the same pixels);
    // without a device, Telea's.
    const bool device_op = ctx.device_ops != nullptr && ctx.device_ops->count(kInpaintOperation) > 0 &&
                           ctx.ladder != nullptr;
    InpaintMethod m = device_op ? InpaintMethod::kPyramid : ChooseInpaintMethod(shape);
    if (options_.method != "auto") {
      auto parsed = ParseInpaintMethod(options_.method);
      if (!parsed.ok()) return Outcome::Failed(parsed.status());
      m = *parsed;
    }
    method = std::string(InpaintMethodName(m));
    InpaintDevice on;
    if (device_op && m == InpaintMethod::kExemplar) on.search = DeviceSearch(*ctx.ladder, &device);
    if (device_op && m == InpaintMethod::kPyramid) on.fill = DeviceFill(*ctx.ladder, &device);
    filled = Inpaint(*image, hole->mask, m, {}, on, &shape);
  }
  if (!filled.ok()) return Outcome::Failed(filled.status());
  std::vector<uchar> png;
  if (!cv::imencode(".png", *filled, png))
    return Outcome::Failed(Status::Internal("cannot encode the filled image"));
  nlohmann::json r = {{"method", method},
                      {"mask_coverage", Rounded(shape.coverage, 4)},
                      {"mask_source", hole->source},
                      {"mask", hole->path},
                      {"hole_half_width", Rounded(shape.half_width, 4)},
                      {"size", {image->cols, image->rows}}};
  if (hole->scaled) r["mask_scaled"] = true;
  // The filled image: the PNG artifact, named under "image".
  return DoneWithArtifact(job, "png", std::string_view(reinterpret_cast<const char*>(png.data()), png.size()),
                          "image", std::move(r), device.empty() ? "cpu" : device);
}

}  // namespace framemill
