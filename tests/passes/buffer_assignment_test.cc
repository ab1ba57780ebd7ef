#include "compiler/passes/buffer_assignment.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "compiler/passes/copy_insertion.h"
#include "compiler/passes/layout_assignment.h"
#include "pass_test_util.h"

namespace xlens {
namespace {

using xlens::testing::CloneModule;
using xlens::testing::ParseModuleOrDie;
using xlens::testing::RunPassChecked;
using xlens::testing::SameResults;

using Kind = BufferAllocation::Kind;

const HloInstruction* Find(const HloModule& module, std::string_view name) {
  return module.entry_computation()->GetInstructionWithName(name);
}

BufferAssignment AssignOrDie(const HloModule& module, BufferAssignmentOptions options = {}) {
  auto assignment = AssignBuffers(module, options);
  EXPECT_TRUE(assignment.ok()) << assignment.status().message();
  return std::move(assignment).value();
}

// Whether `later` writes into the buffer of `earlier` in place: it is defined where `earlier`
// dies and reads it.
bool InPlaceHandoff(const LogicalBuffer& earlier, const LogicalBuffer& later) {
  if (earlier.end != later.start || earlier.is_scratch || later.is_scratch) return false;
  // The operands, seen through the instructions that only forward buffers.
  std::vector<const HloInstruction*> stack(later.instruction->operands().begin(),
                                           later.instruction->operands().end());
  while (!stack.empty()) {
    const HloInstruction* op = stack.back();
    stack.pop_back();
    if (op == earlier.instruction) return true;
    if (op->opcode() == HloOpcode::kGetTupleElement || op->opcode() == HloOpcode::kBitcast ||
        op->opcode() == HloOpcode::kTuple) {
      stack.insert(stack.end(), op->operands().begin(), op->operands().end());
    }
  }
  return false;
}

// Buffers that share bytes of one allocation are never live at the same time (except the in-place
// hand-off from an operand to its user), and the totals are consistent.
void CheckInvariants(const BufferAssignment& a) {
  EXPECT_LE(a.peak_live_bytes(), a.sum_of_buffer_sizes());
  int64_t total = 0;
  for (const BufferAllocation& alloc : a.allocations()) {
    total += alloc.size;
    for (const auto& v : alloc.assigned) EXPECT_LE(v.offset + v.size, alloc.size);
    if (alloc.kind != Kind::kTemp) continue;
    for (size_t i = 0; i < alloc.assigned.size(); ++i) {
      for (size_t j = i + 1; j < alloc.assigned.size(); ++j) {
        const auto& x = alloc.assigned[i];
        const auto& y = alloc.assigned[j];
        if (x.size == 0 || y.size == 0) continue;
        if (x.offset >= y.offset + y.size || y.offset >= x.offset + x.size) continue;
        const LogicalBuffer& bx = a.buffers()[x.buffer];
        const LogicalBuffer& by = a.buffers()[y.buffer];
        bool disjoint = bx.end < by.start || by.end < bx.start;
        EXPECT_TRUE(disjoint || InPlaceHandoff(bx, by) || InPlaceHandoff(by, bx))
            << bx.ToShortString() << " [" << bx.start << "," << bx.end << "] and "
            << by.ToShortString() << " [" << by.start << "," << by.end << "] share bytes";
      }
    }
  }
  EXPECT_EQ(total, a.total_allocated_bytes());
}

constexpr const char* kChain = R"(HloModule chain
ENTRY e {
  p = f32[1024] parameter(0)
  a = f32[1024] exponential(p)
  b = f32[1024] negate(a)
  c = f32[1024] abs(b)
  ROOT d = f32[1024] sqrt(c)
})";

TEST(BufferAssignmentTest, ElementwiseChainReusesTempSpace) {
  auto module = ParseModuleOrDie(kChain);
  ASSERT_NE(module, nullptr);
  BufferAssignment no_reuse = AssignOrDie(*module, {.alignment = 64, .allow_in_place = false});
  CheckInvariants(no_reuse);
  EXPECT_EQ(no_reuse.sum_of_buffer_sizes(), 5 * 4096);
  // a, b, c are temps; at most two are live at once (an operand and its user's result).
  EXPECT_EQ(no_reuse.peak_temp_bytes(), 2 * 4096);
  EXPECT_EQ(no_reuse.peak_live_bytes(), 3 * 4096);  // the parameter, an operand and its result

  BufferAssignment in_place = AssignOrDie(*module);
  CheckInvariants(in_place);
  EXPECT_LE(in_place.peak_temp_bytes(), 4096);
  EXPECT_LE(in_place.peak_live_bytes(), 2 * 4096);  // the parameter and one buffer
  auto a = in_place.GetSlice(*Find(*module, "a"));
  auto d = in_place.GetSlice(*Find(*module, "d"));
  ASSERT_TRUE(a.ok() && d.ok());
  EXPECT_EQ(a->allocation, d->allocation);  // every step writes where its operand was
}

TEST(BufferAssignmentTest, ParametersConstantsAndOutputsHaveTheirOwnAllocations) {
  auto module = ParseModuleOrDie(R"(HloModule m
ENTRY e {
  p = f32[1024] parameter(0)
  k = f32[1024] broadcast(f32[] constant(2)), dimensions={}
  a = f32[1024] multiply(p, k)
  b = f32[1024] exponential(a)
  ROOT t = (f32[1024], f32[1024]) tuple(b, a)
})");
  ASSERT_NE(module, nullptr);
  // Without in-place reuse: a would otherwise take over k's dying buffer as its output.
  BufferAssignment assignment = AssignOrDie(*module, {.alignment = 64, .allow_in_place = false});
  CheckInvariants(assignment);
  auto kind_of = [&](std::string_view name) {
    auto slice = assignment.GetSlice(*Find(*module, name));
    EXPECT_TRUE(slice.ok()) << name;
    return assignment.allocations()[slice->allocation].kind;
  };
  EXPECT_EQ(kind_of("p"), Kind::kParameter);
  EXPECT_EQ(kind_of("a"), Kind::kOutput);
  EXPECT_EQ(kind_of("b"), Kind::kOutput);
  EXPECT_EQ(kind_of("k"), Kind::kTemp);
  auto b = assignment.GetSlice(*Find(*module, "t"), {0});
  auto a = assignment.GetSlice(*Find(*module, "t"), {1});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->allocation, b->allocation);
  int constants = 0;
  for (const BufferAllocation& alloc : assignment.allocations()) {
    constants += alloc.kind == Kind::kConstant;
    if (alloc.kind == Kind::kParameter) {
      ASSERT_EQ(alloc.assigned.size(), 1u);
      EXPECT_FALSE(alloc.maybe_live_out);
    }
  }
  EXPECT_EQ(constants, 1);
}

