#include "dump/manifest.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "compiler/support/file_io.h"
#include "processes_at_once.h"
#include "test_util.h"

namespace xlens {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

class ManifestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "xlens_manifest_test_XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string ManifestPath() const { return (fs::path(dir_) / kManifestFileName).string(); }

  std::string dir_;
};

ManifestModule SampleModule(int64_t id, const std::string& name) {
  ManifestModule module;
  module.id = id;
  module.name = name;
  module.files = {"module_0001." + name + ".before_optimizations.txt"};
  module.stages.push_back(ManifestStage{0,
                                        "simplification",
                                        "algebraic-simplifier",
                                        true,
                                        1234,
                                        {"module_0001.x.0000.simplification.txt"},
                                        {}});
  module.stages.push_back(ManifestStage{1, "simplification", "dce", false, 99, {}, {}});
  module.kernels.push_back(ManifestKernel{"fusion_3",
                                          "kLoop",
                                          "fusion.3",
                                          "fused_computation.3",
                                          {"model/add", "model/mul"},
                                          "instruction-fusion",
                                          {"module_0001.x.ir-with-opt.ll"}});
  return module;
}

TEST_F(ManifestTest, JsonRoundTrip) {
  Manifest manifest;
  manifest.modules.push_back(SampleModule(1, "cluster_0"));
  manifest.modules.push_back(SampleModule(2, "cluster_1"));
  std::string json = ManifestToJson(manifest);
  EXPECT_THAT(json, HasSubstr("\"format\": 1"));
  EXPECT_THAT(json, HasSubstr("\"created_by_pass\": \"instruction-fusion\""));
  StatusOr<Manifest> parsed = ParseManifest(json);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_TRUE(*parsed == manifest);
  ASSERT_NE(parsed->FindModule(2), nullptr);
  EXPECT_EQ(parsed->FindModule(2)->name, "cluster_1");
  EXPECT_EQ(parsed->FindModule(3), nullptr);
}

// A stage's changes and the fusion decisions, in the exact JSON the viewer reads.
TEST_F(ManifestTest, StageChangesAndFusionDecisionsRoundTripInTheirDocumentedForm) {
  Manifest manifest;
  ManifestModule module = SampleModule(1, "m");
  module.stages[0].changes.added = {"fusion.3"};
  module.stages[0].changes.removed = {"constant.1"};
  module.stages[0].changes.modified = {"tuple.9"};
  module.stages[0].changes.fused_into = {{"add.4", "fusion.3"}, {"multiply.2", "fusion.3"}};
  module.fusion_decisions.push_back({7, "fusion", "multiply.2", "add.4", true, "kLoop", "fusion.3", ""});
  module.fusion_decisions.push_back(
      {7, "fusion", "exponential.1", "add.4", false, "", "", "expensive producer with 2 users"});
  manifest.modules.push_back(module);
  std::string json = ManifestToJson(manifest);
  nlohmann::json doc = nlohmann::json::parse(json);
  const nlohmann::json& stages = doc["modules"][0]["stages"];
  EXPECT_EQ(stages[0]["changes"], nlohmann::json::parse(R"({"added": ["fusion.3"],
      "removed": ["constant.1"], "modified": ["tuple.9"],
      "fused_into": {"add.4": "fusion.3", "multiply.2": "fusion.3"}})"));
  // A stage that changed nothing carries no record at all.
  EXPECT_FALSE(stages[1].contains("changes"));
  EXPECT_EQ(doc["modules"][0]["fusion_decisions"], nlohmann::json::parse(R"([
      {"step": 7, "pass": "fusion", "producer": "multiply.2", "consumer": "add.4", "fused": true,
       "kind": "kLoop", "fusion": "fusion.3", "reason": ""},
      {"step": 7, "pass": "fusion", "producer": "exponential.1", "consumer": "add.4",
       "fused": false, "kind": "", "fusion": "", "reason": "expensive producer with 2 users"}])"));
  StatusOr<Manifest> parsed = ParseManifest(json);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_TRUE(*parsed == manifest);
  // Without decisions the key is left out, as older manifests had it.
  manifest.modules[0].fusion_decisions.clear();
  EXPECT_FALSE(nlohmann::json::parse(ManifestToJson(manifest))["modules"][0].contains("fusion_decisions"));
  // Parts of a change record may be absent; they read as empty.
  StatusOr<Manifest> partial = ParseManifest(R"({"format": 1, "modules": [{"id": 1, "name": "m",
      "stages": [{"step": 0, "pipeline": "p", "pass": "dce", "changed": true,
                  "changes": {"removed": ["x"]}}]}]})");
  ASSERT_TRUE(partial.ok()) << partial.status().message();
  EXPECT_THAT(partial->modules[0].stages[0].changes.removed, ElementsAre("x"));
  EXPECT_TRUE(partial->modules[0].stages[0].changes.fused_into.empty());
}

