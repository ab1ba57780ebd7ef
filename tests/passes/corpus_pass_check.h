// Runs one pass over every corpus module the reference evaluator runs (the 46 the corpus README
// lists) and checks that each result verifies and computes what the original did.
#pragma once

#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "pass_test_util.h"
#include "test_util.h"

namespace xlens::testing {


struct CorpusPassSummary {
  int checked = 0;  // modules that evaluated before the pass
  int changed = 0;  // of those, the ones the pass changed
  std::vector<std::string> changed_names;
};

// Runs a fresh pass from `make_pass` on each module; a failure names the module. Modules the
// evaluator cannot run before the pass are skipped (they test nothing here). `summary` is filled
// when given. Returns false (after GTEST_SKIP-worthy reasons are logged) when the corpus is absent.
inline bool CheckPassOverCorpus(const std::function<std::unique_ptr<HloPass>()>& make_pass,
                                CorpusPassSummary* summary = nullptr) {
  const std::string dir = std::string(XLENS_SHARED_DIR) + "/corpus/hlo/";
  if (!std::filesystem::exists(dir)) return false;
  CorpusPassSummary local;
  for (const std::string& name : EvaluatorCorpusModules()) {
    SCOPED_TRACE(name);
    std::ifstream file(dir + name + ".hlo");
    if (!file) continue;
    std::stringstream text;
    text << file.rdbuf();
    auto parsed = ParseHloModule(text.str(), ParseOptions{.verify = true, .filename = name});
    if (!parsed.ok()) continue;
    std::unique_ptr<HloModule> module = std::move(parsed).value();
    std::unique_ptr<HloModule> before = CloneModule(*module);
    {
      // Skip modules the evaluator cannot run as they are.
      std::mt19937_64 rng(7);
      std::vector<Literal> args;
      bool ok = true;
      for (const HloInstruction* p : before->entry_computation()->parameter_instructions()) {
        auto lit = MakeRandomLiteral(p->shape(), rng);
        if (!lit.ok()) { ok = false; break; }
        args.push_back(std::move(*lit));
      }
      if (!ok || !EvaluateModule(*before, args).ok()) continue;
    }
    std::unique_ptr<HloPass> pass = make_pass();
    auto changed = RunPassChecked(*pass, *module);
    EXPECT_TRUE(changed.ok()) << changed.status().message();
    if (!changed.ok()) continue;
    ++local.checked;
    if (*changed) {
      ++local.changed;
      local.changed_names.push_back(name);
    }
    EXPECT_TRUE(SameResults(*before, *module, 7, ErrorSpec{1e-3, 1e-3}));
    // A second run must not fail, and the printed result must parse back.
    auto again = RunPassChecked(*pass, *module);
    EXPECT_TRUE(again.ok()) << again.status().message();
    EXPECT_NE(CloneModule(*module), nullptr);
  }
  if (summary != nullptr) *summary = local;
  return true;
}

}  // namespace xlens::testing
