// What every test of the neural models shares: where the installed models are
// (FRAMEMILL_MODELS, else <repo>/.cache/models, which scripts/test.sh fills) and the rule
// for a missing one: skip with the reason, or fail when FRAMEMILL_REQUIRE_MODELS=1 (CI).
// Header-only, so test binaries of any library can use it. Tests may read the environment.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <opencv2/core.hpp>

#include "jobs/job.h"
#include "tests/support/dnn_model.h"
#include "models/manifest.h"

namespace framemill::testing {

// Intersection over union of two masks (CV_8U, nonzero = foreground); 1 when both are empty.
inline float MaskIoU(const cv::Mat& a, const cv::Mat& b) {
  CV_Assert(a.size() == b.size() && a.type() == CV_8U && b.type() == CV_8U);
  cv::Mat i, u;
  cv::bitwise_and(a != 0, b != 0, i);
  cv::bitwise_or(a != 0, b != 0, u);
  const int nu = cv::countNonZero(u);
  return nu == 0 ? 1.f : static_cast<float>(cv::countNonZero(i)) / nu;
}

inline std::string ModelsDir() {
  const char* e = std::getenv("FRAMEMILL_MODELS");
  return e != nullptr && *e != '\0' ? e : FRAMEMILL_SOURCE_DIR "/.cache/models";
}

// The reference outputs tools/models/make_reference.sh wrote (FRAMEMILL_GOLDEN_DIR).
inline std::string GoldenDir() {
  const char* e = std::getenv("FRAMEMILL_GOLDEN_DIR");
  return e != nullptr && *e != '\0' ? e : FRAMEMILL_SOURCE_DIR "/.cache/golden";
}

// A raw little-endian float32 file (the references' <i>_<k>.raw, the VAD's audio).
inline std::vector<float> ReadF32(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  std::vector<float> v(static_cast<size_t>(in.tellg()) / 4);
  in.seekg(0);
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * 4));
  return v;
}

// Real media Debian does not ship, fetched by tools/media/fetch_media.sh (FRAMEMILL_MEDIA_DIR).
inline std::string MediaDir() {
  const char* e = std::getenv("FRAMEMILL_MEDIA_DIR");
  return e != nullptr && *e != '\0' ? e : FRAMEMILL_SOURCE_DIR "/.cache/media";
}

inline bool ModelsRequired() {
  const char* e = std::getenv("FRAMEMILL_REQUIRE_MODELS");
  return e != nullptr && std::string(e) == "1";
}

// A job of `stage` on the file at `path`, as the worker would hand it to a stage.
inline ClaimedJob JobFor(const std::string& stage, const std::string& path, MediaKind kind,
                         int64_t item = 1) {
  ClaimedJob j;
  j.id = item;
  j.item_id = item;
  j.stage = stage;
  j.source = path;
  j.kind = kind;
  return j;
}

// Max |a-b| over every output of every image, relative to the largest |b|.
inline double RelMaxDiff(const std::vector<std::vector<models::OutputTensor>>& a,
                         const std::vector<std::vector<models::OutputTensor>>& b) {
  double worst = 0;
  for (size_t i = 0; i < b.size(); ++i)
    for (size_t k = 0; k < b[i].size(); ++k) {
      double d = 0, ref = 1e-6;
      EXPECT_EQ(a[i][k].name, b[i][k].name);
      EXPECT_EQ(a[i][k].shape, b[i][k].shape) << b[i][k].name;
      if (a[i][k].data.size() != b[i][k].data.size()) return 1e9;
      for (size_t j = 0; j < b[i][k].data.size(); ++j) {
        d = std::max(d, double{std::fabs(a[i][k].data[j] - b[i][k].data[j])});
        ref = std::max(ref, double{std::fabs(b[i][k].data[j])});
      }
      worst = std::max(worst, d / ref);
    }
  return worst;
}

}  // namespace framemill::testing

// Declares `ModelManifest var` for installed model `name`, or skips (fails when required).
#define FM_LOAD_MODEL_OR_SKIP(var, name)                                                   \
  auto var##_r = ::framemill::models::LoadManifest(::framemill::testing::ModelsDir() + "/" + \
                                                   (name));                                \
  if (!var##_r.ok()) {                                                                     \
    if (::framemill::testing::ModelsRequired()) FAIL() << var##_r.status().ToString();     \
    GTEST_SKIP() << "model " << (name) << " not installed in "                             \
                 << ::framemill::testing::ModelsDir() << ": " << var##_r.status().ToString(); \
  }                                                                                        \
  ::framemill::models::ModelManifest var = std::move(var##_r).value()

// Skips (fails when required) unless model `name` is installed.
#define FM_REQUIRE_MODEL(name)                     \
  do {                                             \
    FM_LOAD_MODEL_OR_SKIP(required_model_, name);  \
    (void)required_model_;                         \
  } while (0)
