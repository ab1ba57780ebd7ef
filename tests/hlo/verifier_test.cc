#include "compiler/hlo/verifier.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "compiler/hlo/parser.h"
#include "compiler/support/file_io.h"

namespace xlens {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

std::unique_ptr<HloModule> Parse(const std::string& text) {
  StatusOr<std::unique_ptr<HloModule>> module = ParseHloModule(text, ParseOptions{.verify = false});
  EXPECT_TRUE(module.ok()) << module.status().message();
  return module.ok() ? std::move(module).value() : nullptr;
}

// Parses `text` (which must parse) and returns the verifier's verdict.
Status Verify(const std::string& text, const VerifierOptions& options = {}) {
  std::unique_ptr<HloModule> module = Parse(text);
  if (module == nullptr) return Error("the test module does not parse");
  return VerifyModule(*module, options);
}

void ExpectRejected(const std::string& text, const std::string& message) {
  Status status = Verify(text);
  EXPECT_FALSE(status.ok()) << text;
  EXPECT_THAT(status.message(), HasSubstr(message));
}

// Builds modules through the API, for what the parser refuses to produce.
class ModuleBuilder {
 public:
  ModuleBuilder() : module_(std::make_unique<HloModule>("m")) {
    entry_ = module_->AddComputation(std::make_unique<HloComputation>("main"), /*is_entry=*/true);
  }
  HloInstruction* Parameter(int64_t number, Shape shape, std::string name) {
    return Add(HloInstruction::CreateParameter(number, std::move(shape), std::move(name)));
  }
  HloInstruction* Unary(HloOpcode op, HloInstruction* operand, std::string name) {
    auto instruction = HloInstruction::CreateUnary(op, operand->shape(), operand);
    instruction->set_name(std::move(name));
    return Add(std::move(instruction));
  }
  HloInstruction* Add(std::unique_ptr<HloInstruction> instruction) {
    return entry_->AddInstruction(std::move(instruction), /*uniquify_name=*/false);
  }
  HloComputation* entry() { return entry_; }
  HloModule& module() { return *module_; }
  Status Verify(HloInstruction* root) {
    entry_->set_root_instruction(root);
    return VerifyModule(*module_);
  }

 private:
  std::unique_ptr<HloModule> module_;
  HloComputation* entry_;
};

Shape F32x2() { return Shape(PrimitiveType::F32, {2}); }

// --- Well-formed modules ------------------------------------------------------------------------

TEST(VerifierTest, AcceptsAWellFormedModule) {
  Status status = Verify(R"(
HloModule m, entry_computation_layout={(f32[2,3]{1,0}, s32[])->(f32[3]{0}, s32[])}

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

fused {
  x = f32[2,3] parameter(0)
  ROOT e = f32[2,3] exponential(x)
}

ENTRY main {
  p = f32[2,3]{1,0} parameter(0)
  n = s32[] parameter(1)
  f = f32[2,3]{0,1} fusion(p), kind=kLoop, calls=fused
  z = f32[] constant(0)
  r = f32[3]{0} reduce(f, z), dimensions={0}, to_apply=add
  ROOT t = (f32[3]{0}, s32[]) tuple(r, n)
}
)");
  EXPECT_TRUE(status.ok()) << status.message();
}

TEST(VerifierTest, OnlyGenericChecksForOpcodesWithoutShapeInference) {
  Status status = Verify(R"(
HloModule m

ENTRY main {
  x = f32[2,4,4,3] parameter(0)
  scale = f32[3] parameter(1)
  offset = f32[3] parameter(2)
  bn = (f32[2,4,4,3], f32[3], f32[3]) batch-norm-training(x, scale, offset),
      epsilon=0.001, feature_index=3
  y = f32[2,4,4,3] get-tuple-element(bn), index=0
  g = f32[4,4,4,3] all-gather(y), dimensions={0}, replica_groups={{0,1}}
  c = (f32[8], u32[]) custom-call(g), custom_call_target="Anything"
  ROOT r = f32[8] get-tuple-element(c), index=0
}
)");
  EXPECT_TRUE(status.ok()) << status.message();
}

// --- Shapes ---------------------------------------------------------------------------------

TEST(VerifierTest, ErrorNamesComputationInstructionAndOperands) {
  Status status = Verify(R"(
HloModule m

ENTRY main {
  p = f32[2,2] parameter(0)
  c = f32[2,5] parameter(1)
  ROOT add.1 = f32[2,2] add(p, c)
}
)");
  EXPECT_EQ(status.message(),
            "in %main, instruction %add.1 = f32[2,2] add(%p: f32[2,2], %c: f32[2,5]): operands "
            "must have the same dimensions");
}

TEST(VerifierTest, DeclaredShapeMustMatchInference) {
  ExpectRejected(R"(
HloModule m

ENTRY main {
  p = f32[2,3] parameter(0)
  ROOT t = f32[2,3] transpose(p), dimensions={1,0}
}
)",
                 "the declared shape f32[2,3] does not match the inferred f32[3,2]");
  ExpectRejected(R"(
HloModule m

ENTRY main {
  a = f32[4] parameter(0)
  ROOT n = s32[4] negate(a)
}
)",
                 "the declared shape s32[4] does not match the inferred f32[4]");
}