TEST(BufferAssignmentTest, InPlaceOnlyWhereTheOperandDies) {
  auto module = ParseModuleOrDie(R"(HloModule m
ENTRY e {
  p = f32[1024] parameter(0)
  a = f32[1024] exponential(p)
  b = f32[1024] negate(a)
  c = f32[1024] add(a, b)
  d = f32[1024] abs(c)
  ROOT r = f32[1024] multiply(d, d)
})");
  ASSERT_NE(module, nullptr);
  BufferAssignment assignment = AssignOrDie(*module);
  CheckInvariants(assignment);
  auto slice = [&](std::string_view name) { return *assignment.GetSlice(*Find(*module, name)); };
  auto same = [](const BufferSlice& x, const BufferSlice& y) {
    return x.allocation == y.allocation && x.offset == y.offset;
  };
  EXPECT_FALSE(same(slice("a"), slice("p")));  // never into a parameter
  EXPECT_FALSE(same(slice("b"), slice("a")));  // a is still read by c
  EXPECT_TRUE(same(slice("c"), slice("a")) || same(slice("c"), slice("b")));  // both die at c
  EXPECT_TRUE(same(slice("d"), slice("c")));
}

TEST(BufferAssignmentTest, ARowFusionWritesOverTheScoresItNormalizes) {
  // Softmax over scores that a product computed (a temporary dying at the softmax): with
  // in_place_row_fusions (the CPU's), the softmax writes over them; a fusion whose root reads
  // its reduction directly (broadcast(max(x))), whose element i needs all of the row after
  // element 0 is written, and a loop of the other backends keep their own buffers.
  auto module = ParseModuleOrDie(R"(HloModule m
max { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT r = f32[] maximum(a, b) }
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT r = f32[] add(a, b) }
softmax {
  x = f32[64,128] parameter(0)
  lo = f32[] constant(-inf)
  m = f32[64] reduce(x, lo), dimensions={1}, to_apply=max
  mb = f32[64,128] broadcast(m), dimensions={0}
  d = f32[64,128] subtract(x, mb)
  e = f32[64,128] exponential(d)
  z = f32[] constant(0)
  s = f32[64] reduce(e, z), dimensions={1}, to_apply=add
  sb = f32[64,128] broadcast(s), dimensions={0}
  ROOT o = f32[64,128] divide(e, sb)
}
spread {
  x = f32[64,128] parameter(0)
  lo = f32[] constant(-inf)
  m = f32[64] reduce(x, lo), dimensions={1}, to_apply=max
  ROOT mb = f32[64,128] broadcast(m), dimensions={0}
}
ENTRY e {
  p = f32[64,128] parameter(0)
  q = f32[64,128] exponential(p)
  f = f32[64,128] fusion(q), kind=kInput, calls=softmax
  g = f32[64,128] negate(f)
  h = f32[64,128] fusion(g), kind=kInput, calls=spread
  ROOT r = f32[64,128] add(h, h)
})");
  ASSERT_NE(module, nullptr);
  auto same = [](const BufferSlice& x, const BufferSlice& y) {
    return x.allocation == y.allocation && x.offset == y.offset;
  };
  BufferAssignmentOptions cpu;
  cpu.in_place_row_fusions = true;
  for (bool rows : {true, false}) {
    BufferAssignment assignment = AssignOrDie(*module, rows ? cpu : BufferAssignmentOptions{});
    CheckInvariants(assignment);
    auto slice = [&](std::string_view name) { return *assignment.GetSlice(*Find(*module, name)); };
    EXPECT_EQ(same(slice("f"), slice("q")), rows);
    EXPECT_FALSE(same(slice("h"), slice("g")));
  }
}

