// Bug reports end to end, as a user makes and reads them: `xlens run` with
// --xla_dump_hlo_snapshots, `xlens bundle`, and `xlens replay` of the bundle elsewhere. GNU tar
// lists and unpacks the bundles (the outside reader); the evaluator and a planted code generation
// fault (--xla_test_miscompile_kernel) give the known answers.
#include <filesystem>
#include <fstream>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_test_util.h"
#include "test_util.h"

namespace xlens {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr const char* kModule = R"(HloModule bug_report

ENTRY main {
  p0 = f32[16] parameter(0)
  p1 = f32[16] parameter(1)
  w = f32[16] constant({0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5, 8.5, 9.5, 10.5, 11.5, 12.5, 13.5, 14.5, 15.5})
  a = f32[16] add(p0, p1)
  m = f32[16] multiply(a, w)
  ROOT t = (f32[16], f32[16]) tuple(a, m)
}
)";

// CRC-32 bit by bit (the manifest's checksum; written apart from the table-driven one it checks).
std::string Crc32(const std::string& bytes) {
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char byte : bytes) {
    crc ^= byte;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  char out[16];
  std::snprintf(out, sizeof(out), "%08x", crc ^ 0xFFFFFFFFu);
  return std::string("crc32:") + out;
}

class BundleCliTest : public CliTest {
 protected:
  void SetUp() override {
    CliTest::SetUp();
    if (RunShellCommand("tar --version >/dev/null 2>&1").exit_code != 0) GTEST_SKIP() << "no tar";
    // libarchive is optional at build time; without it both commands say so, and there is
    // nothing here to test.
    if (RunXlens("bundle " + (dir_ / "none").string()).output.find("without libarchive") !=
        std::string::npos) {
      GTEST_SKIP() << "xlens was built without libarchive (libarchive-dev)";
    }
    module_ = Write("bug_report.hlo", kModule);
    dump_ = (dir_ / "dump").string();
  }
  // `xlens run` into the dump directory with snapshots; `extra` adds flags.
  void RunAndDump(const std::string& extra = "", int expected_exit = 0) {
    RunResult r = RunXlens("run " + module_ + " --xla_dump_to=" + dump_ +
                           " --xla_dump_hlo_snapshots " + extra);
    ASSERT_EQ(r.exit_code, expected_exit) << r.output;
  }
  RunResult Bundle(const std::string& out, const std::string& extra = "") {
    return RunXlens("bundle " + dump_ + " -o " + out + " " + extra);
  }
  std::set<std::string> TarListing(const std::string& bundle) {
    RunResult r = RunShellCommand("tar tzf " + bundle);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    std::set<std::string> names;
    std::istringstream lines(r.output);
    for (std::string line; std::getline(lines, line);) names.insert(line);
    return names;
  }
  std::string TarMember(const std::string& bundle, const std::string& member) {
    return RunShellCommand("tar xzf " + bundle + " -O " + member).output;
  }
  json Manifest() { return json::parse(testing::ReadTestFile(dump_ + "/manifest.json")); }
  std::string module_, dump_;
};

