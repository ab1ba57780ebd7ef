// The stack-frame table of XLA's HLO text (FileNames, FunctionNames, FileLocations, StackFrames):
// read, printed back exactly, resolved for instructions, and hostile tables refused.
#include "compiler/hlo/stack_frames.h"

#include <chrono>
#include <sstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "compiler/hlo/parser.h"
#include "compiler/hlo/printer.h"
#include "test_util.h"

namespace xlens {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using xlens::testing::ReadTestFile;

// jaxlib 0.10.2's before_optimizations module of a small training step (train_step.py), as it
// wrote it; only the directory of the file name was cut.
std::string JaxTrainStep() {
  return ReadTestFile(std::string(XLENS_TESTDATA_DIR) + "/jax_train_step.hlo");
}

std::unique_ptr<HloModule> Parse(const std::string& text) {
  auto module = ParseHloModule(text, ParseOptions{.verify = true, .filename = "test.hlo"});
  EXPECT_TRUE(module.ok()) << module.status().message();
  return module.ok() ? std::move(module).value() : nullptr;
}

std::string ParseError(const std::string& text) {
  auto module = ParseHloModule(text, ParseOptions{.verify = true, .filename = "test.hlo"});
  EXPECT_FALSE(module.ok()) << "parsed, but should not have:\n" << text;
  return module.ok() ? "" : module.status().message();
}

const HloInstruction* Find(const HloModule& module, const std::string& name) {
  for (const HloComputation* c : module.computations()) {
    if (const HloInstruction* i = c->GetInstructionWithName(name)) return i;
  }
  return nullptr;
}

// The header and the table, up to the first computation.
std::string Head(const std::string& text) { return text.substr(0, text.find("\n%region")); }

TEST(StackFramesTest, JaxModulePrintsItsTableBackExactly) {
  const std::string text = JaxTrainStep();
  ASSERT_THAT(text, HasSubstr("\nStackFrames\n"));
  auto module = Parse(text);
  ASSERT_NE(module, nullptr);
  ASSERT_NE(module->stack_frames(), nullptr);
  EXPECT_EQ(module->stack_frames()->frame_count(), 10);
  const std::string printed = PrintModule(*module);
  // Byte for byte up to the computations (jaxlib writes operands without their shapes, which
  // xlens's long form adds), and a fixed point as a whole.
  EXPECT_EQ(Head(printed), Head(text));
  auto again = Parse(printed);
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(PrintModule(*again), printed);
  EXPECT_EQ(*again->stack_frames(), *module->stack_frames());
}

TEST(StackFramesTest, ShortFormDropsTheTableWithTheMetadata) {
  auto module = Parse(JaxTrainStep());
  ASSERT_NE(module, nullptr);
  std::string short_form = PrintModule(*module, PrintOptions{.short_form = true});
  EXPECT_THAT(short_form, Not(HasSubstr("FileNames")));
  EXPECT_THAT(short_form, Not(HasSubstr("stack_frame_id")));
  EXPECT_NE(Parse(short_form), nullptr);
}

TEST(StackFramesTest, SourceCommentsNameEachInstructionsLinesAndStillParse) {
  auto module = Parse(JaxTrainStep());
  ASSERT_NE(module, nullptr);
  const std::string commented = PrintModule(*module, PrintOptions{.source_comments = true});
  // Each instruction with a frame ends in its stack, innermost first; the others end as before.
  int64_t with_frames = 0, comments = 0;
  std::istringstream lines(commented);
  for (std::string line; std::getline(lines, line);) {
    const bool has_frame = line.find("stack_frame_id=") != std::string::npos;
    const bool has_comment = line.find("  // ") != std::string::npos;
    EXPECT_EQ(has_frame, has_comment) << line;
    with_frames += has_frame;
    comments += has_comment;
  }
  EXPECT_GT(with_frames, 0);
  EXPECT_EQ(comments, with_frames);
  EXPECT_THAT(commented, HasSubstr("train_step.py:"));
  // Comments are text HLO parsers skip: the module reads back to the uncommented print.
  auto again = Parse(commented);
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(PrintModule(*again), PrintModule(*module));
}

TEST(StackFramesTest, InstructionsResolveToFileLineFunctionAndCallers) {
  auto module = Parse(JaxTrainStep());
  ASSERT_NE(module, nullptr);
  // %tanh.1 carries stack_frame_id=5: predict's line 4, called from loss, from train_step.
  const HloInstruction* tanh = nullptr;
  for (const HloComputation* c : module->computations()) {
    for (const HloInstruction* i : c->instructions()) {
      if (i->opcode() == HloOpcode::kTanh) tanh = i;
    }
  }
  ASSERT_NE(tanh, nullptr);
  ASSERT_EQ(tanh->metadata.stack_frame_id, 5);
  std::optional<SourceFrame> source = InstructionSource(*tanh);
  ASSERT_TRUE(source.has_value());
  EXPECT_EQ(source->file, "train_step.py");
  EXPECT_EQ(source->function, "predict");
  EXPECT_EQ(source->line, 4);
  EXPECT_EQ(source->column, 9);
  EXPECT_EQ(source->ToString(), "train_step.py:4:9 (predict)");
  std::vector<SourceFrame> stack = InstructionStack(*tanh);
  ASSERT_EQ(stack.size(), 4u);
  EXPECT_EQ(stack[1].function, "loss");
  EXPECT_EQ(stack[1].line, 7);
  EXPECT_EQ(stack[2].function, "train_step");
  EXPECT_EQ(stack[3].function, "<module>");
  EXPECT_EQ(stack[3].line, 14);
}

TEST(StackFramesTest, OlderSourceFileMetadataStillResolves) {
  auto module = Parse(R"(HloModule m
ENTRY e {
  p = f32[2] parameter(0), metadata={op_name="p"}
  ROOT n = f32[2] negate(p), metadata={op_type="Neg" op_name="n" source_file="model.py" source_line=12}
})");
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(module->stack_frames(), nullptr);
  std::optional<SourceFrame> source = InstructionSource(*Find(*module, "n"));
  ASSERT_TRUE(source.has_value());
  EXPECT_EQ(source->Location(), "model.py:12");
  EXPECT_EQ(InstructionStack(*Find(*module, "n")).size(), 1u);
  EXPECT_FALSE(InstructionSource(*Find(*module, "p")).has_value());
}

TEST(StackFramesTest, TensorFlowsPlaceholderSourceIsNoSource) {
  // TensorFlow's auto-clustered modules say source_file="dummy_file_name" source_line=10 on every
  // instruction: no place in the user's program, so no source column, trace arg or comment.
  auto module = Parse(R"(HloModule m
ENTRY e {
  p = f32[2] parameter(0), metadata={op_name="p" source_file="dummy_file_name" source_line=10}
  ROOT n = f32[2] negate(p), metadata={op_type="Neg" op_name="n" source_file="dummy_file_name" source_line=10}
})");
  ASSERT_NE(module, nullptr);
  EXPECT_FALSE(InstructionSource(*Find(*module, "n")).has_value());
  EXPECT_TRUE(InstructionStack(*Find(*module, "n")).empty());
  EXPECT_TRUE(KernelStack(*Find(*module, "n")).empty());
  // The metadata itself is kept as written.
  EXPECT_THAT(module->ToString(), ::testing::HasSubstr(R"(source_file="dummy_file_name" source_line=10)"));
}

// A fusion without metadata of its own is credited with its first fused instruction that has a
// source; the trace, the per-HLO profile and the manifest all use this rule.
TEST(StackFramesTest, KernelStackOfAFusionIsItsFirstFusedSource) {
  auto module = Parse(R"(HloModule m

FileNames
1 "model.py"

FunctionNames
1 "<module>"
2 "layer"

FileLocations
1 {file_name_id=1 function_name_id=1 line=30 end_line=30 column=0 end_column=9}
2 {file_name_id=1 function_name_id=2 line=8 end_line=8 column=4 end_column=20}

StackFrames
1 {file_location_id=1 parent_frame_id=1}
2 {file_location_id=2 parent_frame_id=2}


fused {
  a = f32[2] parameter(0)
  n = f32[2] negate(a)
  ROOT e = f32[2] exponential(n), metadata={op_name="layer/exp" stack_frame_id=2}
}

ENTRY e {
  p = f32[2] parameter(0)
  ROOT f = f32[2] fusion(p), kind=kLoop, calls=fused
})");
  ASSERT_NE(module, nullptr);
  const HloInstruction& fusion = *Find(*module, "f");
  EXPECT_TRUE(InstructionStack(fusion).empty());
  std::vector<SourceFrame> stack = KernelStack(fusion);
  ASSERT_EQ(stack.size(), 2u);
  EXPECT_EQ(StackSourceLine(stack), "model.py:8");
  EXPECT_EQ(StackText(stack), "model.py:8:4 (layer); model.py:30 (<module>)");
  EXPECT_TRUE(KernelStack(*Find(*module, "p")).empty());
  EXPECT_EQ(StackSourceLine({}), "");
}

TEST(StackFramesTest, StackFrameIdIsPrintedLastInMetadata) {
  OpMetadata metadata;
  metadata.op_name = "x";
  metadata.other.push_back({"source_column", "5"});
  metadata.stack_frame_id = 3;
  EXPECT_EQ(metadata.ToString(), "op_name=\"x\" source_column=5 stack_frame_id=3");
}

TEST(StackFramesTest, CreateRefusesCyclesAndDanglingIds) {
  auto cycle = StackFrameTable::Create({"a.py"}, {"f"}, {{1, 1, 1, 1, 0, 0}},
                                       {{1, 2}, {1, 1}});
  ASSERT_FALSE(cycle.ok());
  EXPECT_THAT(cycle.status().message(), HasSubstr("cycle"));
  auto dangling = StackFrameTable::Create({"a.py"}, {"f"}, {{1, 2, 1, 1, 0, 0}}, {{1, 0}});
  ASSERT_FALSE(dangling.ok());
  EXPECT_THAT(dangling.status().message(), HasSubstr("function_name_id=2"));
  auto good = StackFrameTable::Create({"a.py"}, {"f", "g"}, {{1, 1, 3, 3, 0, 0}, {1, 2, 8, 8, 2, 5}},
                                      {{1, 0}, {2, 1}});
  ASSERT_TRUE(good.ok()) << good.status().message();
  EXPECT_EQ(good->Stack(2).size(), 2u);
  EXPECT_TRUE(good->Stack(0).empty());
  EXPECT_TRUE(good->Stack(3).empty());
  EXPECT_THAT(good->ToString(), HasSubstr("2 {file_location_id=2 parent_frame_id=2}\n"));
  EXPECT_THAT(good->ToString(), HasSubstr("1 {file_location_id=1 parent_frame_id=1}\n"));
}

TEST(StackFramesTest, HostileTablesGiveOneLocatedError) {
  const std::string table = R"(HloModule m

FileNames
1 "a.py"

FunctionNames
1 "f"

FileLocations
1 {file_name_id=1 function_name_id=1 line=3 end_line=3 column=2 end_column=5}

StackFrames
1 {file_location_id=1 parent_frame_id=1}
2 {file_location_id=1 parent_frame_id=2}

ENTRY e {
  ROOT p = f32[2] parameter(0), metadata={op_name="p" stack_frame_id=2}
})";
  ASSERT_NE(Parse(table), nullptr);
  auto replace = [&](const std::string& from, const std::string& to) {
    std::string text = table;
    text.replace(text.find(from), from.size(), to);
    return text;
  };
  // Frame 2 is its own parent (written plus one).
  std::string error = ParseError(replace("2 {file_location_id=1 parent_frame_id=2}",
                                         "2 {file_location_id=1 parent_frame_id=3}"));
  EXPECT_THAT(error, HasSubstr("test.hlo:14:1: StackFrames entry 2"));
  EXPECT_THAT(error, HasSubstr("cycle"));
  error = ParseError(replace("stack_frame_id=2", "stack_frame_id=3"));
  EXPECT_THAT(error, HasSubstr("test.hlo:17:"));
  EXPECT_THAT(error, HasSubstr("stack_frame_id=3 names no frame"));
  error = ParseError(replace("stack_frame_id=2", "stack_frame_id=-1"));
  EXPECT_THAT(error, HasSubstr("must not be negative"));
  error = ParseError(replace("2 {file_location_id=1", "1 {file_location_id=1"));
  EXPECT_THAT(error, HasSubstr("StackFrames entry 2 is numbered 1"));
  error = ParseError(replace("line=3 end_line", "line=3 line=4 end_line"));
  EXPECT_THAT(error, HasSubstr("line is given twice"));
  error = ParseError(replace("line=3 end_line", "line=99999999999999999999 end_line"));
  EXPECT_THAT(error, HasSubstr("out of range"));
  error = ParseError(replace("column=2", "colour=2"));
  EXPECT_THAT(error, HasSubstr("expected one of"));
}