TEST(VerifierTest, DynamicBoundsAreComparedBySize) {
  EXPECT_TRUE(Verify(R"(
HloModule m

ENTRY main {
  a = f32[<=4,3] parameter(0)
  ROOT n = f32[4,3] negate(a)
}
)")
                  .ok());
  ExpectRejected(R"(
HloModule m

ENTRY main {
  a = f32[<=4,3] parameter(0)
  ROOT n = f32[<=5,3] negate(a)
}
)",
                 "does not match the inferred f32[<=4,3]");
}

TEST(VerifierTest, LayoutsMustBePermutationsOfTheRightRank) {
  ModuleBuilder b;
  Shape shape(PrimitiveType::F32, {2, 3});
  shape.set_layout(Layout{{0}, ""});
  HloInstruction* p = b.Parameter(0, shape, "p");
  Status status = b.Verify(p);
  EXPECT_THAT(status.message(),
              HasSubstr("layout {0} is not a permutation of the dimensions of f32[2,3]"));
}

TEST(VerifierTest, LayoutSensitiveRequiresLayouts) {
  ModuleBuilder b;
  HloInstruction* p = b.Parameter(0, Shape(PrimitiveType::F32, {2, 3}), "p");
  EXPECT_TRUE(b.Verify(p).ok());
  Status status = VerifyModule(b.module(), VerifierOptions{.layout_sensitive = true});
  EXPECT_THAT(status.message(), HasSubstr("shape f32[2,3] has no layout"));
  p->mutable_shape()->SetDefaultLayout();
  EXPECT_TRUE(VerifyModule(b.module(), VerifierOptions{.layout_sensitive = true}).ok());
}