TEST_F(BundleCliTest, SnapshotsRecordEveryExecutionUpToTheLimitWithChecksums) {
  RunAndDump("--iterations=6");
  json module = Manifest()["modules"][0];
  ASSERT_EQ(module["executions"].size(), 4u) << "--xla_dump_max_hlo_snapshots defaults to 4";
  for (int i = 0; i < 4; ++i) {
    const json& e = module["executions"][i];
    EXPECT_EQ(e["execution"], i + 1);
    ASSERT_EQ(e["arguments"].size(), 2u);
    ASSERT_EQ(e["results"].size(), 2u) << "the tuple's leaves, in order";
    char name[64];
    std::snprintf(name, sizeof(name), "module_0001.bug_report.execution_%04d.out1.npy", i + 1);
    EXPECT_EQ(e["results"][1]["file"], name);
    for (const json* list : {&e["arguments"], &e["results"]}) {
      for (const json& t : *list) {
        const std::string bytes = testing::ReadTestFile(dump_ + "/" + t["file"].get<std::string>());
        EXPECT_EQ(t["checksum"], Crc32(bytes)) << t["file"];
        EXPECT_EQ(t["bytes"], bytes.size());
        EXPECT_EQ(t["shape"], "f32[16]");
      }
    }
  }
  // The recorded arguments give the recorded results on the evaluator, bit for bit.
  fs::create_directories(dir_ / "inputs");
  for (int i = 0; i < 2; ++i) {
    fs::copy_file(dump_ + "/module_0001.bug_report.execution_0001.arg" + std::to_string(i) + ".npy",
                  dir_ / "inputs" / ("arg" + std::to_string(i) + ".npy"));
  }
  RunResult eval = RunXlens("eval " + module_ + " --inputs " + (dir_ / "inputs").string() +
                            " --outputs " + (dir_ / "eval").string());
  ASSERT_EQ(eval.exit_code, 0) << eval.output;
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(testing::ReadTestFile((dir_ / "eval" / ("out" + std::to_string(i) + ".npy")).string()),
              testing::ReadTestFile(dump_ + "/module_0001.bug_report.execution_0001.out" +
                                    std::to_string(i) + ".npy"));
  }
  // The limit is a flag; without --xla_dump_hlo_snapshots nothing is recorded.
  fs::remove_all(dump_);
  RunAndDump("--iterations=3 --xla_dump_max_hlo_snapshots=1");
  EXPECT_EQ(Manifest()["modules"][0]["executions"].size(), 1u);
  fs::remove_all(dump_);
  ASSERT_EQ(RunXlens("run " + module_ + " --xla_dump_to=" + dump_).exit_code, 0);
  EXPECT_FALSE(Manifest()["modules"][0].contains("executions"));
  for (const auto& entry : fs::directory_iterator(dump_)) {
    EXPECT_NE(entry.path().extension(), ".npy") << entry.path();
  }
}

TEST_F(BundleCliTest, TheBundleHoldsTheDumpTheTraceAndTheEnvironment) {
  const std::string trace = (dir_ / "timeline.ctf.json").string();
  RunAndDump("--xla_dump_hlo_pass_re=.* --trace=" + trace);
  const std::string bundle = (dir_ / "b.tar.gz").string();
  RunResult r = Bundle(bundle, "--trace " + trace);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::set<std::string> names = TarListing(bundle);
  for (const char* expected :
       {"manifest.json", "environment.json", "module_0001.bug_report.before_optimizations.txt",
        "module_0001.bug_report.cpu_after_optimizations.txt",
        "module_0001.bug_report.cpu_after_optimizations-buffer-assignment.txt",
        "module_0001.bug_report.ir-no-opt.ll", "module_0001.bug_report.ir-with-opt.ll",
        "module_0001.bug_report.thunk_sequence.txt",
        "module_0001.bug_report.execution_0001.arg0.npy",
        "module_0001.bug_report.execution_0001.out1.npy", "trace/timeline.ctf.json"}) {
    EXPECT_TRUE(names.count(expected)) << expected << " is missing; the bundle says:\n" << r.output;
  }
  int pass_dumps = 0;
  for (const std::string& name : names) pass_dumps += name.find(".after_") != std::string::npos;
  EXPECT_GE(pass_dumps, 5);
  // Every file of the dump directory is in the bundle.
  for (const auto& entry : fs::directory_iterator(dump_)) {
    EXPECT_TRUE(names.count(entry.path().filename().string())) << entry.path();
  }
  EXPECT_NE(r.output.find("replay it with: xlens replay " + bundle), std::string::npos) << r.output;
  json environment = json::parse(TarMember(bundle, "environment.json"));
  EXPECT_EQ(environment["xlens"]["version"], "0.1");
  // The commit xlens was built from: the checkout's HEAD, as the tests run after the build (a
  // commit taken at configure time goes stale with the next commit).
  RunResult head = RunShellCommand(std::string("git -C ") + XLENS_SOURCE_DIR + " rev-parse --short=12 HEAD 2>/dev/null");
  if (head.exit_code == 0) {
    EXPECT_EQ(environment["xlens"]["commit"], head.output.substr(0, head.output.find('\n')));
  }
  EXPECT_TRUE(environment["host"]["llvm_version"].get<std::string>().starts_with("19."));
  EXPECT_FALSE(environment["host"]["cpu_features"].get<std::string>().empty());
  EXPECT_FALSE(environment["host"]["os"].get<std::string>().empty());
  const json& compilation = environment["compilations"][0];
  EXPECT_EQ(compilation["backend"], "cpu");
  EXPECT_EQ(compilation["command_line"][1], "run");
  EXPECT_EQ(compilation["flags"]["xla_dump_hlo_snapshots"], "true");
  EXPECT_EQ(compilation["flags"]["xla_backend_optimization_level"], "3") << "defaults too";
}