// A kernel's source line and callers, in the JSON form inspect and the viewer read; null when
// unknown.
TEST_F(ManifestTest, KernelSourceAndStackRoundTripAndNullIsUnknown) {
  Manifest manifest;
  manifest.modules.push_back(SampleModule(1, "jit_train_step"));
  ManifestKernel& kernel = manifest.modules[0].kernels[0];
  kernel.source = ManifestSourceFrame{"train_step.py", 4, 18, "predict"};
  kernel.stack = {{"train_step.py", 7, 19, "loss"}, {"train_step.py", 14, 0, "<module>"}};
  manifest.modules[0].kernels.push_back(ManifestKernel{"copy_1"});
  std::string json = ManifestToJson(manifest);
  EXPECT_THAT(json, HasSubstr(R"("source": {)"));
  EXPECT_THAT(json, HasSubstr(R"("function": "predict")"));
  EXPECT_THAT(json, HasSubstr(R"("stack": [)"));
  EXPECT_THAT(json, HasSubstr(R"("source": null)"));
  StatusOr<Manifest> parsed = ParseManifest(json);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_TRUE(*parsed == manifest);
  EXPECT_FALSE(parsed->modules[0].kernels[1].source.has_value());
  // A source that is not an object, or a frame without its file, is refused with its path.
  StatusOr<Manifest> bad = ParseManifest(R"({"format": 1, "modules": [{"id": 1, "name": "m",
      "kernels": [{"name": "k", "source": "train_step.py:4"}]}]})");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("kernels[0].source"));
  bad = ParseManifest(R"({"format": 1, "modules": [{"id": 1, "name": "m",
      "kernels": [{"name": "k", "stack": [{"line": 3}]}]}]})");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("missing \"file\""));
}

TEST_F(ManifestTest, OptionalFieldsDefaultAndUnknownFieldsAreIgnored) {
  StatusOr<Manifest> parsed = ParseManifest(R"({"format": 1, "written_by": "future xlens",
      "modules": [{"id": 4, "name": "m", "extra": {"a": 1},
                   "stages": [{"step": 0, "pipeline": "p", "pass": "x", "changed": false}],
                   "kernels": [{"name": "k"}]}]})");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  ASSERT_EQ(parsed->modules.size(), 1u);
  const ManifestModule& module = parsed->modules[0];
  EXPECT_TRUE(module.files.empty());
  EXPECT_EQ(module.stages[0].wall_ns, 0);
  EXPECT_EQ(module.kernels[0].fusion_kind, "");
  EXPECT_TRUE(module.kernels[0].op_names.empty());
}

TEST_F(ManifestTest, WriterWritesAndReaderReads) {
  ManifestWriter writer(dir_);
  writer.AddModule(1, "cluster_0");
  writer.AddModuleFile(1, "module_0001.cluster_0.before_optimizations.txt");
  writer.AddStage(1, ManifestStage{0, "opt", "dce", true, 10, {"a.txt"}, {}});
  ManifestKernel kernel;
  kernel.name = "fusion";
  writer.AddKernel(1, kernel);
  ASSERT_TRUE(writer.Write().ok());
  StatusOr<Manifest> read = ReadManifest(ManifestPath());
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_TRUE(*read == writer.manifest());
  EXPECT_TRUE(writer.warnings().empty());
  // Writing again after more records replaces this writer's module rather than duplicating it.
  writer.AddStage(1, ManifestStage{1, "opt", "cse", false, 5, {}, {}});
  ASSERT_TRUE(writer.Write().ok());
  read = ReadManifest(ManifestPath());
  ASSERT_TRUE(read.ok()) << read.status().message();
  ASSERT_EQ(read->modules.size(), 1u);
  EXPECT_EQ(read->modules[0].stages.size(), 2u);
  for (const auto& entry : fs::directory_iterator(dir_)) {
    EXPECT_EQ(entry.path().filename(), "manifest.json") << "left behind: " << entry.path();
  }
}

