// The loop kernel after a convolution run on each of its parts' images (part_epilogue.h): a
// training step's ReLU kept beside its pre-activation, and the ReLU gradient JAX writes (a mask
// from the pre-activation: 1 above 0, 0.5 at +-0, 0 below and for NaN) times the input gradient,
// against the reference evaluator, with zeros of both signs, infinities and NaNs in the inputs.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "../codegen/codegen_test_util.h"
#include "compiler/runtime/cpu_compiler.h"
#include "compiler/runtime/onednn_thunks.h"
#include "compiler/runtime/part_epilogue.h"
#include "compiler/support/thread_pool.h"
#include "profiler/host_tracer.h"
#include "profiler/trace.h"

namespace xlens::runtime {
namespace {

using ::testing::ContainsRegex;

// Random arguments with every `stride`th element of argument `index` +0, -0, NaN, +inf or -inf
// in turn.
std::vector<Literal> ArgumentsWithSpecials(const std::string& text, int index, size_t stride) {
  std::vector<Literal> arguments = testing::RandomArguments(text);
  const float specials[] = {0.0f, -0.0f, std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()};
  std::span<float> data = arguments[index].data<float>();
  for (size_t i = 0; i < data.size(); i += stride) data[i] = specials[(i / stride) % 5];
  return arguments;
}

// Compiles `text`, expects its call `call` to run the kernel after it on each part (where it
// runs in parts) and no kernel of its own in the listing, and compares with the evaluator.
void ExpectEpilogueMatchesEvaluator(const std::string& text, const std::string& call,
                                    const std::vector<Literal>& arguments) {
  SCOPED_TRACE(text);
  auto exe = testing::CompileText(text);
  ASSERT_TRUE(exe.ok()) << exe.status().message();
  const std::string listing = (*exe)->ThunkSequenceText();
  if (ThreadPool::Default().parallelism() >= 2) {
    EXPECT_THAT(listing, ContainsRegex("oneDNN " + call + "; kernel [^;]*, then fusion[.0-9]* on each part's images"));
    EXPECT_EQ(("\n" + listing).find("\nkernel "), std::string::npos) << listing;
    // Its one kernel has no thunk of its own: the kernel list names the call that runs it.
    ASSERT_EQ((*exe)->kernels().size(), 1u);
    const KernelInfo& kernel = (*exe)->kernels()[0];
    EXPECT_THAT(listing, ::testing::StartsWith("library-call " + kernel.run_by_call + " ("));
    EXPECT_THAT(listing, ::testing::HasSubstr("then " + kernel.hlo_instruction + " on each part's images"));
    EXPECT_THAT(kernel.launch, ::testing::EndsWith(", on each part of " + kernel.run_by_call));
  }
  testing::ExpectMatchesEvaluator(text, arguments, {2e-5, 2e-5});
}

class PartEpilogueTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!OneDnnAvailable()) GTEST_SKIP() << "built without oneDNN (libdnnl-dev)";
  }
};

// The forward: the convolution's result is an output and feeds its ReLU, the other output.
TEST_F(PartEpilogueTest, ReluBesideItsPreActivation) {
  const std::string text = R"(HloModule relu_two_outputs
ENTRY e {
  x = f32[8,16,16,32] parameter(0)
  k = f32[3,3,32,32] parameter(1)
  c = f32[8,16,16,32] convolution(x, k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
  zero = f32[] constant(0)
  zeros = f32[8,16,16,32] broadcast(zero), dimensions={}
  r = f32[8,16,16,32] maximum(c, zeros)
  ROOT t = (f32[8,16,16,32], f32[8,16,16,32]) tuple(c, r)
}
)";
  // Sparse in the input, so that most windows stay finite and some outputs are NaN or infinite.
  ExpectEpilogueMatchesEvaluator(text, "convolution", ArgumentsWithSpecials(text, 0, 997));
}