// Element counts and byte sizes are computed without overflow checks everywhere after the
// verifier, so a shape whose size does not fit in int64 is refused here, by name.
TEST(VerifierTest, ShapesWhoseSizeOverflowsAreRefused) {
  ModuleBuilder b;
  HloInstruction* c =
      b.Add(HloInstruction::CreateConstant(Literal(Shape::Scalar(PrimitiveType::F32)), "c"));
  auto broadcast = std::make_unique<HloInstruction>(
      HloOpcode::kBroadcast, Shape(PrimitiveType::F32, {4294967296, 4294967296}), "b");
  broadcast->AppendOperand(c);
  broadcast->dimensions_attr = std::vector<int64_t>{};
  HloInstruction* root = b.Add(std::move(broadcast));
  Status status = b.Verify(root);
  EXPECT_THAT(status.message(), HasSubstr("%b = f32[4294967296,4294967296]"));
  EXPECT_THAT(status.message(),
              HasSubstr("has 18446744073709551616 elements: more than fit in 64 bits"));

  // 2^61 elements fit, their 2^63 bytes do not.
  root->set_shape(Shape(PrimitiveType::F32, {int64_t{1} << 61}));
  EXPECT_THAT(b.Verify(root).message(),
              HasSubstr("has 2305843009213693952 elements of 4 bytes: more bytes than fit"));
  // A zero-sized dimension does not excuse the others.
  root->set_shape(Shape(PrimitiveType::F32, {0, 4294967296, 4294967296}));
  EXPECT_THAT(b.Verify(root).message(), HasSubstr("its non-zero dimensions multiply to"));
  root->set_shape(Shape(PrimitiveType::F32, {int64_t{1} << 40}));
  EXPECT_THAT(b.Verify(root).message(), Not(HasSubstr("64 bits")));
}

TEST(VerifierTest, GetTupleElementIndexInRange) {
  ExpectRejected(R"(
HloModule m

ENTRY main {
  p = (f32[2], s32[]) parameter(0)
  ROOT g = s32[] get-tuple-element(p), index=5
}
)",
                 "index=5 is out of range for a tuple of 2 elements");
}

TEST(VerifierTest, EntryComputationLayoutMustMatchTheSignature) {
  ExpectRejected(R"(
HloModule m, entry_computation_layout={(f32[3]{0})->f32[3]{0}}

ENTRY main {
  ROOT p = f32[2] parameter(0)
}
)",
                 "entry_computation_layout gives parameter 0 the shape f32[3], but %p has f32[2]");
}

// --- Called computations -------------------------------------------------------------------------

TEST(VerifierTest, FusionParametersMustMatchOperands) {
  ExpectRejected(R"(
HloModule m

fused {
  x = f32[3] parameter(0)
  ROOT e = f32[3] exponential(x)
}

ENTRY main {
  p = f32[2] parameter(0)
  ROOT f = f32[3] fusion(p), kind=kLoop, calls=fused
}
)",
                 "parameter 0 of the fused computation %fused must have shape f32[2], but has "
                 "f32[3]");
}

TEST(VerifierTest, ReducersTakeScalars) {
  ExpectRejected(R"(
HloModule m

add_vec {
  a = f32[2] parameter(0)
  b = f32[2] parameter(1)
  ROOT s = f32[2] add(a, b)
}

ENTRY main {
  p = f32[2,3] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[3] reduce(p, z), dimensions={0}, to_apply=add_vec
}
)",
                 "parameter 0 of the reducer %add_vec must be f32[], not f32[2]");
}

TEST(VerifierTest, WindowsCoverAtLeastOneElement) {
  // XLA refuses a window with a non-positive dimension; a size of 0 would give every output the
  // init value without reading the operand.
  ExpectRejected(R"(
HloModule m

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  p = f32[8] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[9] reduce-window(p, z), window={size=0}, to_apply=add
}
)",
                 "window dimension 0 is malformed: size=0");
}

TEST(VerifierTest, WhileComputationsTakeTheLoopState) {
  ExpectRejected(R"(
HloModule m

cond {
  s = s32[] parameter(0)
  ROOT t = pred[] constant(true)
}

body {
  s = f32[] parameter(0)
  ROOT n = f32[] negate(s)
}

ENTRY main {
  p = s32[] parameter(0)
  ROOT w = s32[] while(p), condition=cond, body=body
}
)",
                 "parameter 0 of the while body %body must have shape s32[], but has f32[]");
}

// --- Structure ----------------------------------------------------------------------------------