TEST_F(ManifestTest, TwoWritersAppend) {
  ManifestWriter first(dir_);
  first.AddModule(1, "a");
  ASSERT_TRUE(first.Write().ok());
  ManifestWriter second(dir_);
  second.AddModule(2, "b");
  ASSERT_TRUE(second.Write().ok());
  // The first writer writing again keeps the second's module.
  first.AddModuleFile(1, "module_0001.a.txt");
  ASSERT_TRUE(first.Write().ok());
  StatusOr<Manifest> read = ReadManifest(ManifestPath());
  ASSERT_TRUE(read.ok()) << read.status().message();
  ASSERT_EQ(read->modules.size(), 2u);
  EXPECT_EQ(read->modules[0].name, "a");
  EXPECT_THAT(read->modules[0].files, ElementsAre("module_0001.a.txt"));
  EXPECT_EQ(read->modules[1].name, "b");
}

TEST_F(ManifestTest, ProcessesWritingAtOnceLoseNothing) {
  constexpr int kProcesses = 8;
  testing::RunInProcessesAtOnce(
      kProcesses,
      [&](int p) {
        ManifestWriter writer(dir_);
        writer.AddModule(100 + p, "m" + std::to_string(p));
        return writer.Write().ok();
      },
      /*start_together=*/false);
  StatusOr<Manifest> read = ReadManifest(ManifestPath());
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_EQ(read->modules.size(), static_cast<size_t>(kProcesses));
}

TEST_F(ManifestTest, CorruptManifestIsKeptAsideWithAWarning) {
  ASSERT_TRUE(WriteFileAtomic(ManifestPath(), "{\"format\": 1, \"modules\": [").ok());
  ASSERT_TRUE(WriteFileAtomic(ManifestPath() + ".corrupt.1", "older").ok());
  ManifestWriter writer(dir_);
  writer.AddModule(1, "m");
  ASSERT_TRUE(writer.Write().ok());
  ASSERT_EQ(writer.warnings().size(), 1u);
  EXPECT_THAT(writer.warnings()[0], HasSubstr("not valid JSON"));
  EXPECT_THAT(writer.warnings()[0], HasSubstr("manifest.json.corrupt.2"));
  StatusOr<std::string> kept = ReadFile(ManifestPath() + ".corrupt.2");
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(*kept, "{\"format\": 1, \"modules\": [");
  StatusOr<Manifest> read = ReadManifest(ManifestPath());
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_EQ(read->modules.size(), 1u);
}

TEST_F(ManifestTest, UnwritableDirectoryIsAnErrorNotACrash) {
  ManifestWriter writer(dir_ + "/does/not/exist");
  writer.AddModule(1, "m");
  Status status = writer.Write();
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("does/not/exist/manifest.json"));
}

TEST_F(ManifestTest, MissingFileIsAClearError) {
  StatusOr<Manifest> read = ReadManifest(dir_ + "/nothing.json");
  ASSERT_FALSE(read.ok());
  EXPECT_THAT(read.status().message(), HasSubstr("nothing.json: cannot open"));
}

