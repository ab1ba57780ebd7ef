// Logging and string ops against TensorFlow: every case of testdata/ops/string_cases.json
// (TensorFlow 2.21, see generate.py there): Assert's message, StringFormat's summaries, AsString
// formats, StringToNumber's parsing and errors, StringJoin's broadcasting.
#include <gtest/gtest.h>

#include "kernel_test_util.h"

namespace xlens::graph {
namespace {

TEST(StringOpsTest, EveryTensorFlowCase) {
  const auto cases = testing::LoadCases("string_cases.json");
  ASSERT_GT(cases.size(), 15u);
  for (const auto& c : cases) testing::CheckCase(c);
}

TEST(StringOpsTest, StringFormatCountsPlaceholders) {
  AttrListValue types;
  types.type = {DT_INT32};
  auto out = testing::RunOp("StringFormat", {Tensor::Vector<int32_t>(DT_INT32, {1})},
                            {{"T", AttrValue::List(types)},
                             {"template", AttrValue::String("{} {}")},
                             {"placeholder", AttrValue::String("{}")}});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find(
                "num placeholders in template and num inputs must match: 2 vs. 1"),
            std::string::npos);
}

TEST(StringOpsTest, PyFuncSaysItCannotRunPython) {
  AttrListValue none;
  auto out = testing::RunOp("PyFunc", {},
                            {{"token", AttrValue::String("pyfunc_0")},
                             {"Tin", AttrValue::List(none)},
                             {"Tout", AttrValue::List(none)}});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("Python function (token 'pyfunc_0')"),
            std::string::npos);
}

}  // namespace
}  // namespace xlens::graph