// Traced, the kernel has a span of its own inside each part's span, on the thread that ran the
// part, over the part's images: the part's time less the kernel's is the library's. Every image
// falls in one kernel span a run.
TEST_F(PartEpilogueTest, TracedEpilogueIsASpanInsideItsPart) {
  if (ThreadPool::Default().parallelism() < 2) GTEST_SKIP() << "one thread: the call runs whole";
  const std::string text = R"(HloModule relu_two_outputs
ENTRY e {
  x = f32[8,16,16,32] parameter(0)
  k = f32[3,3,32,32] parameter(1)
  c = f32[8,16,16,32] convolution(x, k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
  zero = f32[] constant(0)
  zeros = f32[8,16,16,32] broadcast(zero), dimensions={}
  r = f32[8,16,16,32] maximum(c, zeros)
  ROOT t = (f32[8,16,16,32], f32[8,16,16,32]) tuple(c, r)
}
)";
  auto exe = testing::CompileText(text);
  ASSERT_TRUE(exe.ok()) << exe.status().message();
  ASSERT_EQ((*exe)->kernels().size(), 1u);
  const KernelInfo& kernel = (*exe)->kernels()[0];
  ASSERT_FALSE(kernel.run_by_call.empty()) << (*exe)->ThunkSequenceText();
  const std::vector<Literal> arguments = testing::RandomArguments(text);
  constexpr int kRuns = 3;
  ASSERT_TRUE(profiler::TracerSession::Start());
  for (int run = 0; run < kRuns; ++run) ASSERT_TRUE((*exe)->Execute(arguments).ok());
  const profiler::Trace trace = profiler::TracerSession::Stop();
  std::vector<const profiler::TraceEvent*> parts, epilogues;
  for (const profiler::TraceEvent& event : trace.events) {
    if (event.category != profiler::category::kLibraryPart) continue;
    (event.name.rfind(kernel.hlo_instruction + " on images ", 0) == 0 ? epilogues : parts).push_back(&event);
  }
  ASSERT_FALSE(parts.empty());
  ASSERT_EQ(epilogues.size(), parts.size()) << "one kernel span a part";
  std::vector<int> covered(8, 0);
  for (const profiler::TraceEvent* e : epilogues) {
    EXPECT_FALSE(profiler::IsKernelCategory(e->category));
    const profiler::TraceArg* first = profiler::FindArg(*e, "first_image");
    const profiler::TraceArg* images = profiler::FindArg(*e, "images");
    ASSERT_NE(first, nullptr);
    ASSERT_NE(images, nullptr);
    const int64_t from = std::get<int64_t>(first->value), count = std::get<int64_t>(images->value);
    ASSERT_GE(from, 0);
    ASSERT_GE(count, 1);
    ASSERT_LE(from + count, 8);
    EXPECT_EQ(e->name, kernel.hlo_instruction + " on images " + std::to_string(from) + ".." +
                           std::to_string(from + count - 1));
    for (int64_t i = from; i < from + count; ++i) ++covered[i];
    int inside = 0;
    for (const profiler::TraceEvent* p : parts) {
      inside += p->tid == e->tid && p->start_ns <= e->start_ns &&
                e->start_ns + e->duration_ns <= p->start_ns + p->duration_ns;
    }
    EXPECT_EQ(inside, 1) << e->name << " lies in " << inside << " part spans of its thread";
  }
  for (int i = 0; i < 8; ++i) EXPECT_EQ(covered[i], kRuns) << "image " << i;
}

// The backward: JAX's ReLU gradient (select(x == max(x, 0), 1, 0) / select(0 == max(x, 0), 2, 1))
// times the input gradient of a stride-2 convolution, in blocks of 3, 3 and 2 images on two
// threads. The pre-activation x is a parameter, so that its zeros, infinities and NaNs reach the
// mask as they are.
TEST_F(PartEpilogueTest, ReluGradientOnTheInputGradient) {
  const std::string text = R"(HloModule relu_gradient
ENTRY e {
  x = f32[8,28,28,32] parameter(0)
  dy = f32[8,14,14,32] parameter(1)
  k = f32[3,3,32,32] parameter(2)
  rk = f32[3,3,32,32] reverse(k), dimensions={0,1}
  dx = f32[8,28,28,32] convolution(dy, rk), window={size=3x3 pad=2_1x2_1 lhs_dilate=2x2}, dim_labels=b01f_01oi->b01f
  zero = f32[] constant(0)
  zeros = f32[8,28,28,32] broadcast(zero), dimensions={}
  one = f32[] constant(1)
  ones = f32[8,28,28,32] broadcast(one), dimensions={}
  two = f32[] constant(2)
  twos = f32[8,28,28,32] broadcast(two), dimensions={}
  r = f32[8,28,28,32] maximum(x, zeros)
  positive = pred[8,28,28,32] compare(x, r), direction=EQ
  numerator = f32[8,28,28,32] select(positive, ones, zeros)
  at_zero = pred[8,28,28,32] compare(zeros, r), direction=EQ
  denominator = f32[8,28,28,32] select(at_zero, twos, ones)
  mask = f32[8,28,28,32] divide(numerator, denominator)
  ROOT g = f32[8,28,28,32] multiply(dx, mask)
}
)";
  ExpectEpilogueMatchesEvaluator(text, "convolution_backward_data", ArgumentsWithSpecials(text, 0, 5));
}