// A corrupt manifest is read while a user's compilation runs: every input gives a manifest or one
// error line, and nothing throws (nlohmann throws out_of_range for 1e400, not a parse_error).
TEST(ParseManifestTest, NeverThrows) {
  const std::vector<std::string> inputs = {
      R"({"format": 1, "modules": [{"id": 1e400, "name": "x"}]})",
      R"({"format": 1e400, "modules": []})",
      R"({"format": 1, "modules": [{"id": 18446744073709551615, "name": "x"}]})",
      R"({"format": 1, "modules": [{"id": -1e400, "name": "x"}]})",
      R"({"format": "one", "modules": {"id": []}})",
      std::string(100000, '['),
      std::string("{\"format\": 1, \"modules\": [{\"id\": 1, \"name\": \"\xff\xfe\"}]}"),
      std::string("\0\x01\x1b[2J", 5),
  };
  for (const std::string& input : inputs) {
    StatusOr<Manifest> manifest = ParseManifest(input);
    ASSERT_FALSE(manifest.ok()) << input.substr(0, 80);
    EXPECT_EQ(manifest.status().message().find('\n'), std::string::npos)
        << manifest.status().message();
  }
  StatusOr<Manifest> overflow = ParseManifest(inputs[0]);
  EXPECT_THAT(overflow.status().message(), HasSubstr("1e400"));
  StatusOr<Manifest> unsigned_id = ParseManifest(inputs[2]);
  EXPECT_THAT(unsigned_id.status().message(), HasSubstr("modules[0].id"));
}

TEST(ParseManifestTest, NamesThatAreNotUtf8AreWrittenNotThrown) {
  Manifest manifest;
  ManifestModule module;
  module.id = 1;
  module.name = "bad\xff\xfename";
  manifest.modules.push_back(module);
  std::string json;
  ASSERT_NO_THROW(json = ManifestToJson(manifest));
  StatusOr<Manifest> read = ParseManifest(json);
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_EQ(read->modules[0].id, 1);
}

TEST_F(ManifestTest, NumberOverflowIsSetAsideAndANewManifestWritten) {
  const std::string corrupt = R"({"format": 1, "modules": [{"id": 1e400, "name": "x"}]})";
  ASSERT_TRUE(WriteFile(ManifestPath(), corrupt).ok());
  ManifestWriter writer(dir_);
  writer.AddModule(1, "m");
  ASSERT_TRUE(writer.Write().ok());
  ASSERT_EQ(writer.warnings().size(), 1u);
  EXPECT_THAT(writer.warnings()[0], HasSubstr(ManifestPath()));
  EXPECT_THAT(writer.warnings()[0], HasSubstr("1e400"));
  EXPECT_THAT(writer.warnings()[0], HasSubstr("manifest.json.corrupt.1"));
  StatusOr<std::string> kept = ReadFile(ManifestPath() + ".corrupt.1");
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(*kept, corrupt);
  StatusOr<Manifest> read = ReadManifest(ManifestPath());
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_EQ(read->modules.size(), 1u);
}

TEST_F(ManifestTest, AManifestOverTheSizeLimitIsSetAside) {
  ASSERT_TRUE(WriteFile(ManifestPath(), std::string(4096, ' ') + "{}").ok());
  SetMaxInputBytes(1024);
  ManifestWriter writer(dir_);
  writer.AddModule(1, "m");
  Status status = writer.Write();
  SetMaxInputBytes(-1);
  ASSERT_TRUE(status.ok()) << status.message();
  ASSERT_EQ(writer.warnings().size(), 1u);
  EXPECT_THAT(writer.warnings()[0], HasSubstr("limit"));
  EXPECT_TRUE(fs::exists(ManifestPath() + ".corrupt.1"));
}

// A FIFO is never opened (that would wait for a writer) and never replaced: it is not ours.
TEST_F(ManifestTest, AFifoOrDirectoryNamedManifestIsLeftAloneWithAReason) {
  ASSERT_EQ(::mkfifo(ManifestPath().c_str(), 0644), 0);
  ManifestWriter writer(dir_);
  writer.AddModule(1, "m");
  auto start = std::chrono::steady_clock::now();
  Status status = writer.Write();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("a FIFO"));
  EXPECT_THAT(status.message(), HasSubstr("not written"));
  struct stat st;
  ASSERT_EQ(::lstat(ManifestPath().c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_FALSE(fs::exists(ManifestPath() + ".corrupt.1"));

  fs::remove(ManifestPath());
  fs::create_directory(ManifestPath());
  status = writer.Write();
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("is a directory"));
  EXPECT_TRUE(fs::is_directory(ManifestPath()));
}