TEST(StackFramesTest, LongParentChainsAndLongCyclesEndQuickly) {
  // 100k frames in one chain; then the same chain closed into a cycle at its outermost frame.
  constexpr int kFrames = 100000;
  auto make = [&](bool cycle) {
    std::string text = "HloModule m\n\nFileNames\n1 \"a.py\"\n\nFunctionNames\n1 \"f\"\n\n"
                       "FileLocations\n1 {file_name_id=1 function_name_id=1 line=1 end_line=1 "
                       "column=0 end_column=1}\n\nStackFrames\n";
    for (int i = 1; i <= kFrames; ++i) {
      int parent = i == 1 ? (cycle ? kFrames : 0) : i - 1;
      text += std::to_string(i) + " {file_location_id=1 parent_frame_id=" +
              std::to_string(parent + 1) + "}\n";
    }
    text += "\nENTRY e {\n  ROOT p = f32[2] parameter(0), metadata={stack_frame_id=" +
            std::to_string(kFrames) + "}\n}\n";
    return text;
  };
  auto start = std::chrono::steady_clock::now();
  auto module = Parse(make(false));
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(InstructionStack(*module->entry_computation()->root_instruction()).size(),
            static_cast<size_t>(kFrames));
  EXPECT_THAT(ParseError(make(true)), HasSubstr("cycle"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

}  // namespace
}  // namespace xlens
