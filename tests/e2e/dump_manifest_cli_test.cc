// manifest.json of a real compilation, read as the viewer reads it (plain JSON): every stage's
// change record and the fusion decisions, checked against the dumped HLO text and against what
// `xlens opt --explain-fusion` prints.
#include <filesystem>
#include <regex>
#include <set>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_test_util.h"
#include "test_util.h"

namespace xlens {
namespace {

using json = nlohmann::json;

const std::string kMnist = std::string(XLENS_SOURCE_DIR) + "/samples/mnist_softmax_train_step.hlo";

class DumpManifestCliTest : public CliTest {
 protected:
  // Runs the mnist step with every pass dumped and returns its module's manifest entry.
  json DumpMnist() {
    dump_ = (dir_ / "dump").string();
    RunResult r = RunXlens("run " + kMnist + " --xla_dump_to=" + dump_ + " --xla_dump_hlo_pass_re=.*");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    json manifest = json::parse(testing::ReadTestFile(dump_ + "/manifest.json"));
    EXPECT_EQ(manifest["modules"].size(), 1u);
    return manifest["modules"][0];
  }
  std::string dump_;
};

// The names defined at the start of a line of HLO text ("  ROOT %add.3 = ..." -> add.3).
std::set<std::string> DefinedNames(const std::string& text) {
  std::set<std::string> names;
  static const std::regex kDefinition(R"(^\s*(?:ROOT )?%?([^\s=]+) = )");
  std::istringstream lines(text);
  std::string line;
  std::smatch m;
  while (std::getline(lines, line)) {
    if (std::regex_search(line, m, kDefinition)) names.insert(m[1]);
  }
  return names;
}

TEST_F(DumpManifestCliTest, EveryChangingStageSaysWhatItChangedAndNoOtherDoes) {
  json module = DumpMnist();
  int changed_stages = 0, checked_against_text = 0;
  bool fused = false;
  for (const json& stage : module["stages"]) {
    std::string where = stage["pipeline"].get<std::string>() + "/" + stage["pass"].get<std::string>();
    if (!stage["changed"].get<bool>()) {
      EXPECT_FALSE(stage.contains("changes")) << where << " changed nothing but has a change record";
      continue;
    }
    ++changed_stages;
    ASSERT_TRUE(stage.contains("changes")) << where << " changed the module but has no change record";
    const json& changes = stage["changes"];
    size_t entries = changes["added"].size() + changes["removed"].size() +
                     changes["modified"].size() + changes["fused_into"].size();
    EXPECT_GT(entries, 0u) << where;
    for (const char* list : {"added", "removed", "modified"}) {
      std::vector<std::string> names = changes[list];
      EXPECT_TRUE(std::is_sorted(names.begin(), names.end())) << where << " " << list;
    }
    fused |= !changes["fused_into"].empty();
    // The module after the stage, as dumped: what was added or modified is defined there, what
    // was removed is not, and a fusion that took an instruction in is.
    for (const json& file : stage["files"]) {
      std::string name = file;
      if (!name.ends_with(".txt")) continue;
      std::set<std::string> defined = DefinedNames(testing::ReadTestFile(dump_ + "/" + name));
      for (const json& n : changes["added"]) EXPECT_TRUE(defined.count(n)) << where << " added " << n;
      for (const json& n : changes["modified"]) EXPECT_TRUE(defined.count(n)) << where << " modified " << n;
      for (const json& n : changes["removed"]) EXPECT_FALSE(defined.count(n)) << where << " removed " << n;
      for (const auto& [x, fusion] : changes["fused_into"].items()) {
        EXPECT_TRUE(defined.count(fusion.get<std::string>())) << where << " " << x << " -> " << fusion;
        EXPECT_TRUE(defined.count(x)) << where << ": " << x << " is inside its fusion";
      }
      ++checked_against_text;
    }
  }
  // dot-decomposer, fusion and multi-output-fusion change this module.
  EXPECT_GE(changed_stages, 3);
  EXPECT_GE(checked_against_text, 3);
  EXPECT_TRUE(fused) << "the fusion stage records what it fused";
}

TEST_F(DumpManifestCliTest, FusionDecisionsAreTheOnesExplainFusionPrints) {
  json module = DumpMnist();
  ASSERT_TRUE(module.contains("fusion_decisions"));
  std::map<int64_t, std::string> pass_of_step;
  for (const json& stage : module["stages"]) pass_of_step[stage["step"]] = stage["pass"];
  std::vector<std::string> from_manifest;
  for (const json& d : module["fusion_decisions"]) {
    // Each decision names the stage of the pass that took it.
    ASSERT_TRUE(pass_of_step.count(d["step"])) << d.dump();
    EXPECT_EQ(pass_of_step[d["step"]], d["pass"].get<std::string>()) << d.dump();
    std::string line = d["fused"].get<bool>()
                           ? "fused " + d["producer"].get<std::string>() + " into " +
                                 d["consumer"].get<std::string>() + " (" + d["kind"].get<std::string>() + ")"
                           : "refused " + d["producer"].get<std::string>() + " into " +
                                 d["consumer"].get<std::string>();
    std::string reason = d["reason"];
    if (!reason.empty() || !d["fused"].get<bool>()) line += ": " + reason;
    from_manifest.push_back(line);
  }

  RunResult explained = RunXlens("opt " + kMnist + " --explain-fusion");
  ASSERT_EQ(explained.exit_code, 0) << explained.output;
  std::vector<std::string> printed;
  std::istringstream lines(explained.output);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.starts_with("fused ") || line.starts_with("refused ")) printed.push_back(line);
  }
  ASSERT_FALSE(printed.empty()) << explained.output;
  EXPECT_EQ(from_manifest, printed);
}

}  // namespace
}  // namespace xlens