TEST(VerifierTest, ParameterNumbersAreDenseAndUnique) {
  {
    ModuleBuilder b;
    b.Parameter(0, F32x2(), "a");
    HloInstruction* c = b.Parameter(2, F32x2(), "c");
    EXPECT_THAT(b.Verify(c).message(),
                HasSubstr("parameter number 2 is out of range: the computation has 2 parameters"));
  }
  {
    ModuleBuilder b;
    HloInstruction* a = b.Parameter(0, F32x2(), "a");
    b.Parameter(0, F32x2(), "a2");
    EXPECT_THAT(b.Verify(a).message(), HasSubstr("parameter number 0 is also used by %a"));
  }
}

TEST(VerifierTest, InstructionNamesAreUnique) {
  ModuleBuilder b;
  HloInstruction* p = b.Parameter(0, F32x2(), "x");
  HloInstruction* n = b.Unary(HloOpcode::kNegate, p, "x");
  EXPECT_THAT(b.Verify(n).message(), HasSubstr("in %main: two instructions are named %x"));
}

TEST(VerifierTest, OperandCountFollowsTheOpcode) {
  ModuleBuilder b;
  HloInstruction* p = b.Parameter(0, F32x2(), "p");
  auto add = std::make_unique<HloInstruction>(HloOpcode::kAdd, F32x2(), "add");
  add->AppendOperand(p);
  HloInstruction* root = b.Add(std::move(add));
  EXPECT_THAT(b.Verify(root).message(), HasSubstr("add takes 2 operand(s), but has 1"));

  // The same holds for opcodes without shape inference.
  ModuleBuilder c;
  HloInstruction* x = c.Parameter(0, F32x2(), "x");
  auto bn = std::make_unique<HloInstruction>(HloOpcode::kBatchNormTraining, F32x2(), "bn");
  bn->AppendOperand(x);
  HloInstruction* bn_root = c.Add(std::move(bn));
  EXPECT_THAT(c.Verify(bn_root).message(),
              HasSubstr("batch-norm-training takes 3 operand(s), but has 1"));
}

TEST(VerifierTest, OperandsBelongToTheSameComputation) {
  ModuleBuilder b;
  auto other = std::make_unique<HloComputation>("other");
  HloInstruction* foreign = other->AddInstruction(
      HloInstruction::CreateParameter(0, F32x2(), "foreign"), /*uniquify_name=*/false);
  other->set_root_instruction(foreign);
  b.module().AddComputation(std::move(other), /*is_entry=*/false);
  HloInstruction* n = b.Unary(HloOpcode::kNegate, foreign, "n");
  EXPECT_THAT(b.Verify(n).message(), HasSubstr("operand %foreign belongs to computation %other"));
}

TEST(VerifierTest, RejectsCycles) {
  ModuleBuilder b;
  HloInstruction* p = b.Parameter(0, F32x2(), "p");
  HloInstruction* a = b.Unary(HloOpcode::kNegate, p, "a");
  HloInstruction* c = b.Unary(HloOpcode::kNegate, a, "c");
  a->ReplaceOperandWith(0, c);
  EXPECT_THAT(b.Verify(c).message(), HasSubstr("the graph has a cycle"));

  ModuleBuilder d;
  HloInstruction* q = d.Parameter(0, F32x2(), "q");
  HloInstruction* x = d.Unary(HloOpcode::kNegate, q, "x");
  HloInstruction* y = d.Unary(HloOpcode::kNegate, x, "y");
  y->AddControlDependencyTo(x);
  EXPECT_THAT(d.Verify(y).message(), HasSubstr("the graph has a cycle"));
}

TEST(VerifierTest, RejectsRecursiveCalls) {
  ModuleBuilder b;
  HloInstruction* p = b.Parameter(0, F32x2(), "p");
  auto call = std::make_unique<HloInstruction>(HloOpcode::kCall, F32x2(), "call");
  call->AppendOperand(p);
  call->SetCalledComputation("to_apply", b.entry());
  HloInstruction* root = b.Add(std::move(call));
  EXPECT_THAT(b.Verify(root).message(), HasSubstr("computation %main calls itself"));
}