// A training step's forward x.w + b, split in k because the weight gradient x^T g reads x
// transposed, keeps its pre-activation beside its ReLU: the ReLU runs in the loop that adds the
// partial products, on the rows each of its tasks summed (48 rows in tasks of 32 and 16), after
// the sum and the bias. On a partial product, or before the bias, its zeros would fall elsewhere;
// the bias is scaled to the product's spread so that they do.
TEST_F(PartEpilogueTest, ReluBesideThePreActivationOfAProductSplitInK) {
  const std::string text = R"(HloModule forward_split_in_k
ENTRY e {
  x = f32[48,2048] parameter(0)
  w = f32[2048,128] parameter(1)
  b = f32[128] parameter(2)
  g = f32[48,128] parameter(3)
  d = f32[48,128] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  bb = f32[48,128] broadcast(b), dimensions={1}
  s = f32[48,128] add(d, bb)
  zero = f32[] constant(0)
  zeros = f32[48,128] broadcast(zero), dimensions={}
  r = f32[48,128] maximum(s, zeros)
  gw = f32[2048,128] dot(x, g), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  ROOT t = (f32[48,128], f32[48,128], f32[2048,128]) tuple(s, r, gw)
}
)";
  std::vector<Literal> arguments = ArgumentsWithSpecials(text, 0, 9973);
  for (float& v : arguments[2].data<float>()) v *= 40;
  SCOPED_TRACE(text);
  auto exe = testing::CompileText(text);
  ASSERT_TRUE(exe.ok()) << exe.status().message();
  const std::string listing = (*exe)->ThunkSequenceText();
  if (ThreadPool::Default().parallelism() >= 2) {
    EXPECT_THAT(listing, ContainsRegex("split in k, then fusion[.0-9]* on each part's images"));
    EXPECT_EQ(("\n" + listing).find("\nkernel "), std::string::npos) << listing;
  }
  testing::ExpectMatchesEvaluator(text, std::move(arguments), {1e-4, 1e-4});
}

// Whether the kernel's tasks fall on image boundaries is read from its phase, not assumed of how
// the loops cut: a phase that publishes no runs (any emitter but the element loops), or runs that
// do not tile the result, is refused whatever its task count, which divides the images in each
// case here; one whose runs tile each image is taken.
TEST(PartEpilogueMakeTest, TheKernelsTasksFallOnImagesAsItsPhaseSays) {
  auto module = ParseHloModule(R"(HloModule m
relu {
  c = f32[4,2,2,8] parameter(0)
  zero = f32[] constant(0)
  zeros = f32[4,2,2,8] broadcast(zero), dimensions={}
  ROOT r = f32[4,2,2,8] maximum(c, zeros)
}
ENTRY e {
  x = f32[4,2,2,8] parameter(0)
  k = f32[3,3,8,8] parameter(1)
  c = f32[4,2,2,8] convolution(x, k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
  ROOT f = f32[4,2,2,8] fusion(c), kind=kLoop, calls=relu
}
)");
  ASSERT_TRUE(module.ok()) << module.status().message();
  const HloComputation& entry = *(*module)->entry_computation();
  const HloInstruction* call = nullptr;
  for (const HloInstruction* i : entry.instructions()) {
    if (i->opcode() == HloOpcode::kConvolution) call = i;
  }
  ASSERT_NE(call, nullptr);
  const HloInstruction& fusion = *entry.root_instruction();
  constexpr int64_t kImages = 4, kImageElements = 2 * 2 * 8;
  struct Case {
    const char* what;
    int64_t tasks, elements_per_task;
    bool taken;
  } cases[] = {
      {"runs of 16: two a image", 8, 16, true},
      {"runs of a whole image", 4, 32, true},
      {"no runs published", 8, 0, false},
      {"runs that cover half the result", 8, 8, false},
      {"runs over two images", 2, 64, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    codegen::KernelSpec spec;
    spec.name = "f";
    spec.phases.push_back({"f", c.tasks, 1});
    spec.phases[0].elements_per_task = c.elements_per_task;
    spec.operand_leaves = spec.output_leaves = 1;
    auto kernel = std::make_unique<KernelThunk>("f", spec, std::vector<KernelThunk::PhaseFn>{nullptr},
                                                std::vector<int64_t>{2}, std::vector<int64_t>{3});
    const auto epilogue = PartEpilogue::Make(*call, {0, 1}, 2, kImages, kImageElements, fusion, kernel);
    EXPECT_EQ(epilogue != nullptr, c.taken);
    EXPECT_EQ(kernel == nullptr, c.taken);  // taken only when an epilogue is made
  }
}

}  // namespace
}  // namespace xlens::runtime