TEST_F(BundleCliTest, OverMaxSizeThePassDumpsGoFirstThenTheTrace) {
  const std::string trace = (dir_ / "t.json").string();
  RunAndDump("--xla_dump_hlo_pass_re=.* --trace=" + trace);
  const std::string full = (dir_ / "full.tar.gz").string();
  ASSERT_EQ(Bundle(full, "--trace " + trace).exit_code, 0);
  const auto full_size = fs::file_size(full);
  const std::string smaller = (dir_ / "smaller.tar.gz").string();
  // Budgets sit 64 bytes under a size measured before: the archive's timestamps make the same
  // content compress a few bytes differently from one run to the next.
  RunResult r = Bundle(smaller, "--trace " + trace + " --max-size " + std::to_string(full_size - 64));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("left out: the per-pass dumps (over --max-size)"), std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("left out: the trace"), std::string::npos) << r.output;
  EXPECT_LT(fs::file_size(smaller), full_size);
  std::set<std::string> names = TarListing(smaller);
  EXPECT_TRUE(names.count("trace/t.json"));
  for (const std::string& name : names) EXPECT_EQ(name.find(".after_"), std::string::npos) << name;
  // The bundle's manifest lists only what it holds.
  json manifest = json::parse(TarMember(smaller, "manifest.json"));
  for (const json& stage : manifest["modules"][0]["stages"]) EXPECT_TRUE(stage["files"].empty());

  const std::string smallest = (dir_ / "smallest.tar.gz").string();
  r = Bundle(smallest, "--trace " + trace + " --max-size " + std::to_string(fs::file_size(smaller) - 64));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("left out: the trace (over --max-size)"), std::string::npos) << r.output;
  EXPECT_FALSE(TarListing(smallest).count("trace/t.json"));
  // What must stay does not fit: an error, and no file.
  r = Bundle((dir_ / "none.tar.gz").string(), "--max-size 100");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("even without the per-pass dumps and the trace"), std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(dir_ / "none.tar.gz"));
}

TEST_F(BundleCliTest, StripConstantsElidesTheWeightsAndLeavesOutWhatHoldsThem) {
  RunAndDump();
  const std::string bundle = (dir_ / "stripped.tar.gz").string();
  RunResult r = Bundle(bundle, "--strip-constants");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string before =
      TarMember(bundle, "module_0001.bug_report.before_optimizations.txt");
  EXPECT_NE(before.find("constant({...})"), std::string::npos) << before;
  EXPECT_EQ(before.find("15.5"), std::string::npos) << "a weight was attached:\n" << before;
  for (const std::string& name : TarListing(bundle)) {
    EXPECT_FALSE(name.ends_with(".ll")) << name << " holds the constants";
    if (name.ends_with(".txt")) EXPECT_EQ(TarMember(bundle, name).find("15.5"), std::string::npos) << name;
  }
  EXPECT_NE(r.output.find("--strip-constants: it holds the constants' values"), std::string::npos);
  // Still HLO that parses (as XLA's elided constants do), but it cannot be replayed.
  const std::string extracted = Write("before.txt", before);
  EXPECT_EQ(RunXlens("verify " + extracted).exit_code, 0);
  RunResult replay = RunXlens("replay " + bundle);
  EXPECT_EQ(replay.exit_code, 1) << replay.output;
  EXPECT_NE(replay.output.find("made with --strip-constants"), std::string::npos) << replay.output;
}

