// The reader of `xlens compare --json` reports: a real one (testdata/compare/step.json, written by
// `xlens compare jd --module jit_step --trace prof/.../vm.xplane.pb --run --json step.json` on XLA's
// CPU dump and jax.profiler profile of a jitted training step) read field by field, and broken
// ones each refused with one message that names the file and what was expected where.
#include "dump/compare_report.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "compiler/support/file_io.h"

namespace xlens {
namespace {

namespace fs = std::filesystem;

std::string Testdata(const std::string& name) {
  return (fs::path(XLENS_TESTDATA_DIR) / "compare" / name).string();
}

TEST(CompareReportTest, ReadsARealReport) {
  StatusOr<CompareReport> report = ReadCompareReport(Testdata("step.json"));
  ASSERT_TRUE(report.ok()) << report.status().message();
  ASSERT_EQ(report->modules.size(), 1u);
  const CompareModule& m = report->modules[0];
  EXPECT_EQ(m.id, 18);
  EXPECT_EQ(m.name, "jit_step");
  EXPECT_EQ(m.backend, "cpu");
  EXPECT_EQ(m.after, "module_0018.jit_step.cpu_after_optimizations.txt");
  ASSERT_EQ(m.xla.size(), 13u);
  ASSERT_EQ(m.xlens.size(), 11u);
  ASSERT_EQ(m.pairs.size(), 11u);
  EXPECT_EQ(m.xla_fused_more.size(), 6u);
  EXPECT_EQ(m.xlens_fused_more.size(), 7u);
  // Pairs index both sides, and each side's kernel points back at its pair.
  for (size_t i = 0; i < m.pairs.size(); ++i) {
    const ComparePair& p = m.pairs[i];
    EXPECT_EQ(m.xla[p.xla_index].name, p.xla);
    EXPECT_EQ(m.xlens[p.xlens_index].name, p.xlens);
    EXPECT_EQ(m.xla[p.xla_index].pair, static_cast<int>(i));
    EXPECT_EQ(m.xla[p.xla_index].matched, p.xlens);
    EXPECT_GT(p.jaccard, 0.0);
    EXPECT_LE(p.jaccard, 1.0);
  }
  EXPECT_EQ(m.pairs[0].xla, "ynn_fusion.2");
  EXPECT_EQ(m.pairs[0].xlens, "fusion");
  EXPECT_DOUBLE_EQ(m.pairs[0].jaccard, 0.5);
  // The two XLA kernels left unpaired say why.
  int unpaired = 0;
  for (const CompareKernel& k : m.xla) {
    if (k.pair >= 0) continue;
    ++unpaired;
    EXPECT_FALSE(k.matched.has_value());
    EXPECT_FALSE(k.reason.empty()) << k.name;
  }
  EXPECT_EQ(unpaired, 2);
  ASSERT_TRUE(m.xla[0].source.has_value());
  EXPECT_EQ(m.xla[0].source->function, "loss");
  EXPECT_EQ(m.xla[0].source->line, 3);
  // Both sides timed: XLA's three runs from the profile, xlens's four from --run.
  ASSERT_TRUE(m.xla[0].time.has_value());
  EXPECT_EQ(m.xla[0].time->events, 3);
  EXPECT_GT(m.xla[0].time->total_us, 0.0);
  ASSERT_TRUE(m.xlens[0].time.has_value());
  EXPECT_EQ(m.xlens[0].time->events, 4);
  EXPECT_EQ(report->xla_trace.rfind("prof/plugins/profile/", 0), 0u) << report->xla_trace;
  EXPECT_EQ(report->FindModule(18), &m);
  EXPECT_EQ(report->FindModule(3), nullptr);
}

TEST(CompareReportTest, ReadsKernelTimes) {
  StatusOr<CompareReport> report = ParseCompareReport(R"({"directory": "d", "modules": [{"id": 1, "name": "m",
    "before": "b", "after": "a", "backend": "cpu",
    "xla": {"kernel_count": 1, "kernels": [{"name": "f", "kind": "kLoop", "op_names": [], "instructions": ["f"],
            "source": null, "matched": "g", "trace": {"events": 4, "total_us": 12.5}}]},
    "xlens": {"kernel_count": 1, "kernels": [{"name": "g", "kind": "kLoop", "op_names": [], "instructions": ["g"],
              "source": null, "matched": "f"}]},
    "pairs": [{"xla": "f", "xlens": "g", "jaccard": 1.0, "shared_atoms": 2, "exact": true, "by": "atoms"}],
    "xla_fused_more": [], "xlens_fused_more": []}], "skipped": [], "trace": {"file": "p.json", "events": 9}})");
  ASSERT_TRUE(report.ok()) << report.status().message();
  const CompareKernel& f = report->modules[0].xla[0];
  ASSERT_TRUE(f.time.has_value());
  EXPECT_EQ(f.time->events, 4);
  EXPECT_DOUBLE_EQ(f.time->total_us, 12.5);
  EXPECT_FALSE(report->modules[0].xlens[0].time.has_value());
  EXPECT_EQ(report->xla_trace, "p.json");
  EXPECT_TRUE(report->xlens_trace.empty());
}

