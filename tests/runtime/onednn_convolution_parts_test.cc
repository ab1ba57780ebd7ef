// How a oneDNN convolution call is split over the pool (onednn_convolution_thunks.cc): in more
// blocks of images than there are threads where the work allows, so that a thread woken late
// holds back one block rather than half the call, each block's result (for the kernel's
// gradient, the sum of every block's) against the reference evaluator.
#include <fstream>
#include <regex>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../codegen/codegen_test_util.h"
#include "compiler/runtime/cpu_compiler.h"
#include "compiler/runtime/measured_choice.h"
#include "compiler/runtime/onednn_thunks.h"
#include "compiler/support/thread_pool.h"
#include "scratch_directory.h"
#include "test_util.h"

namespace xlens::runtime {
namespace {

using ::testing::HasSubstr;

std::string ConvolutionModule(const std::string& lhs, const std::string& rhs, const std::string& out,
                              const std::string& attributes, const std::string& reverse = "") {
  std::string text = "HloModule c\nENTRY e {\n  a = " + lhs + " parameter(0)\n  b = " + rhs + " parameter(1)\n";
  if (!reverse.empty()) text += "  rb = " + rhs + " reverse(b), dimensions={" + reverse + "}\n";
  return text + "  ROOT c = " + out + " convolution(a, " + (reverse.empty() ? "b" : "rb") + "), " +
         attributes + "\n}\n";
}

// Compiles `text`, expects `call` and, on two threads, `parts` in its thunk listing, and compares
// with the evaluator, to `tolerance` (absolute and relative).
void ExpectSplitMatchesEvaluator(const std::string& text, const std::string& call, int parts,
                                 double tolerance = 2e-5) {
  SCOPED_TRACE(text);
  const StatusOr<std::string> compiled = testing::ThunkListing(text);
  ASSERT_TRUE(compiled.ok()) << compiled.status().message();
  const std::string& listing = *compiled;
  EXPECT_THAT(listing, HasSubstr("oneDNN " + call + ";"));
  // The counts below are for this project's machine (two threads); elsewhere only the results.
  if (ThreadPool::Default().parallelism() == 2) {
    EXPECT_THAT(listing, HasSubstr("; " + std::to_string(parts) + " parts on the pool"));
  }
  testing::ExpectMatchesEvaluator(text, {}, {tolerance, tolerance});
}

class OneDnnConvolutionPartsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!OneDnnAvailable()) GTEST_SKIP() << "built without oneDNN (libdnnl-dev)";
  }
};

TEST_F(OneDnnConvolutionPartsTest, WorkEnoughRunsInMoreBlocksThanThreads) {
  // 8 images of 16x16x32 through a 3x3x32x32 kernel: 18.9M multiply-adds, 4 blocks of 4.7M.
  ExpectSplitMatchesEvaluator(ConvolutionModule("f32[8,16,16,32]", "f32[3,3,32,32]", "f32[8,16,16,32]",
                                                "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f"),
                              "convolution", 4);
  // Depthwise, 128 groups on 32x32 images: 9.4M, but 8.4 MB of images, 4 blocks of 2.1 MB.
  ExpectSplitMatchesEvaluator(
      ConvolutionModule("f32[8,32,32,128]", "f32[3,3,1,128]", "f32[8,32,32,128]",
                        "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, feature_group_count=128"),
      "convolution[128 groups]", 4);
  // The input gradient of a stride-2 convolution (14.4M), as JAX writes it: blocks of 3, 3 and 2
  // images.
  ExpectSplitMatchesEvaluator(
      ConvolutionModule("f32[8,14,14,32]", "f32[3,3,32,32]", "f32[8,28,28,32]",
                        "window={size=3x3 pad=2_1x2_1 lhs_dilate=2x2}, dim_labels=b01f_01oi->b01f", "0,1"),
      "convolution_backward_data", 3);
  // 10 images, 23.6M: five blocks of two images.
  ExpectSplitMatchesEvaluator(ConvolutionModule("f32[10,16,16,32]", "f32[3,3,32,32]", "f32[10,16,16,32]",
                                                "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f"),
                              "convolution", 5);
}

