// The registry of this build's stages: every stage registered, and a stage that cannot
// be (added before its dependency) stops registration with its name and the reason.
#include <gtest/gtest.h>

#include <iterator>

#include "jobs/stage_names.h"
#include "stages/registry.h"

namespace framemill {
namespace {

class NamedStage : public Stage {
 public:
  NamedStage(std::string name, std::vector<std::string> deps) {
    spec_.name = std::move(name);
    spec_.deps = std::move(deps);
  }
  const StageSpec& spec() const override { return spec_; }
  std::vector<Outcome> RunBatch(const std::vector<ClaimedJob>&, const StageContext&) override {
    return {};
  }

 private:
  StageSpec spec_;
};

TEST(StageRegistryTest, TheDefaultRegistryHoldsEveryStageOfThisBuild) {
  auto registry = MakeDefaultRegistry(StageOptions{});
  ASSERT_TRUE(registry.ok()) << registry.status().ToString();
  for (const char* name : stage_names::kAll) EXPECT_NE((*registry)->Find(name), nullptr) << name;
  EXPECT_EQ((*registry)->graph().stages().size(), std::size(stage_names::kAll))
      << "a stage registered but not in stage_names::kAll, or the other way";
}

TEST(StageRegistryTest, AStageAddedBeforeItsDependencyStopsRegistrationNamingIt) {
  StageRegistry registry;
  std::vector<std::unique_ptr<Stage>> stages;
  stages.push_back(std::make_unique<NamedStage>("a", std::vector<std::string>{}));
  stages.push_back(std::make_unique<NamedStage>("c", std::vector<std::string>{"b"}));
  stages.push_back(std::make_unique<NamedStage>("b", std::vector<std::string>{"a"}));
  Status s = AddAll(&registry, std::move(stages));
  EXPECT_EQ(s.code(), Status::Code::kInternal) << s.ToString();
  EXPECT_NE(s.message().find("stage c cannot be registered"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("unknown stage 'b'"), std::string::npos) << s.message();
  EXPECT_NE(registry.Find("a"), nullptr);
  EXPECT_EQ(registry.Find("c"), nullptr);
  EXPECT_EQ(registry.Find("b"), nullptr);  // nothing after the failure
}

}  // namespace
}  // namespace framemill