TEST(BufferAssignmentTest, ValueUsedLateStaysLive) {
  auto module = ParseModuleOrDie(R"(HloModule m
ENTRY e {
  p = f32[1024] parameter(0)
  a = f32[1024] exponential(p)
  b = f32[1024] negate(a)
  c = f32[1024] abs(b)
  d = f32[1024] sqrt(c)
  ROOT e = f32[1024] add(d, a)
})");
  ASSERT_NE(module, nullptr);
  BufferAssignment assignment = AssignOrDie(*module, {.alignment = 64, .allow_in_place = false});
  CheckInvariants(assignment);
  const LogicalBuffer* a = nullptr;
  for (const LogicalBuffer& b : assignment.buffers()) {
    if (b.instruction->name() == "a") a = &b;
  }
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->end, static_cast<int64_t>(assignment.schedule().size()) - 1);
  // a overlaps b, c, d in time, so it may share bytes with none of them.
  auto sa = *assignment.GetSlice(*Find(*module, "a"));
  for (const char* name : {"b", "c", "d"}) {
    auto s = *assignment.GetSlice(*Find(*module, name));
    EXPECT_TRUE(s.allocation != sa.allocation || s.offset >= sa.offset + sa.size ||
                sa.offset >= s.offset + s.size)
        << name;
  }
  EXPECT_EQ(assignment.peak_temp_bytes(), 3 * 4096);
}

