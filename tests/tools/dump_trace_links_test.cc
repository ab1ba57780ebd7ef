#include "compiler/tools/dump_trace_links.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "compiler/support/temporary_directory.h"
#include "profiler/chrome_trace_writer.h"

namespace xlens {
namespace {

using profiler::TraceArg;
using profiler::TraceEvent;

DumpDirectory TwoKernels() {
  DumpDirectory dump;
  dump.source = DumpDirectory::Source::kManifest;
  ManifestModule module;
  module.id = 1;
  module.name = "m";
  module.kernels = {{.name = "fusion", .hlo_instruction = "fusion"}, {.name = "fusion_1", .hlo_instruction = "fusion.1"}};
  dump.manifest.modules.push_back(module);
  return dump;
}

TEST(DumpTraceLinks, LinksKernelEventsByInstructionAndModule) {
  auto dir = TemporaryDirectory::Create("dump-trace-links");
  ASSERT_TRUE(dir.ok());
  profiler::Trace trace;
  trace.events = {
      // The compiler's spans share names with kernels: they are no kernel's events.
      {"fusion", "pipeline", 0, 1, 0, 100, {}},
      {"fusion", "pass", 0, 1, 0, 50, {}},
      {"execute m", "execute", 0, 1, 200, 100, {{"module", std::string("m")}}},
      {"fusion", "library_call", 0, 1, 200, 40, {{"hlo_op", std::string("fusion")}}},
      {"fusion_1", "cpu_kernel", 0, 1, 240, 20, {{"hlo_op", std::string("fusion.1")}}},
      {"fusion_1", "cpu_kernel", 0, 1, 260, 10, {{"hlo_op", std::string("fusion.1")}}},
      // XLA's names, of a module of another name: a kernel event, not linked.
      {"other", "cpu_kernel", 0, 1, 300, 5, {{"hlo_op", std::string("fusion.1")}, {"hlo_module", std::string("n")}}},
      {"unknown", "cpu_kernel", 0, 1, 310, 5, {}},
  };
  const std::string path = dir->path() + "/t.json";
  ASSERT_TRUE(profiler::WriteChromeTrace(trace, path).ok());
  auto links = LinkTraceToDump(TwoKernels(), path);
  ASSERT_TRUE(links.ok()) << links.status().message();
  EXPECT_EQ(links->file, path);
  EXPECT_EQ(links->events, 8);
  EXPECT_EQ(links->kernel_events, 5);
  // "other" names module n, which the dump lacks: it falls back on the instruction's name.
  EXPECT_EQ(links->linked_events, 4);
  EXPECT_EQ(links->times.at({1, "fusion"}).events, 1);
  EXPECT_EQ(links->times.at({1, "fusion"}).total_ns, 40);
  EXPECT_EQ(links->times.at({1, "fusion_1"}).events, 3);
}

TEST(DumpTraceLinks, AnUnreadableTraceIsTheReadersError) {
  auto links = LinkTraceToDump(TwoKernels(), "/nonexistent/t.json");
  ASSERT_FALSE(links.ok());
  EXPECT_THAT(links.status().message(), ::testing::HasSubstr("/nonexistent/t.json: cannot open"));
}

}  // namespace
}  // namespace xlens