struct Broken {
  const char* file;
  const char* expected;  // a piece of the one message
};

TEST(CompareReportTest, RefusesBrokenReportsWithOneMessage) {
  const Broken cases[] = {
      {"broken_not_json.json", "not valid JSON"},
      {"broken_wrong_type.json", "modules[0].xla.kernels[0].kind: expected a string"},
      {"broken_missing_pairs.json", "modules[0].pairs: expected a field that is missing"},
      {"broken_pair_out_of_range.json", "modules[0].pairs[0].xla: expected one of the module's XLA kernels"},
      {"broken_overlap.json", "modules[0].pairs[0].jaccard: expected an overlap between 0 and 1"},
  };
  for (const Broken& c : cases) {
    const std::string path = Testdata(c.file);
    StatusOr<CompareReport> report = ReadCompareReport(path);
    ASSERT_FALSE(report.ok()) << c.file;
    const std::string message = report.status().message();
    EXPECT_EQ(message.rfind(path + ": ", 0), 0u) << message;
    EXPECT_NE(message.find(c.expected), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

TEST(CompareReportTest, RefusesWhatIsNotAReport) {
  for (const char* text : {"[]", "42", "{}", R"({"modules": 3, "directory": "d"})", R"({"modules": [], "directory": 1})",
                           R"({"modules": [7], "directory": "d"})", R"({"modules": [], "directory": "d", "skipped": {}})",
                           R"({"modules": [], "directory": "d", "skipped": [], "trace": 1})", "1e400"}) {
    StatusOr<CompareReport> report = ParseCompareReport(text);
    EXPECT_FALSE(report.ok()) << text;
  }
  // Duplicate pairs of one kernel, a count that disagrees with the list, and a fused-more note
  // naming a kernel of nobody.
  const std::string good = *ReadFile(Testdata("step.json"));
  auto with = [&](const std::string& from, const std::string& to) {
    std::string text = good;
    size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return text.replace(at, from.size(), to);
  };
  EXPECT_FALSE(ParseCompareReport(with("\"kernel_count\": 13", "\"kernel_count\": 12")).ok());
  EXPECT_FALSE(ParseCompareReport(with("\"xlens\": \"fusion.1\"", "\"xlens\": \"fusion\"")).ok());
  EXPECT_FALSE(ParseCompareReport(with("\"kernel\": \"add_tanh_fusion\"", "\"kernel\": \"nobody\"")).ok());
}

TEST(CompareReportTest, RefusesAFileOverTheLimit) {
  // A sparse file past the limit: refused by its size, before anything is read.
  const fs::path path = fs::temp_directory_path() / ("compare_report_test_" + std::to_string(::getpid()) + ".json");
  fs::resize_file((std::ofstream(path), path), static_cast<uintmax_t>(kMaxCompareReportBytes) + 1);
  StatusOr<CompareReport> report = ReadCompareReport(path.string());
  fs::remove(path);
  ASSERT_FALSE(report.ok());
  EXPECT_NE(report.status().message().find("is more than an `xlens compare --json` report can be (256 MiB)"),
            std::string::npos)
      << report.status().message();
  StatusOr<CompareReport> missing = ReadCompareReport(Testdata("no_such_file.json"));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("no_such_file.json"), std::string::npos);
}

}  // namespace
}  // namespace xlens