TEST(BufferAssignmentTest, ReportReadsLikeXla) {
  auto module = ParseModuleOrDie(kChain);
  ASSERT_NE(module, nullptr);
  BufferAssignment assignment = AssignOrDie(*module, {.alignment = 64, .allow_in_place = false});
  std::string report = assignment.ToString();
  EXPECT_NE(report.find("allocation 0: size 4096, parameter 0, shape |f32[1024]| at ShapeIndex {}:\n"
                        " value: <0 p @0> (size=4096,offset=0): f32[1024]{0}\n"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("allocation 1: size 4096, output shape is |f32[1024]|, maybe-live-out:"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("allocation 2: size 8192, preallocated-temp:"), std::string::npos) << report;
  EXPECT_NE(report.find("Total bytes used: 16384 (16.00KiB)"), std::string::npos) << report;
  EXPECT_NE(report.find("Peak temp bytes: 8192 (8.00KiB)"), std::string::npos) << report;
}

TEST(BufferAssignmentTest, AlignmentRoundsTempOffsets) {
  auto module = ParseModuleOrDie(R"(HloModule m
ENTRY e {
  p = f32[3] parameter(0)
  a = f32[3] exponential(p)
  b = f32[5] concatenate(a, f32[2] constant({1, 2})), dimensions={0}
  c = f32[3] slice(b), slice={[0:3]}
  ROOT r = f32[3] add(c, a)
})");
  ASSERT_NE(module, nullptr);
  BufferAssignment assignment = AssignOrDie(*module);
  CheckInvariants(assignment);
  for (const BufferAllocation& alloc : assignment.allocations()) {
    if (alloc.kind != Kind::kTemp) continue;
    for (const auto& v : alloc.assigned) EXPECT_EQ(v.offset % 64, 0);
  }
}

TEST(BufferAssignmentTest, WhileGetsScratchForItsBody) {
  auto module = ParseModuleOrDie(R"(HloModule m
body {
  s = (s32[], f32[256]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  v = f32[256] get-tuple-element(s), index=1
  i1 = s32[] add(i, s32[] constant(1))
  t1 = f32[256] exponential(v)
  t2 = f32[256] reverse(t1), dimensions={0}
  ROOT t = (s32[], f32[256]) tuple(i1, t2)
}
cond {
  s = (s32[], f32[256]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  ROOT lt = pred[] compare(i, s32[] constant(3)), direction=LT
}
ENTRY e {
  p = f32[256] parameter(0)
  n = f32[256] negate(p)
  init = (s32[], f32[256]) tuple(s32[] constant(0), n)
  w = (s32[], f32[256]) while(init), condition=cond, body=body
  ROOT r = f32[256] get-tuple-element(w), index=1
})");
  ASSERT_NE(module, nullptr);
  CopyInsertion copies;
  ASSERT_TRUE(RunPassChecked(copies, *module).ok());
  BufferAssignment assignment = AssignOrDie(*module);
  CheckInvariants(assignment);
  bool scratch = false;
  for (const LogicalBuffer& b : assignment.buffers()) {
    if (b.is_scratch) {
      scratch = true;
      EXPECT_EQ(b.instruction->opcode(), HloOpcode::kWhile);
      // t1 (t2 is the loop state), and perhaps the constant beside it.
      EXPECT_GE(b.size, 1024);
      EXPECT_LE(b.size, 1024 + 64);
    }
  }
  EXPECT_TRUE(scratch);
  // The loop state is the init's buffer: n is written once and updated in place.
  auto n = *assignment.GetSlice(*Find(*module, "n"));
  auto r = *assignment.GetSlice(*Find(*module, "r"));
  EXPECT_EQ(n.allocation, r.allocation);
  EXPECT_EQ(assignment.allocations()[r.allocation].kind, Kind::kOutput);
}

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

TEST(BufferAssignmentTest, MlpTrainStepPeakIsWellBelowTheSumOfBuffers) {
  const std::string text = ReadFile(std::string(XLENS_TESTDATA_DIR) + "/mlp_train_step.hlo");
  auto module = ParseModuleOrDie(text);
  ASSERT_NE(module, nullptr);
  auto before = CloneModule(*module);
  LayoutAssignment layout;
  CopyInsertion copies;
  ASSERT_TRUE(RunPassChecked(layout, *module).ok());
  ASSERT_TRUE(RunPassChecked(copies, *module).ok());
  EXPECT_TRUE(VerifyModule(*module, VerifierOptions{.layout_sensitive = true}).ok());
  EXPECT_TRUE(SameResults(*before, *module));
  BufferAssignment assignment = AssignOrDie(*module);
  CheckInvariants(assignment);
  BufferAssignment no_reuse = AssignOrDie(*module, {.alignment = 64, .allow_in_place = false});
  CheckInvariants(no_reuse);
  std::cout << "mlp_train_step: sum of all buffers " << assignment.sum_of_buffer_sizes()
            << " B, peak live " << assignment.peak_live_bytes() << " B (in-place off: "
            << no_reuse.peak_live_bytes() << " B), temp allocation "
            << assignment.peak_temp_bytes() << " B, total allocated "
            << assignment.total_allocated_bytes() << " B\n";
  EXPECT_LT(assignment.peak_live_bytes() * 2, assignment.sum_of_buffer_sizes());
  EXPECT_LE(assignment.peak_live_bytes(), no_reuse.peak_live_bytes());
  EXPECT_LT(assignment.total_allocated_bytes(), assignment.sum_of_buffer_sizes());
}

TEST(BufferAssignmentTest, EveryCorpusModuleIsAssigned) {
  const std::filesystem::path dir = std::filesystem::path(XLENS_SHARED_DIR) / "corpus/hlo";
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << "no corpus at " << dir;
  int assigned = 0;
  for (const auto& sub : {dir, dir / "large"}) {
    for (const auto& entry : std::filesystem::directory_iterator(sub)) {
      if (entry.path().extension() != ".hlo") continue;
      SCOPED_TRACE(entry.path().filename().string());
      auto parsed = ParseHloModule(ReadFile(entry.path()), ParseOptions{.verify = true});
      if (!parsed.ok()) continue;  // modules the verifier rejects test nothing here
      HloModule& module = **parsed;
      CopyInsertion copies;
      auto copied = copies.Run(module);
      ASSERT_TRUE(copied.ok()) << copied.status().message();
      EXPECT_TRUE(VerifyModule(module).ok());
      BufferAssignment assignment = AssignOrDie(module);
      CheckInvariants(assignment);
      EXPECT_FALSE(assignment.ToString().empty());
      ++assigned;
    }
  }
  EXPECT_GE(assigned, 60);
}

}  // namespace
}  // namespace xlens