// A module records the process that claimed it, and the record survives a round trip.
TEST_F(ManifestTest, AClaimRecordsItsProcess) {
  ManifestWriter writer(dir_);
  ManifestWriter::Claim claim = writer.ClaimModule("m", 1, -1, [] { return std::set<int64_t>(); });
  StatusOr<Manifest> read = ReadManifest(ManifestPath());
  ASSERT_TRUE(read.ok()) << read.status().message();
  ASSERT_EQ(read->modules.size(), 1u);
  EXPECT_EQ(read->modules[0].id, claim.id);
  EXPECT_EQ(read->modules[0].process, ::getpid());
  StatusOr<Manifest> again = ParseManifest(ManifestToJson(*read));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *read);
}

// A writer killed between writing a file and listing it: the next writer lists the file under
// its module once that process is gone, never the files of a writer still running, a temporary
// or a file of no known module.
TEST_F(ManifestTest, TheNextWriterListsTheFilesOfAWriterThatEnded) {
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);  // its id now names no process
  Manifest manifest;
  ManifestModule& dead = manifest.modules.emplace_back();
  dead.id = 1;
  dead.name = "m";
  dead.process = child;
  dead.files = {"module_0001.m.before_optimizations.txt"};
  ManifestStage stage;
  stage.step = 0;
  stage.pipeline = "p";
  stage.pass = "start";
  stage.files = {"module_0001.m.0000.p.after_pipeline-start.before_a.txt"};
  dead.stages.push_back(stage);
  ManifestModule& live = manifest.modules.emplace_back();
  live.id = 2;
  live.name = "n";
  live.process = ::getppid();  // running: the test's parent
  ASSERT_TRUE(WriteFile(ManifestPath(), ManifestToJson(manifest)).ok());
  for (const char* name : {"module_0001.m.before_optimizations.txt", "module_0001.m.0000.p.after_pipeline-start.before_a.txt",
                           "module_0001.m.0001.p.after_a.before_b.txt", "module_0002.n.before_optimizations.txt",
                           "module_0003.o.before_optimizations.txt", "module_0001.m.0002.p.after_b.txt.xlens-tmp.1.1"}) {
    ASSERT_TRUE(WriteFile((fs::path(dir_) / name).string(), "HloModule m").ok());
  }
  auto module_id_of = [](std::string_view name) -> int64_t {
    if (!name.starts_with("module_")) return -1;
    return std::stoll(std::string(name.substr(7, 4)));
  };
  ManifestWriter writer(dir_);
  std::vector<std::string> listed = writer.ListFilesOfEndedWriters(module_id_of);
  EXPECT_EQ(listed, std::vector<std::string>{"module_0001.m.0001.p.after_a.before_b.txt"});
  StatusOr<Manifest> read = ReadManifest(ManifestPath());
  ASSERT_TRUE(read.ok()) << read.status().message();
  ASSERT_EQ(read->modules.size(), 2u);
  EXPECT_EQ(read->modules[0].files,
            (std::vector<std::string>{"module_0001.m.before_optimizations.txt", "module_0001.m.0001.p.after_a.before_b.txt"}));
  EXPECT_TRUE(read->modules[1].files.empty()) << "the writer of module 2 still runs";
  // Listed once: a second pass finds nothing more.
  EXPECT_TRUE(writer.ListFilesOfEndedWriters(module_id_of).empty());
}

// Processes claiming module ids in one directory at once each get their own, and the manifest
// lists every one of them.
TEST_F(ManifestTest, ProcessesClaimingAtOnceGetDistinctIds) {
  constexpr int kProcesses = 8;
  testing::RunInProcessesAtOnce(kProcesses, [&](int p) {
    ManifestWriter writer(dir_);
    ManifestWriter::Claim claim =
        writer.ClaimModule("m" + std::to_string(p), 1, -1, [] { return std::set<int64_t>(); });
    return claim.recorded && claim.problem.empty();
  });
  StatusOr<Manifest> read = ReadManifest(ManifestPath());
  ASSERT_TRUE(read.ok()) << read.status().message();
  std::set<int64_t> ids;
  for (const ManifestModule& module : read->modules) ids.insert(module.id);
  EXPECT_EQ(ids.size(), static_cast<size_t>(kProcesses));
  EXPECT_EQ(*ids.begin(), 1);
  EXPECT_EQ(*ids.rbegin(), kProcesses);
}

