#include "profiler/trace_hlo_profile.h"

#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "compiler/support/file_io.h"
#include "compiler/support/temporary_directory.h"
#include "profiler/chrome_trace_writer.h"

namespace xlens::profiler {
namespace {

using ::testing::HasSubstr;

TraceEvent Kernel(const std::string& name, const std::string& category, int64_t start, int64_t duration,
                  std::vector<TraceArg> args) {
  return {name, category, kHostPid, 1, start, duration, std::move(args)};
}

TEST(TraceHloProfile, GroupsKernelEventsByModuleAndInstruction) {
  auto dir = TemporaryDirectory::Create("trace-hlo-profile");
  ASSERT_TRUE(dir.ok()) << dir.status().message();
  Trace trace;
  trace.events = {
      Kernel("execute m", "execute", 0, 100, {{"module", std::string("m")}}),
      Kernel("fusion.1", "cpu_kernel", 1, 10,
             {{"hlo_op", std::string("fusion.1")}, {"fusion_kind", std::string("kLoop")}, {"module", std::string("m")},
              {"bytes_accessed", int64_t{4096}}, {"flops", int64_t{1024}}, {"kernel", std::string("fusion_1")}}),
      Kernel("dot", "library_call", 20, 50, {{"hlo_op", std::string("dot")}, {"module", std::string("m")}}),
      Kernel("execute m", "execute", 200, 100, {{"module", std::string("m")}}),
      Kernel("fusion.1", "cpu_kernel", 201, 30, {{"hlo_op", std::string("fusion.1")}, {"module", std::string("m")}}),
      // XLA's kernels say their module as hlo_module; a pass is no kernel.
      Kernel("loop_add_fusion", "cpu_kernel", 300, 7, {{"hlo_op", std::string("add.2")}, {"hlo_module", std::string("jit_f")}}),
      Kernel("algsimp", "pass", 0, 500, {}),
  };
  const std::string path = dir->path() + "/timeline.ctf.json";
  ASSERT_TRUE(WriteChromeTrace(trace, path).ok());
  auto profile = TraceHloProfileOf(path);
  ASSERT_TRUE(profile.ok()) << profile.status().message();
  EXPECT_EQ(profile->file, path);
  EXPECT_EQ(profile->runs, (std::map<std::string, int64_t>{{"m", 2}}));
  ASSERT_EQ(profile->rows.size(), 3u);
  // By module, then the longest first.
  EXPECT_EQ(profile->rows[0].module, "jit_f");
  EXPECT_EQ(profile->rows[0].instruction, "add.2");
  EXPECT_EQ(profile->rows[0].kernel, "loop_add_fusion");
  const TraceHloProfileRow& dot = profile->rows[1];
  EXPECT_EQ(dot.instruction, "dot");
  EXPECT_EQ(dot.category, "library_call");
  const TraceHloProfileRow& fusion = profile->rows[2];
  EXPECT_EQ(fusion.instruction, "fusion.1");
  EXPECT_EQ(fusion.kernel, "fusion_1");
  EXPECT_EQ(fusion.fusion_kind, "kLoop");
  EXPECT_EQ(fusion.count, 2);
  EXPECT_EQ(fusion.total_ns, 40);
  EXPECT_EQ(fusion.min_ns, 10);
  EXPECT_EQ(fusion.max_ns, 30);
  EXPECT_EQ(fusion.bytes_accessed, 4096);
  EXPECT_EQ(fusion.flops, 1024);
}

TEST(TraceHloProfile, FindsTheTraceOfAFolder) {
  auto dir = TemporaryDirectory::Create("trace-hlo-profile");
  ASSERT_TRUE(dir.ok());
  auto none = FindTraceFile(dir->path());
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(none.status().message(), HasSubstr(": no trace in the folder (timeline.ctf.json"));
  EXPECT_THAT(none.status().message(), ::testing::StartsWith("trace: "));
  // jax.profiler's layout: plugins/profile/RUN/HOST.xplane.pb beside HOST.trace.json.gz; the
  // XSpace is taken.
  const std::string run = dir->path() + "/plugins/profile/2026_01_01";
  std::filesystem::create_directories(run);
  ASSERT_TRUE(WriteFile(run + "/host.trace.json.gz", "x").ok());
  ASSERT_TRUE(WriteFile(run + "/host.xplane.pb", "x").ok());
  ASSERT_TRUE(WriteFile(dir->path() + "/notes.json", "x").ok());
  auto found = FindTraceFile(dir->path());
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(*found, run + "/host.xplane.pb");
  // A file is what it is: the reader says what is wrong with it.
  EXPECT_EQ(*FindTraceFile(dir->path() + "/notes.json"), dir->path() + "/notes.json");
  auto missing = TraceHloProfileOf(dir->path() + "/missing.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("missing.json: cannot open"));
}

}  // namespace
}  // namespace xlens::profiler
