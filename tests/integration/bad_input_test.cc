// Bad input fails its own job with the reason recorded; good items are done; the
// workers never crash.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/support/test_support.h"

namespace framemill::testing {
namespace {

// A PNG whose IHDR declares 100000 x 100000 pixels (10 gigapixels), followed by a
// tiny IDAT: a decoder that trusted it would try to allocate 30 GB.
std::string GiantPng() {
  std::string s("\x89PNG\r\n\x1A\n", 8);
  auto be32 = [](uint32_t v) {
    return std::string{char(v >> 24), char(v >> 16), char(v >> 8), char(v)};
  };
  s += be32(13) + "IHDR" + be32(100000) + be32(100000) + std::string("\x08\x02\x00\x00\x00", 5);
  s += be32(0);  // CRC (wrong on purpose: never reached)
  s += be32(4) + "IDAT" + std::string("\x78\x9c\x03\x00", 4) + be32(0);
  return s;
}

std::string ErrorOf(const std::string& db, const std::string& file) {
  auto rows = QueryRows(db, "SELECT j.state || '|' || coalesce(j.error_class,'') || '|' ||"
                            " coalesce(j.last_error,'') || '|' || j.attempts FROM jobs j"
                            " JOIN items i ON i.id = j.item_id WHERE i.source LIKE '%/" + file + "'");
  return rows.empty() ? "<no job>" : rows[0];
}

TEST(BadInputTest, EachBadFileFailsItsOwnJobWithTheReason) {
  TempDir dir;
  const std::string media = dir / "media";
  auto good = MakeRealImages(media, 6, 400);
  std::filesystem::copy_file(SampleData("vtest.avi"), media + "/good.avi");
  WriteFile(media + "/empty.jpg", "");
  WriteTruncated(SampleData("messi5.jpg"), media + "/truncated.jpg", 0.5);
  WriteTruncated(SampleData("box.png"), media + "/truncated.png", 0.5);
  WriteFile(media + "/notes.jpg", "These are my holiday notes, not a picture.\n");
  WriteFile(media + "/giant.png", GiantPng());
  WriteTruncated(SampleData("vtest.avi"), media + "/truncated.avi", 0.4);
  WriteFile(media + "/README", "not media, no media extension: skipped at enqueue\n");

  const std::string db = dir / "fm.db";
  std::map<std::string, std::string> env = {{"FRAMEMILL_DB", db},
                                            {"FRAMEMILL_MAX_IMAGE_PIXELS", "50000000"},
                                            {"FRAMEMILL_STAGES", "lighting"}};
  auto enq = RunProcess({FRAMEMILL_BIN, "enqueue", media}, env, dir.path());
  ASSERT_EQ(enq.exit_code, 0) << enq.err;
  EXPECT_NE(enq.out.find("skipped 1 file(s): not an image or video"), std::string::npos) << enq.out;
  auto run = RunProcess({FRAMEMILL_BIN, "run", "--workers", "2"}, env, dir.path());
  EXPECT_EQ(run.exit_code, 3) << run.err;  // finished, some failed permanently
  EXPECT_EQ(run.err.find("killed by signal"), std::string::npos) << run.err;
  EXPECT_EQ(run.err.find("exited with code"), std::string::npos) << run.err;

  // state|error_class|message|attempts; permanent failures take one attempt.
  EXPECT_EQ(ErrorOf(db, "empty.jpg"), "3|corrupt_input|empty file (0 bytes)|1");
  EXPECT_EQ(ErrorOf(db, "truncated.jpg"),
            "3|corrupt_input|truncated JPEG: no end-of-image marker|1");
  EXPECT_EQ(ErrorOf(db, "truncated.png"),
            "3|corrupt_input|could not decode png data (truncated or corrupt)|1");
  EXPECT_EQ(ErrorOf(db, "notes.jpg"), "3|unsupported_media|not an image: content is text|1");
  EXPECT_EQ(ErrorOf(db, "giant.png"),
            "3|too_large|png header declares 100000x100000 (10000.0 MP), over the limit of "
            "50.0 MP (media.max_image_pixels); not decoded|1");
  std::string video = ErrorOf(db, "truncated.avi");
  EXPECT_EQ(video.rfind("3|corrupt_input|video truncated or damaged: frame ", 0), 0u) << video;

  // Every good item is done, with a result.
  for (const std::string& g : good) {
    std::string name = g.substr(g.rfind('/') + 1);
    EXPECT_EQ(ErrorOf(db, name).substr(0, 4), "2|||") << name;
  }
  EXPECT_EQ(ErrorOf(db, "good.avi").substr(0, 4), "2|||");
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM results"), static_cast<long long>(good.size()) + 1);
  // The reasons are what `status` groups and shows.
  auto status = RunProcess({FRAMEMILL_BIN, "status", "--json"}, env, dir.path());
  ASSERT_EQ(status.exit_code, 0);
  auto j = nlohmann::json::parse(status.out);
  EXPECT_EQ(j["items"], 13);
  EXPECT_EQ(j["stages"]["lighting"]["done"], 7);
  EXPECT_EQ(j["stages"]["lighting"]["failed"], 6);
  long long classes = 0;
  for (auto& f : j["failures"]) classes += f["count"].get<long long>();
  EXPECT_EQ(classes, 6);
  // No worker died: no lease ever had to be rescued.
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM job_errors WHERE error_class IN ('lease_expired', 'timeout')"), 0);
}

}  // namespace
}  // namespace framemill::testing