TEST(VerifierTest, ModuleNeedsAnEntryAndRoots) {
  HloModule empty("empty");
  EXPECT_THAT(VerifyModule(empty).message(), HasSubstr("module empty has no entry computation"));

  ModuleBuilder b;
  b.Parameter(0, F32x2(), "p");
  EXPECT_THAT(VerifyModule(b.module()).message(),
              HasSubstr("in %main: the computation has no root"));
}

TEST(VerifierTest, CalledComputationsBelongToTheModule) {
  ModuleBuilder b;
  HloComputation stray("stray");
  HloInstruction* p = b.Parameter(0, F32x2(), "p");
  auto call = std::make_unique<HloInstruction>(HloOpcode::kCall, F32x2(), "call");
  call->AppendOperand(p);
  call->SetCalledComputation("to_apply", &stray);
  HloInstruction* root = b.Add(std::move(call));
  EXPECT_THAT(b.Verify(root).message(),
              HasSubstr("to_apply= names a computation that is not in the module"));
}

// A long chain must neither overflow the stack nor take long.
TEST(VerifierTest, VerifiesAHundredThousandInstructionsQuickly) {
  ModuleBuilder b;
  HloInstruction* last = b.Parameter(0, Shape(PrimitiveType::F32, {16, 16}), "p");
  for (int i = 0; i < 100000; ++i) {
    last = b.Unary(i % 2 ? HloOpcode::kNegate : HloOpcode::kExp, last, fmt::format("op.{}", i));
  }
  const auto start = std::chrono::steady_clock::now();
  Status status = b.Verify(last);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(status.ok()) << status.message();
  EXPECT_LT(seconds, 1.0);
}

// --- Corpus ---------------------------------------------------------------------------------

const fs::path kCorpus = fs::path(XLENS_SHARED_DIR) / "corpus/hlo";

std::vector<fs::path> CorpusFiles() {
  std::vector<fs::path> files;
  for (const fs::path& dir : {kCorpus, kCorpus / "large"}) {
    if (!fs::is_directory(dir)) continue;
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (entry.path().extension() == ".hlo") files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

TEST(VerifierCorpusTest, EveryParsableModuleVerifies) {
  if (!fs::is_directory(kCorpus)) GTEST_SKIP() << "no HLO corpus at " << kCorpus;
  int verified = 0;
  for (const fs::path& file : CorpusFiles()) {
    // A parser coverage module: its unreferenced computations need not be well-formed.
    if (file.filename() == "opcode_zoo_hlo_import.hlo") continue;
    StatusOr<std::string> text = ReadFile(file.string());
    ASSERT_TRUE(text.ok()) << text.status().message();
    StatusOr<std::unique_ptr<HloModule>> module =
        ParseHloModule(*text, ParseOptions{.verify = false, .filename = file.string()});
    if (!module.ok()) continue;
    Status status = VerifyModule(**module);
    EXPECT_TRUE(status.ok()) << file.filename() << ": " << status.message();
    ++verified;
  }
  EXPECT_GT(verified, 0);
}

TEST(VerifierCorpusTest, ConcatDimsMismatchFailsWithXlaMessage) {
  const fs::path file = kCorpus / "invalid/concat_dims_mismatch_verifier.hlo";
  if (!fs::exists(file)) GTEST_SKIP() << "no HLO corpus at " << kCorpus;
  StatusOr<std::string> text = ReadFile(file.string());
  ASSERT_TRUE(text.ok()) << text.status().message();
  const std::string first_line = text->substr(0, text->find('\n'));
  const std::string prefix = "// expect error: ";
  ASSERT_EQ(first_line.rfind(prefix, 0), 0u) << first_line;
  const std::string expected = first_line.substr(prefix.size());
  Status status = Verify(*text);
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr(expected));
  EXPECT_THAT(status.message(), HasSubstr("%computation"));
  EXPECT_THAT(status.message(), HasSubstr("%cat.3"));
}

}  // namespace
}  // namespace xlens