TEST_F(BundleCliTest, ReplayOfACleanRunIsNotReproduced) {
  RunAndDump();
  const std::string bundle = (dir_ / "clean.tar.gz").string();
  ASSERT_EQ(Bundle(bundle).exit_code, 0);
  RunResult r = RunXlens("replay " + bundle + " --iterations 2");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("not reproduced: all outputs match\n"), std::string::npos) << r.output;
  // A compiler that goes wrong on this machine only (the fault planted by the replayer's own
  // XLA_FLAGS) is the bug the recording did not show.
  r = RunShellCommand("XLA_FLAGS=--xla_test_miscompile_kernel=fusion " + std::string(XLENS_BINARY_DIR) +
                      "/compiler/cli/xlens replay " + bundle + " 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("reproduced: out0 (and 1 other output) differs from the recorded result "
                          "by 1 (max abs), the evaluator agrees with the recorded result"),
            std::string::npos)
      << r.output;
}

TEST_F(BundleCliTest, ACpuRecordingReplaysOnTheGpuSimulator) {
  // Whoever has no GPU can still ask whether the GPU backend computes what the recording holds.
  RunAndDump();
  const std::string bundle = (dir_ / "clean.tar.gz").string();
  ASSERT_EQ(Bundle(bundle).exit_code, 0);
  RunResult r = RunXlens("replay " + bundle + " --backend=gpu-sim");
  if (r.output.find("unavailable") != std::string::npos) GTEST_SKIP() << r.output;
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("on gpu-sim"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("not reproduced: all outputs match\n"), std::string::npos) << r.output;
}

TEST_F(BundleCliTest, ReplayReproducesARecordedMiscompareFromACopyElsewhere) {
  // The kernel adds 1 to everything it stores: `xlens run --reference` sees the miscompare.
  RunAndDump("--xla_test_miscompile_kernel=fusion --reference", 1);
  ASSERT_EQ(Bundle((dir_ / "bug.tar.gz").string()).exit_code, 0);
  // Replayed from another directory, with the dump gone, as whoever gets the report would.
  fs::remove_all(dump_);
  const fs::path elsewhere = dir_ / "elsewhere";
  fs::create_directories(elsewhere / "tmp");
  fs::copy_file(dir_ / "bug.tar.gz", elsewhere / "bug.tar.gz");
  RunResult r = RunShellCommand("cd " + elsewhere.string() + " && TMPDIR=" +
                                (elsewhere / "tmp").string() + " " + XLENS_BINARY_DIR +
                                "/compiler/cli/xlens replay bug.tar.gz 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("reproduced: out0 (and 1 other output) differs from the evaluator by 1 "
                          "(max abs), as in the recorded run"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("with --xla_test_miscompile_kernel=fusion"), std::string::npos)
      << "the recorded flags are used: " << r.output;
  // Nothing was left behind: not beside the bundle, not in the temporary directory.
  std::set<std::string> left;
  for (const auto& entry : fs::recursive_directory_iterator(elsewhere)) {
    left.insert(fs::relative(entry.path(), elsewhere).string());
  }
  EXPECT_EQ(left, (std::set<std::string>{"bug.tar.gz", "tmp"}));
  EXPECT_FALSE(fs::exists(dump_)) << "the recorded --xla_dump_to is not replayed";
}