TEST_F(OneDnnConvolutionPartsTest, KernelGradientBlocksAddUp) {
  // Each weight is a sum of 8192 (then 1152) products, which f32 rounds to some 1e-5 of it in
  // any order of the terms.
  // The gradient of a 3x3x16x16 kernel over 8 images of 32x32 (18.9M multiply-adds): four
  // partial sums of 2304 weights against 262K floats of images.
  ExpectSplitMatchesEvaluator(ConvolutionModule("f32[8,32,32,16]", "f32[8,32,32,16]", "f32[3,3,16,16]",
                                                "window={size=32x32 pad=1_1x1_1}, dim_labels=f01b_i01o->01bf"),
                              "convolution_backward_weights", 4, 2e-4);
  // A 3x3x64x64 kernel over 8 images of 12x12 (42M): eight partial sums of 36,864 weights would
  // read more than the 147K floats of images, so one block per thread.
  ExpectSplitMatchesEvaluator(ConvolutionModule("f32[8,12,12,64]", "f32[8,12,12,64]", "f32[3,3,64,64]",
                                                "window={size=12x12 pad=1_1x1_1}, dim_labels=f01b_i01o->01bf"),
                              "convolution_backward_weights", 2, 2e-4);
}

TEST_F(OneDnnConvolutionPartsTest, LittleWorkKeepsABlockPerThread) {
  // 8 images of 8x8x8 through 3x3x8x8 (0.3M): a block per thread, as before.
  ExpectSplitMatchesEvaluator(ConvolutionModule("f32[8,8,8,8]", "f32[3,3,8,8]", "f32[8,8,8,8]",
                                                "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f"),
                              "convolution", 2);
}

// oneDNN's first implementation is not always its fastest (a 3x3 convolution of one input
// channel: brgconv twice jit:avx512_core's time on this project's machine), so a forward or
// backward-data call times the first few on its part's shape and keeps the fastest. Here each
// candidate is forced in turn (as --xla_cpu_xlens_load_kernel_choices_from does), whichever the
// trial picked on this machine: the listing names it and the results match the evaluator.
TEST_F(OneDnnConvolutionPartsTest, OneDnnKernelsAreTimedAndEachComputesTheConvolution) {
  SetKernelChoiceMode(KernelChoiceMode::kMeasured);
  const std::string dump = testing::ScratchDirectory() + "/convolution_kernel_choices.json";
  const std::string forced = testing::ScratchDirectory() + "/convolution_kernel_forced.json";
  const std::vector<std::string> modules = {
      // The convolution step's first layer (one input channel), 4 images.
      ConvolutionModule("f32[4,28,28,1]", "f32[3,3,1,8]", "f32[4,28,28,8]",
                        "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f"),
      // Its input gradient through the stride-2 second layer.
      ConvolutionModule("f32[4,14,14,16]", "f32[3,3,8,16]", "f32[4,28,28,8]",
                        "window={size=3x3 pad=2_1x2_1 lhs_dilate=2x2}, dim_labels=b01f_01oi->b01f", "0,1")};
  for (const std::string& text : modules) {
    SCOPED_TRACE(text);
    ClearMeasuredChoices();
    SetKernelChoicesDumpPath(dump);
    const StatusOr<std::string> timed = testing::ThunkListing(text);
    SetKernelChoicesDumpPath("");
    ASSERT_TRUE(timed.ok()) << timed.status().message();
    const std::regex summary(R"(kernel ([^,;]+), timed [0-9.]+ ms against ([^;]+?) [0-9.]+ ms)");
    std::smatch m;
    ASSERT_TRUE(std::regex_search(*timed, m, summary)) << *timed;
    nlohmann::json choices = nlohmann::json::parse(testing::ReadTestFile(dump));
    ASSERT_EQ(choices["choices"].size(), 1u) << choices.dump();
    const nlohmann::json candidates = choices["choices"][0]["candidates"];
    ASSERT_GE(candidates.size(), 2u);
    ASSERT_LE(candidates.size(), 3u);
    for (const auto& name : candidates) {
      EXPECT_EQ(name.get<std::string>().rfind("ref", 0), std::string::npos) << "a reference kernel timed";
    }
    for (const auto& name : candidates) {
      SCOPED_TRACE(name.get<std::string>());
      choices["choices"][0]["winner"] = name;
      std::ofstream(forced, std::ios::trunc) << choices.dump();
      ClearMeasuredChoices();
      ASSERT_TRUE(LoadKernelChoices(forced).ok());
      const StatusOr<std::string> listing = testing::ThunkListing(text);
      ASSERT_TRUE(listing.ok()) << listing.status().message();
      EXPECT_THAT(*listing, HasSubstr("kernel " + name.get<std::string>() + ", loaded: timed ")) << *listing;
      testing::ExpectMatchesEvaluator(text, {}, {2e-5, 2e-5});
    }
    ASSERT_TRUE(LoadKernelChoices("").ok());
  }
  ClearMeasuredChoices();
}

}  // namespace
}  // namespace xlens::runtime
