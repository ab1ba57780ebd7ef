// The arguments a oneDNN part keeps from one call to the next (onednn_thunk_parts.h: memory
// objects pointed at each call's buffers, kept per thunk and part): products and convolutions
// called with their arguments in new places each call, and two executables of the same module
// taking turns, compute what the evaluator does.
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "../codegen/codegen_test_util.h"
#include "compiler/runtime/cpu_compiler.h"
#include "compiler/runtime/onednn_thunks.h"
#include "test_util.h"


namespace xlens::runtime {
namespace {

class OneDnnThunkPartsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!OneDnnAvailable()) GTEST_SKIP() << "built without oneDNN (libdnnl-dev)";
  }
};


// Runs `text` on `calls` argument sets, each in literals of its own (so the parameters the
// program reads in place lie somewhere new every call), against the evaluator; a twin executable
// compiled from the same text runs after it on the same arguments, its thunks taking turns with
// the first's on the same threads.
void ExpectCallsInNewPlacesMatchEvaluator(const std::string& text, int calls) {
  SCOPED_TRACE(text);
  auto module = ParseHloModule(text);
  ASSERT_TRUE(module.ok()) << module.status().message();
  auto exe = CompileForCpu(std::move(*module), {});
  ASSERT_TRUE(exe.ok()) << exe.status().message();
  auto twin_module = ParseHloModule(text);
  ASSERT_TRUE(twin_module.ok());
  auto twin = CompileForCpu(std::move(*twin_module), {});
  ASSERT_TRUE(twin.ok()) << twin.status().message();
  EXPECT_THAT((*exe)->ThunkSequenceText(), ::testing::HasSubstr("oneDNN "));
  auto reference = ParseHloModule(text);
  ASSERT_TRUE(reference.ok());
  for (int call = 0; call < calls; ++call) {
    std::vector<std::unique_ptr<Literal>> owned;
    std::vector<const Literal*> arguments;
    for (Literal& l : testing::RandomArguments(text, 100 + call)) {
      owned.push_back(std::make_unique<Literal>(std::move(l)));
      arguments.push_back(owned.back().get());
    }
    auto expected = EvaluateModule(**reference, testing::RandomArguments(text, 100 + call));
    ASSERT_TRUE(expected.ok()) << expected.status().message();
    for (runtime::Executable* e : {exe->get(), twin->get()}) {
      auto actual = e->Execute(std::span<const Literal* const>(arguments));
      ASSERT_TRUE(actual.ok()) << actual.status().message();
      Status match = ExpectLiteralNear(*expected, *actual, {2e-5, 2e-5});
      EXPECT_TRUE(match.ok()) << "call " << call << ": " << match.message();
    }
  }
}

TEST_F(OneDnnThunkPartsTest, ProductsAndConvolutionsReadEachCallsBuffers) {
  // A product with a bias (a post-op's argument) and one in parts of rows.
  ExpectCallsInNewPlacesMatchEvaluator(R"(HloModule m
ENTRY e {
  a = f32[100,64] parameter(0)
  b = f32[64,10] parameter(1)
  bias = f32[10] parameter(2)
  d = f32[100,10] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  bb = f32[100,10] broadcast(bias), dimensions={1}
  ROOT r = f32[100,10] add(d, bb)
})",
                                       4);
  ExpectCallsInNewPlacesMatchEvaluator(R"(HloModule m
ENTRY e {
  a = f32[256,128] parameter(0)
  b = f32[128,96] parameter(1)
  ROOT d = f32[256,96] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
})",
                                       4);
  // A convolution in blocks of images, its weights reordered each call, and a weight gradient.
  ExpectCallsInNewPlacesMatchEvaluator(R"(HloModule c
ENTRY e {
  x = f32[4,10,10,8] parameter(0)
  k = f32[3,3,8,16] parameter(1)
  ROOT c = f32[4,10,10,16] convolution(x, k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
})",
                                       4);
  ExpectCallsInNewPlacesMatchEvaluator(R"(HloModule c
ENTRY e {
  x = f32[4,10,10,8] parameter(0)
  dy = f32[4,10,10,16] parameter(1)
  ROOT c = f32[3,3,8,16] convolution(x, dy), window={size=10x10 pad=1_1x1_1}, dim_labels=f01b_i01o->01bf
})",
                                       4);
}

}  // namespace
}  // namespace xlens::runtime