TEST_F(BundleCliTest, AWrongRecordingIsNotReproducedAndADamagedOneIsRefused) {
  RunAndDump();
  const std::string bundle = (dir_ / "b.tar.gz").string();
  ASSERT_EQ(Bundle(bundle).exit_code, 0);
  const fs::path unpacked = dir_ / "u";
  fs::create_directories(unpacked);
  ASSERT_EQ(RunShellCommand("tar xzf " + bundle + " -C " + unpacked.string()).exit_code, 0);
  // out0's last element changed by hand: the recording now disagrees with this compiler.
  const std::string out0 = (unpacked / "module_0001.bug_report.execution_0001.out0.npy").string();
  std::string bytes = testing::ReadTestFile(out0);
  float last;
  std::memcpy(&last, bytes.data() + bytes.size() - 4, 4);
  last += 0.25f;
  std::memcpy(bytes.data() + bytes.size() - 4, &last, 4);
  std::ofstream(out0, std::ios::binary) << bytes;
  const std::string damaged = (dir_ / "damaged.tar.gz").string();
  ASSERT_EQ(RunShellCommand("tar czf " + damaged + " -C " + unpacked.string() + " .").exit_code, 0);
  RunResult r = RunXlens("replay " + damaged);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("does not match the manifest's"), std::string::npos) << r.output;

  json manifest = json::parse(testing::ReadTestFile((unpacked / "manifest.json").string()));
  manifest["modules"][0]["executions"][0]["results"][0]["checksum"] = Crc32(bytes);
  std::ofstream((unpacked / "manifest.json").string()) << manifest.dump(1);
  const std::string edited = (dir_ / "edited.tar.gz").string();
  ASSERT_EQ(RunShellCommand("tar czf " + edited + " -C " + unpacked.string() + " .").exit_code, 0);
  r = RunXlens("replay " + edited);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("not reproduced: every output agrees with the evaluator here; the "
                          "recorded out0 differed from it by 0.25 (max abs)"),
            std::string::npos)
      << r.output;
}

TEST_F(BundleCliTest, TheClusteringGraphsComeWithGraphsAndTheManifestPointsAtThem) {
  const std::string sample = std::string(XLENS_SOURCE_DIR) + "/samples/graphs/linreg_tf1";
  const std::string graphs = (dir_ / "graphs").string();
  RunResult run = RunXlens("graph run " + sample + "/graph.pbtxt --init init --feed x_observed=" +
                           sample + "/x_observed.npy --feed y_observed=" + sample +
                           "/y_observed.npy --fetch Mean --target GradientDescent --steps 1"
                           " --jit=auto --jit-level=ON_1 --tf_xla_cpu_global_jit --xla_dump_to=" +
                           dump_ + " --tf_dump_graph_prefix=" + graphs + " --tf_xla_clustering_debug");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  // Without --graphs the graphs outside the dump are named as left out, with the way to add them.
  RunResult r = Bundle((dir_ / "without.tar.gz").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("add its directory with --graphs DIR"), std::string::npos) << r.output;
  const std::string bundle = (dir_ / "with.tar.gz").string();
  r = Bundle(bundle, "--graphs " + graphs);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::set<std::string> names = TarListing(bundle);
  for (const auto& entry : fs::directory_iterator(graphs)) {
    EXPECT_TRUE(names.count("graphs/" + entry.path().filename().string())) << entry.path();
  }
  json manifest = json::parse(TarMember(bundle, "manifest.json"));
  ASSERT_FALSE(manifest["graphs"].empty());
  int listed = 0;
  for (const json& graph : manifest["graphs"]) {
    for (const json& stage : graph["stages"]) {
      for (const json& file : stage["files"]) {
        EXPECT_TRUE(names.count(file.get<std::string>())) << file;
        ++listed;
      }
    }
  }
  EXPECT_GE(listed, 6);
}

TEST_F(BundleCliTest, UserErrorsAreOneLineAndExitOne) {
  RunResult r = RunXlens("bundle " + (dir_ / "nowhere").string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("no such directory"), std::string::npos) << r.output;
  fs::create_directories(dir_ / "empty");
  r = RunXlens("bundle " + (dir_ / "empty").string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("no manifest.json"), std::string::npos) << r.output;
  r = RunXlens("replay " + Write("x.tar.gz", "not a bundle"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("x.tar.gz: cannot be read as a .tar.gz"), std::string::npos) << r.output;
  RunAndDump();
  ASSERT_EQ(Bundle((dir_ / "b.tar.gz").string()).exit_code, 0);
  r = RunXlens("replay " + (dir_ / "b.tar.gz").string() + " --backend=tpu");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("--backend: expected cpu, gpu or gpu-sim"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace xlens
