// The kernel choices document (dump/kernel_choices.h): what the writer writes is JSON with the
// documented fields that reads back to the same records (times to 0.1 us), and each broken
// document is one error line that names the document and what is wrong in it.
#include "dump/kernel_choices.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace xlens {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(KernelChoicesTest, WrittenDocumentReadsBackAsTheSameRecords) {
  const std::vector<KernelChoiceRecord> records = {
      {"sapphirerapids, features 3f2a0c9e1d7b6a55, 2 hardware threads", "depthwise 8x56x56x128 \xc3\xa9\t\"q\"",
       {"depthwise:avx512", "brdgmm_dw:avx512_core", "rule"}, {1.34, 0.94123456, 0.0}, 1},
      // A time whose scaling to 0.1 us overflows is written as read, not as JSON's null.
      {"m", "k", {"a", "b"}, {1e308, 2.00004}, 0},
      // Not timed: the estimate that kept the trial from running, in place of the times.
      {"m", "big", {"a", "b"}, {}, 0, 41.10523}};
  const std::string text = SerializeKernelChoices(records);

  // As any JSON reader sees it.
  const nlohmann::json document = nlohmann::json::parse(text);
  EXPECT_EQ(document["format"], "xlens kernel choices");
  EXPECT_EQ(document["version"], kKernelChoiceFormatVersion);
  ASSERT_EQ(document["choices"].size(), 3u);
  EXPECT_EQ(document["choices"][0]["winner"], "brdgmm_dw:avx512_core");
  EXPECT_EQ(document["choices"][1]["best_ms"][0], 1e308);
  EXPECT_FALSE(document["choices"][1].contains("estimated_run_ms"));
  EXPECT_FALSE(document["choices"][2].contains("best_ms"));
  EXPECT_EQ(document["choices"][2]["estimated_run_ms"], 41.1052);

  StatusOr<std::vector<KernelChoiceRecord>> read = ParseKernelChoices(text, "written");
  ASSERT_TRUE(read.ok()) << read.status().message();
  ASSERT_EQ(read->size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ((*read)[i].machine, records[i].machine);
    EXPECT_EQ((*read)[i].key, records[i].key);
    EXPECT_EQ((*read)[i].candidates, records[i].candidates);
    EXPECT_EQ((*read)[i].winner, records[i].winner);
  }
  EXPECT_THAT((*read)[0].best_ms, ElementsAre(1.34, 0.9412, 0.0));
  EXPECT_THAT((*read)[1].best_ms, ElementsAre(1e308, 2.0));
  EXPECT_TRUE((*read)[1].timed());
  EXPECT_FALSE((*read)[2].timed());
  EXPECT_EQ((*read)[2].estimated_run_ms, 41.1052);
  EXPECT_EQ(SerializeKernelChoices(*read), text);
}

// Documents of version 1, which every choice was timed in, read as they were written.
TEST(KernelChoicesTest, VersionOneDocumentsStillRead) {
  const std::string text = R"({"format": "xlens kernel choices", "version": 1, "choices": [
      {"machine": "m", "key": "k", "candidates": ["a", "b"], "best_ms": [1.5, 0.5], "winner": "b"}]})";
  StatusOr<std::vector<KernelChoiceRecord>> read = ParseKernelChoices(text, "old.json");
  ASSERT_TRUE(read.ok()) << read.status().message();
  ASSERT_EQ(read->size(), 1u);
  EXPECT_TRUE((*read)[0].timed());
  EXPECT_EQ((*read)[0].winner, 1);
  EXPECT_THAT((*read)[0].best_ms, ElementsAre(1.5, 0.5));
}

TEST(KernelChoicesTest, EachBrokenDocumentIsOneErrorNamingWhatIsWrong) {
  const std::string head = R"({"format": "xlens kernel choices", "version": 2, "choices": )";
  auto one = [&](const std::string& fields) { return head + "[{" + fields + "}]}"; };
  const std::string named = R"("machine": "m", "key": "k", )";
  const struct {
    std::string text;
    std::string expected;
  } cases[] = {
      {"{\"format\": \"xlens kernel", "not JSON"},
      {R"({"format": "xla autotune results", "version": 1, "choices": []})", "not a kernel choices file"},
      {R"({"format": "xlens kernel choices", "version": 3, "choices": []})", "format version 3, expected 1 to 2"},
      {R"({"format": "xlens kernel choices", "version": 0, "choices": []})", "format version 0, expected 1 to 2"},
      {head + "{}}", "\"choices\" is missing or not an array"},
      {one(R"("key": "k", "candidates": ["a", "b"], "best_ms": [1, 2], "winner": "a")"), "\"machine\" is missing"},
      {one(R"("machine": "m", "key": "", "candidates": ["a", "b"], "best_ms": [1, 2], "winner": "a")"),
       "\"key\" is empty"},
      {one(named + R"("candidates": ["a"], "best_ms": [1], "winner": "a")"), "array of 2 to 64 names"},
      {one(named + R"("candidates": ["a", "b"], "best_ms": [1], "winner": "a")"), "one time per candidate"},
      {one(named + R"("candidates": ["a", 7], "best_ms": [1, 2], "winner": "a")"), "candidate 1 is not a name"},
      {one(named + R"("candidates": ["a", "b"], "best_ms": [1, -2], "winner": "a")"), "best_ms[1] is not a finite"},
      {one(named + R"("candidates": ["a", "b"], "winner": "a")"),
       "has neither \"best_ms\" (timed) nor \"estimated_run_ms\""},
      {one(named + R"("candidates": ["a", "b"], "best_ms": [1, 2], "estimated_run_ms": 3, "winner": "a")"),
       "has both \"best_ms\" (timed) and"},
      {one(named + R"("candidates": ["a", "b"], "best_ms": null, "winner": "a")"), "one time per candidate"},
      {one(named + R"("candidates": ["a", "b"], "estimated_run_ms": -1, "winner": "a")"),
       "\"estimated_run_ms\" is not a finite time"},
      {one(named + R"("candidates": ["a", "b"], "estimated_run_ms": "12", "winner": "a")"),
       "\"estimated_run_ms\" is not a finite time"},
      {R"({"format": "xlens kernel choices", "version": 1, "choices": [{"machine": "m", "key": "k", )"
       R"("candidates": ["a", "b"], "estimated_run_ms": 12, "winner": "a"}]})",
       "\"estimated_run_ms\" in a version 1 document"},
      {one(named + R"("candidates": ["a", "b"], "best_ms": [1, 2], "winner": "c\u001b")"),
       "the winner c\\x1b is not one of its candidates"},
      {one(named + "\"candidates\": [\"" + std::string(kMaxKernelChoiceTextBytes + 1, 'x') +
           R"(", "b"], "best_ms": [1, 2], "winner": "b")"),
       "candidate 0 is not a name"},
  };
  for (const auto& c : cases) {
    StatusOr<std::vector<KernelChoiceRecord>> read = ParseKernelChoices(c.text, "choices.json");
    ASSERT_FALSE(read.ok()) << c.text;
    EXPECT_THAT(read.status().message(), HasSubstr("choices.json"));
    EXPECT_THAT(read.status().message(), HasSubstr(c.expected));
    EXPECT_EQ(read.status().message().find('\n'), std::string::npos) << read.status().message();
  }
}

}  // namespace
}  // namespace xlens
