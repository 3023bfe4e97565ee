// configs/ alone: a table of rows over a plain struct, resolved in rising precedence
// (default < YAML < environment < flag) with the provenance of each value.
#include "configs/config.h"

#include <gtest/gtest.h>

#include <fstream>

#include "tests/support/test_support.h"

namespace framemill {
namespace {

using testing::TempDir;

struct Toy {
  int64_t n = 1;
  std::string name = "a";
};

OptionRows ToyRows(Toy* t) {
  return {IntRow("toy.n", "TOY_N", "--n", {&t->n}, 0, 10),
          TextRow("toy.name", "TOY_NAME", "", &t->name)};
}

// Inputs whose config file (--config) is `yaml`, written as c.yaml in `dir`.
ConfigInputs WithYaml(const TempDir& dir, const std::string& yaml) {
  std::ofstream(dir / "c.yaml") << yaml;
  ConfigInputs in;
  in.config_file_flag = dir / "c.yaml";
  return in;
}

TEST(ConfigTest, EachRowTakesTheStrongestSourceAndSaysWhich) {
  TempDir dir;
  Toy t;
  ConfigInputs in = WithYaml(dir, "toy:\n  n: 3\n  name: yaml\n");
  in.env = {{"TOY_N", "4"}};
  in.flags = {{"toy.n", "5"}};
  auto r = ResolveRows(ToyRows(&t), in);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(t.n, 5);
  EXPECT_EQ(t.name, "yaml");
  ASSERT_EQ(r->provenance.size(), 2u);
  EXPECT_EQ(r->provenance[0].source, "flag --n");
  EXPECT_EQ(r->provenance[0].value, "5");
  EXPECT_EQ(r->provenance[1].source, "config " + (dir / "c.yaml"));
  EXPECT_EQ(r->config_file, dir / "c.yaml");

  Toy untouched;
  auto d = ResolveRows(ToyRows(&untouched), {});
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(untouched.n, 1) << "the struct's own default";
  EXPECT_EQ(d->provenance[0].source, "default");
}

TEST(ConfigTest, AnUnknownKeyOrABadValueNamesItsPlace) {
  TempDir dir;
  Toy t;
  auto r = ResolveRows(ToyRows(&t), WithYaml(dir, "toy:\n  m: 3\n"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("unknown key 'toy.m'"), std::string::npos);
  ConfigInputs bad;
  bad.env = {{"TOY_N", "11"}};
  r = ResolveRows(ToyRows(&t), bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("TOY_N"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace framemill