TEST_F(ManifestTest, ClaimSkipsIdsOfFilesPresentAndHonoursTheModuleLimit) {
  ManifestWriter writer(dir_);
  ManifestWriter::Claim first = writer.ClaimModule("a", 1, 2, [] { return std::set<int64_t>{4}; });
  EXPECT_EQ(first.id, 5);
  EXPECT_TRUE(first.recorded);
  EXPECT_EQ(first.modules_present, 1);
  ManifestWriter::Claim second = writer.ClaimModule("b", 1, 2, [] { return std::set<int64_t>{4}; });
  EXPECT_FALSE(second.recorded) << "ids 4 and 5 already fill --xla_dump_max_hlo_modules=2";
  StatusOr<Manifest> read = ReadManifest(ManifestPath());
  ASSERT_TRUE(read.ok()) << read.status().message();
  ASSERT_EQ(read->modules.size(), 1u);
  EXPECT_EQ(read->modules[0].name, "a");
}

// Every tests/dump/testdata/broken_manifests/NAME.json fails with the message in NAME.expected.
ManifestGraph SampleGraph(int64_t process, int64_t id) {
  ManifestGraph g;
  g.process = process;
  g.id = id;
  g.name = "graph_" + std::to_string(id);
  g.stages.push_back({"mark_for_compilation", {"before_mark_for_compilation.pbtxt"}});
  g.clusters.push_back({"cluster_0", {"mul", "add", "shape"}, {"shape"}, {}});
  g.unclustered["x"] = "uncompilable: top level _Arg or _Retval";
  g.declustered["shape"] = "root shape consumer";
  return g;
}

TEST_F(ManifestTest, ClusteredGraphsRoundTripAndLinkTheirClustersToModules) {
  ManifestWriter writer(dir_);
  writer.AddModule(1, "cluster_0__XlaCompiledKernel_true_.1");
  writer.AddGraph(SampleGraph(100, 0));
  // A module compiled later attaches to the latest graph holding its cluster.
  EXPECT_TRUE(writer.AddClusterModule("cluster_0", "cluster_0__XlaCompiledKernel_true_.1"));
  EXPECT_FALSE(writer.AddClusterModule("cluster_9", "m"));
  ASSERT_TRUE(writer.Write().ok());
  auto read = ReadManifest(ManifestPath());
  ASSERT_TRUE(read.ok()) << read.status().message();
  ASSERT_EQ(read->graphs.size(), 1u);
  ManifestGraph want = SampleGraph(100, 0);
  want.clusters[0].modules = {"cluster_0__XlaCompiledKernel_true_.1"};
  EXPECT_EQ(read->graphs[0], want);
  // A second writer (another process) keeps the first one's graphs; its own replace by key.
  ManifestWriter other(dir_);
  other.AddGraph(SampleGraph(200, 0));
  ASSERT_TRUE(other.Write().ok());
  read = ReadManifest(ManifestPath());
  ASSERT_TRUE(read.ok());
  ASSERT_EQ(read->graphs.size(), 2u);
  EXPECT_EQ(read->graphs[0].process, 100);
  EXPECT_EQ(read->graphs[1].process, 200);
  // A manifest without graphs (older writers) still reads.
  auto plain = ParseManifest(R"({"format": 1, "modules": []})");
  ASSERT_TRUE(plain.ok());
  EXPECT_TRUE(plain->graphs.empty());
}

TEST(BrokenManifestsTest, EachGivesItsError) {
  fs::path dir = fs::path(XLENS_TESTDATA_DIR) / "broken_manifests";
  int checked = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    fs::path expected_path = entry.path();
    expected_path.replace_extension(".expected");
    std::string expected = xlens::testing::ReadTestFile(expected_path.string());
    while (!expected.empty() && expected.back() == '\n') expected.pop_back();
    ASSERT_FALSE(expected.empty()) << "no " << expected_path;
    StatusOr<Manifest> read = ReadManifest(entry.path().string());
    ASSERT_FALSE(read.ok()) << entry.path() << " was accepted";
    EXPECT_THAT(read.status().message(), StartsWith(entry.path().string() + ": "));
    EXPECT_THAT(read.status().message(), HasSubstr(expected)) << entry.path();
    ++checked;
  }
  EXPECT_GE(checked, 15);
}

}  // namespace
}  // namespace xlens
