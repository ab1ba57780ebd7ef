#include "dump/dump_names.h"

#include <gtest/gtest.h>

namespace xlens {
namespace {

TEST(DumpNamesTest, WholeModuleNamesAreXlas) {
  EXPECT_EQ(DumpFileName(1, "cluster_0", "", std::string(kBeforeOptimizations) + ".txt"),
            "module_0001.cluster_0.before_optimizations.txt");
  EXPECT_EQ(DumpFileName(12, "m", "", CpuAfterOptimizationsName()),
            "module_0012.m.cpu_after_optimizations");
  EXPECT_EQ(DumpFileName(3, "jit_f", "", GpuAfterOptimizationsName(9, 0) + ".txt"),
            "module_0003.jit_f.sm_9.0_gpu_after_optimizations.txt");
  EXPECT_EQ(DumpFileName(3, "jit_f", "", BufferAssignmentSuffix(CpuAfterOptimizationsName())),
            "module_0003.jit_f.cpu_after_optimizations-buffer-assignment.txt");
  EXPECT_EQ(DumpFileName(12345, "m", "", "txt"), "module_12345.m.txt");
}

TEST(DumpNamesTest, CodegenFileNames) {
  EXPECT_EQ(DumpFileName(1, "m", "", LlvmIrSuffix(false)), "module_0001.m.ir-no-opt.ll");
  EXPECT_EQ(DumpFileName(1, "m", "", LlvmIrSuffix(true)), "module_0001.m.ir-with-opt.ll");
  EXPECT_EQ(LlvmIrSuffix(true, "fusion_1"), "ir-with-opt.fusion_1.ll");
  EXPECT_EQ(DumpFileName(1, "m", "", kPtxSuffix), "module_0001.m.ptx");
  EXPECT_EQ(DumpFileName(1, "m", "", kThunkSequenceSuffix), "module_0001.m.thunk_sequence.txt");
}

TEST(DumpNamesTest, PassBoundaryNames) {
  EXPECT_EQ(PassBoundaryName(4, "simplification", "algebraic-simplifier", "cse"),
            "0004.simplification.after_algebraic-simplifier.before_cse");
  EXPECT_EQ(DumpFileName(1, "m", "", PassBoundaryName(0, "opt", kPipelineStart, "dce")) + ".txt",
            "module_0001.m.0000.opt.after_pipeline-start.before_dce.txt");
  EXPECT_EQ(PassBoundaryName(17, "opt", "fusion", kPipelineEnd),
            "0017.opt.after_fusion.before_pipeline-end");
}

TEST(DumpNamesTest, TimestampComesFirst) {
  EXPECT_EQ(TimestampPrefix(1700000000123456), "1700000000123456");
  EXPECT_EQ(DumpFileName(2, "m", TimestampPrefix(1700000000123456), "before_optimizations"),
            "1700000000123456.module_0002.m.before_optimizations");
}

TEST(DumpNamesTest, ModuleNameIsDroppedPast255Characters) {
  // "module_0001." + name + ".txt" is 16 + name characters.
  std::string fits(239, 'a');
  EXPECT_EQ(DumpFileName(1, fits, "", "txt").size(), 255u);
  EXPECT_EQ(DumpFileName(1, fits, "", "txt"), "module_0001." + fits + ".txt");
  std::string too_long(240, 'a');
  EXPECT_EQ(DumpFileName(1, too_long, "", "txt"), "module_0001.txt");
  // The timestamp counts toward the limit.
  EXPECT_EQ(DumpFileName(1, fits, "1700000000123456", "txt"), "1700000000123456.module_0001.txt");
}

TEST(DumpNamesTest, NamesAreSanitizedAsXlaDoes) {
  EXPECT_EQ(DumpFileName(1, "a/b [c]", "", "0001.my pipe.after_x.before_y"),
            "module_0001.a_b__c_.0001.my_pipe.after_x.before_y");
  EXPECT_EQ(SanitizeFileName("x\\y"), "x_y");
}

TEST(DumpNamesTest, ModuleIdFromFileName) {
  EXPECT_EQ(ModuleIdFromFileName("module_0012.foo.before_optimizations.txt"), 12);
  EXPECT_EQ(ModuleIdFromFileName("1700000000123456.module_0003.foo.txt"), 3);
  EXPECT_EQ(ModuleIdFromFileName("module_12345.txt"), 12345);
  EXPECT_EQ(ModuleIdFromFileName("module_12.foo.txt"), -1);
  EXPECT_EQ(ModuleIdFromFileName("manifest.json"), -1);
  EXPECT_EQ(ModuleIdFromFileName("x.module_0001.foo.txt"), -1);
  EXPECT_EQ(ModuleIdFromFileName("module_0001"), -1);
}

}  // namespace
}  // namespace xlens
