// The bug bundle's reader against hostile archives (tests/dump/testdata/broken_bundles, written by
// Python's tarfile: make_corpus.py), and the bundle's pieces that need no compiler: the writer's
// choice of files, constant elision, the snapshot checksum.
#include "dump/bundle_reader.h"

#include <sys/stat.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <fstream>
#include <set>

#include <gtest/gtest.h>

#include "compiler/hlo/parser.h"
#include "compiler/support/file_io.h"
#include "dump/bug_bundle.h"
#include "dump/hlo_snapshot.h"
#include "dump/manifest.h"
#include "dump/tar_archive.h"

namespace xlens {
namespace {

namespace fs = std::filesystem;

class BundleReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveTarGz()) GTEST_SKIP() << "built without libarchive (libarchive-dev)";
    root_ = fs::temp_directory_path() /
            ("xlens_bundle_reader_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    // The reader unpacks into `parent_`; a member that escaped would land in `root_` or /tmp.
    parent_ = root_ / "unpack";
    fs::create_directories(parent_);
  }
  void TearDown() override {
    SetMaxInputBytes(kDefaultMaxInputBytes);
    fs::remove_all(root_);
  }
  std::string WriteBytes(const std::string& name, const std::string& bytes) {
    std::string path = (root_ / name).string();
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }
  std::set<std::string> Listing(const fs::path& dir) {
    std::set<std::string> out;
    for (const auto& entry : fs::recursive_directory_iterator(dir)) {
      out.insert(fs::relative(entry.path(), dir).string());
    }
    return out;
  }
  fs::path root_, parent_;
};

TEST_F(BundleReaderTest, EveryBrokenBundleIsRefusedWithOneLineAndNothingIsWrittenOutside) {
  // The bombs of the corpus expand to more than this.
  SetMaxInputBytes(int64_t{1} << 20);
  const fs::path corpus = fs::path(XLENS_TESTDATA_DIR) / "broken_bundles";
  int cases = 0;
  const std::set<std::string> outside_before = Listing(root_);
  for (const auto& entry : fs::directory_iterator(corpus)) {
    if (entry.path().extension() != ".gz") continue;
    const std::string name = entry.path().filename().string();
    const std::string stem = name.substr(0, name.size() - std::string(".tar.gz").size());
    std::string expected;
    std::getline(std::ifstream(corpus / (stem + ".expected")), expected);
    ASSERT_FALSE(expected.empty()) << stem << ".expected is missing";
    ++cases;
    StatusOr<UnpackedBundle> unpacked = UnpackBundle(entry.path().string(), parent_.string());
    ASSERT_FALSE(unpacked.ok()) << name << " was accepted";
    const std::string message = unpacked.status().message();
    EXPECT_NE(message.find(expected), std::string::npos) << name << ": " << message;
    EXPECT_NE(message.find(name), std::string::npos) << "the message names the bundle: " << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << "one line: " << message;
    // The private directory went with the failure, and nothing landed beside it.
    EXPECT_TRUE(Listing(parent_).empty()) << name << " left files behind";
    EXPECT_EQ(Listing(root_), outside_before) << name;
  }
  EXPECT_GE(cases, 18) << "the corpus is in " << corpus;
  EXPECT_FALSE(fs::exists("/tmp/xlens_bundle_escape"));
  EXPECT_FALSE(fs::exists(root_ / "xlens_bundle_escape"));
}

TEST_F(BundleReaderTest, AGoodBundleUnpacksExactlyIntoAPrivateDirectoryThatGoesAway) {
  const std::string manifest = ManifestToJson(Manifest{});
  std::string binary("\0\x01\xff\n", 4);
  auto bytes = WriteTarGz({{"manifest.json", manifest},
                           {"sub/dir/data.bin", binary},
                           {"module_0001.m.before_optimizations.txt", "HloModule m\n"}});
  ASSERT_TRUE(bytes.ok()) << bytes.status().message();
  const std::string path = WriteBytes("good.tar.gz", *bytes);
  std::string directory;
  {
    auto unpacked = UnpackBundle(path, parent_.string());
    ASSERT_TRUE(unpacked.ok()) << unpacked.status().message();
    directory = unpacked->directory.path();
    EXPECT_EQ(fs::path(directory).parent_path(), parent_);
    struct stat st {};
    ASSERT_EQ(::stat(directory.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0700u) << "only the user reads an unpacked bundle";
    EXPECT_EQ(unpacked->files.size(), 3u);
    EXPECT_EQ(*ReadFile(directory + "/sub/dir/data.bin"), binary);
    EXPECT_EQ(*ReadFile(directory + "/manifest.json"), manifest);
  }
  EXPECT_FALSE(fs::exists(directory)) << "removed when the bundle is let go";
}

TEST_F(BundleReaderTest, ABundleCutAnywhereIsOneMessage) {
  std::string big(200000, 'x');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>('a' + (i * 7919) % 26);
  auto bytes = WriteTarGz({{"manifest.json", ManifestToJson(Manifest{})}, {"big.txt", big}});
  ASSERT_TRUE(bytes.ok());
  for (int eighth = 1; eighth < 8; ++eighth) {
    const std::string path =
        WriteBytes("cut.tar.gz", bytes->substr(0, bytes->size() * eighth / 8));
    auto unpacked = UnpackBundle(path, parent_.string());
    ASSERT_FALSE(unpacked.ok()) << "cut at " << eighth << "/8";
    EXPECT_NE(unpacked.status().message().find("truncated"), std::string::npos)
        << unpacked.status().message();
    EXPECT_TRUE(Listing(parent_).empty());
  }
}

TEST_F(BundleReaderTest, MemberNames) {
  for (const char* good : {"manifest.json", "graphs/a.pbtxt", "trace/t.json", "dir/"}) {
    EXPECT_EQ(CheckBundleMemberName(good), "") << good;
  }
  for (const char* bad : {"", "/etc/passwd", "..", "a/../b", "a/./b", "a//b", "a\\b", "a\nb"}) {
    EXPECT_NE(CheckBundleMemberName(bad), "") << bad;
  }
  EXPECT_NE(CheckBundleMemberName(std::string(300, 'a')), "");
}

TEST(SnapshotChecksumTest, IsZlibsCrc32) {
  // The CRC-32 check value of the standard (as zlib.crc32(b"123456789") gives).
  EXPECT_EQ(SnapshotChecksum("123456789"), "crc32:cbf43926");
  EXPECT_EQ(SnapshotChecksum(""), "crc32:00000000");
}

TEST(ElideLargeConstantsTest, LargeConstantsBecomeXlasElisionAndStillParse) {
  const std::string text =
      "HloModule m\n\n"
      "ENTRY main {\n"
      "  big = f32[10]{0} constant({1, 2, 3, 4, 5, 6, 7, 8, 9, 10})\n"
      "  small = f32[2]{0} constant({11, 12})\n"
      "  scalar = f32[] constant(13), metadata={op_name=\" constant(14, 15, 16, 17, 18, 19, 20, "
      "21, 22)\"}\n"
      "  add = f32[2]{0} add(small, small)\n"
      "  ROOT t = (f32[10]{0}, f32[2]{0}, f32[]) tuple(big, add, scalar)\n"
      "}\n";
  const std::string elided = ElideLargeConstants(text);
  EXPECT_NE(elided.find("big = f32[10]{0} constant({...})"), std::string::npos) << elided;
  EXPECT_EQ(elided.find("9, 10"), std::string::npos);
  EXPECT_NE(elided.find("constant({11, 12})"), std::string::npos) << "small ones stay";
  EXPECT_NE(elided.find("op_name=\" constant(14, 15"), std::string::npos) << "metadata is text";
  auto module = ParseHloModule(elided, ParseOptions{.verify = true});
  ASSERT_TRUE(module.ok()) << module.status().message();
  EXPECT_TRUE((*module)->entry_computation()->GetInstructionWithName("big")->literal().is_elided());
}

TEST_F(BundleReaderTest, TheWriterTakesOnlyFilesInsideTheDumpDirectory) {
  const fs::path dump = root_ / "dump";
  fs::create_directories(dump);
  WriteBytes("secret.txt", "do not send");
  std::ofstream(dump / "module_0001.m.before_optimizations.txt") << "HloModule m\n";
  Manifest manifest;
  ManifestModule& module = manifest.modules.emplace_back();
  module.id = 1;
  module.name = "m";
  module.files = {"module_0001.m.before_optimizations.txt", "../secret.txt",
                  (root_ / "secret.txt").string(), "missing.txt"};
  // Every kernel lists the module's files again: they are taken, or reported, once.
  module.kernels.push_back({"k1", "", "", "", {}, "", "", {"missing.txt", "../secret.txt"}});
  module.kernels.push_back({"k2", "", "", "", {}, "", "", {"missing.txt"}});
  std::ofstream(dump / "manifest.json") << ManifestToJson(manifest);
  BundleOptions options;
  options.dump_dir = dump.string();
  options.output = (root_ / "b.tar.gz").string();
  auto bundle = MakeBundle(options);
  ASSERT_TRUE(bundle.ok()) << bundle.status().message();
  EXPECT_EQ(bundle->size, static_cast<int64_t>(fs::file_size(options.output)));
  std::set<std::string> names;
  for (const BundleEntry& entry : bundle->entries) names.insert(entry.name);
  EXPECT_EQ(names, (std::set<std::string>{"manifest.json", "environment.json",
                                          "module_0001.m.before_optimizations.txt"}));
  std::string dropped;
  for (const std::string& line : bundle->dropped) dropped += line + "\n";
  EXPECT_NE(dropped.find("../secret.txt (the manifest names a file outside"), std::string::npos)
      << dropped;
  EXPECT_NE(dropped.find("missing.txt"), std::string::npos) << dropped;
  EXPECT_EQ(bundle->dropped.size(), 3u) << "each once:\n" << dropped;
  // The bundle's manifest lists what it holds, nothing else.
  auto unpacked = UnpackBundle(options.output, parent_.string());
  ASSERT_TRUE(unpacked.ok()) << unpacked.status().message();
  ASSERT_EQ(unpacked->manifest.modules.size(), 1u);
  EXPECT_EQ(unpacked->manifest.modules[0].files,
            std::vector<std::string>{"module_0001.m.before_optimizations.txt"});
}

// Counts what a member's sink is given.
class CountingSink : public TarMemberSink {
 public:
  explicit CountingSink(std::string* contents) : contents_(contents) {}
  Status Write(std::string_view data) override {
    contents_->append(data);
    return OkStatus();
  }
  Status Close() override { return OkStatus(); }

 private:
  std::string* contents_;
};

TEST_F(BundleReaderTest, ExpansionIsBoundedByTheHeaderBeforeAnyDataIsExpanded) {
  auto bytes = WriteTarGz({{"manifest.json", "{}"}, {"zeros.npy", std::string(4 << 20, '\0')}});
  ASSERT_TRUE(bytes.ok());
  const std::string path = WriteBytes("bomb.tar.gz", *bytes);
  TarReadLimits limits;
  limits.max_total_bytes = int64_t{1} << 30;
  limits.max_ratio = 10;
  limits.ratio_free_bytes = 1 << 20;  // the 4 MiB member is past it, and past 10 times the archive
  std::map<std::string, std::string> opened;
  Status read = ReadTarGz(
      path, limits, [](const TarHeader&) { return OkStatus(); },
      [&](const TarHeader& header) -> StatusOr<std::unique_ptr<TarMemberSink>> {
        return std::unique_ptr<TarMemberSink>(std::make_unique<CountingSink>(&opened[header.name]));
      });
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.message().find("zeros.npy"), std::string::npos) << read.message();
  EXPECT_NE(read.message().find("10 times the archive's"), std::string::npos) << read.message();
  EXPECT_NE(read.message().find("bomb.tar.gz"), std::string::npos) << read.message();
  EXPECT_EQ(opened.count("zeros.npy"), 0u) << "refused before its data was expanded";
  EXPECT_EQ(opened["manifest.json"], "{}");
  // Under the ratio, the same archive streams through whole.
  limits.max_ratio = 0;
  opened.clear();
  read = ReadTarGz(
      path, limits, [](const TarHeader&) { return OkStatus(); },
      [&](const TarHeader& header) -> StatusOr<std::unique_ptr<TarMemberSink>> {
        return std::unique_ptr<TarMemberSink>(std::make_unique<CountingSink>(&opened[header.name]));
      });
  ASSERT_TRUE(read.ok()) << read.message();
  EXPECT_EQ(opened["zeros.npy"], std::string(4 << 20, '\0'));
}

// A few MB of bundle listing 200k modules expanded to a JSON tree past the memory (an abort, as
// the tree's own destructor ran out too): its JSON is refused by its header, before unpacking.
TEST_F(BundleReaderTest, AManifestOrEnvironmentPastTheJsonLimitIsRefusedBeforeItIsUnpacked) {
  const std::string manifest =
      "{\"format\": 1, \"modules\": []}" + std::string(kMaxBundleJsonBytes, ' ');
  auto bytes = WriteTarGz({{"manifest.json", manifest}});
  ASSERT_TRUE(bytes.ok());
  const std::string path = WriteBytes("big-json.tar.gz", *bytes);
  StatusOr<UnpackedBundle> unpacked = UnpackBundle(path, parent_.string());
  ASSERT_FALSE(unpacked.ok());
  std::string message = unpacked.status().message();
  EXPECT_NE(message.find("big-json.tar.gz: member manifest.json is "), std::string::npos) << message;
  EXPECT_NE(message.find("over the 64 MiB a bundle's JSON may be"), std::string::npos) << message;
  EXPECT_TRUE(Listing(parent_).empty()) << "refused before it was unpacked";

  // A limit the user chose replaces the JSON one: lower (environment.json too) ...
  SetMaxInputBytes(int64_t{1} << 20);
  EXPECT_EQ(MaxBundleJsonBytes(), int64_t{1} << 20);
  auto small = WriteTarGz({{"manifest.json", "{\"format\": 1, \"modules\": []}"},
                           {"environment.json", "{}" + std::string(1 << 20, ' ')}});
  ASSERT_TRUE(small.ok());
  unpacked = UnpackBundle(WriteBytes("env.tar.gz", *small), parent_.string());
  ASSERT_FALSE(unpacked.ok());
  message = unpacked.status().message();
  EXPECT_NE(message.find("env.tar.gz: member environment.json is 1.0 MiB, over the 1 MiB"), std::string::npos)
      << message;
  EXPECT_TRUE(Listing(parent_).empty());
  // ... or higher, where the same manifest is read.
  SetMaxInputBytes(int64_t{256} << 20);
  unpacked = UnpackBundle(path, parent_.string());
  ASSERT_TRUE(unpacked.ok()) << unpacked.status().message();
  EXPECT_TRUE(unpacked->manifest.modules.empty());
}

TEST_F(BundleReaderTest, TheStreamingWriterMakesWhatWriteTarGzMakesAndStopsAtItsOutputsError) {
  // Random-ish text that compresses poorly, so the output comes in many pieces.
  std::string data(4 << 20, '\0');
  uint64_t x = 1;
  for (char& c : data) c = static_cast<char>((x = x * 6364136223846793005u + 1442695040888963407u) >> 56);
  auto whole = WriteTarGz({{"manifest.json", "{}"}, {"data.bin", data}});
  ASSERT_TRUE(whole.ok());
  std::string streamed;
  int pieces = 0;
  {
    auto writer = TarGzWriter::Open([&](std::string_view piece) {
      streamed.append(piece);
      ++pieces;
      return OkStatus();
    });
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE((*writer)->Begin("manifest.json", 2).ok());
    ASSERT_TRUE((*writer)->Write("{}").ok());
    ASSERT_TRUE((*writer)->Begin("data.bin", static_cast<int64_t>(data.size())).ok());
    for (size_t at = 0; at < data.size(); at += 100000) {
      ASSERT_TRUE((*writer)->Write(std::string_view(data).substr(at, 100000)).ok());
    }
    EXPECT_FALSE((*writer)->Write("x").ok()) << "past the size the header declared";
    ASSERT_TRUE((*writer)->Close().ok());
  }
  EXPECT_EQ(streamed, *whole);
  EXPECT_GT(pieces, 10) << "handed on as it was made, not at the end";

  // An output that fails (a full disk, over --max-size) ends the writing with its error, and the
  // writer left unclosed goes without calling it again.
  int64_t taken = 0;
  auto writer = TarGzWriter::Open([&](std::string_view piece) {
    if (taken + static_cast<int64_t>(piece.size()) > (1 << 20)) return Error("the output is full");
    taken += static_cast<int64_t>(piece.size());
    return OkStatus();
  });
  ASSERT_TRUE(writer.ok());
  ASSERT_TRUE((*writer)->Begin("data.bin", static_cast<int64_t>(data.size())).ok());
  Status status = (*writer)->Write(data);
  EXPECT_EQ(status.message(), "the output is full");
  writer->reset();
}

TEST_F(BundleReaderTest, TooManyMembersAreRefusedAtTheFirstOnePastTheLimit) {
  std::vector<TarMember> members = {{"manifest.json", "{}"}};
  for (int i = 0; i < 5; ++i) members.push_back({"m" + std::to_string(i), "x"});
  auto bytes = WriteTarGz(members);
  ASSERT_TRUE(bytes.ok());
  const std::string path = WriteBytes("many.tar.gz", *bytes);
  TarReadLimits limits;
  limits.max_total_bytes = 1 << 20;
  limits.max_members = 3;
  int opened = 0;
  Status read = ReadTarGz(
      path, limits, [](const TarHeader&) { return OkStatus(); },
      [&](const TarHeader&) -> StatusOr<std::unique_ptr<TarMemberSink>> {
        ++opened;
        static std::string ignored;
        return std::unique_ptr<TarMemberSink>(std::make_unique<CountingSink>(&ignored));
      });
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.message().find("more than 3 members"), std::string::npos) << read.message();
  EXPECT_EQ(opened, 3);
}

TEST_F(BundleReaderTest, TheWriterFollowsNoLinkInTheDumpDirectory) {
  const fs::path dump = root_ / "dump";
  fs::create_directories(dump);
  fs::create_directories(root_ / "outside");
  std::ofstream(root_ / "outside" / "secret.txt") << "do not send";
  std::ofstream(dump / "module_0001.m.before_optimizations.txt") << "HloModule m\n";
  fs::create_symlink("../outside/secret.txt", dump / "linked.txt");
  fs::create_symlink("../outside", dump / "sub");
  Manifest manifest;
  ManifestModule& module = manifest.modules.emplace_back();
  module.id = 1;
  module.name = "m";
  module.files = {"module_0001.m.before_optimizations.txt", "linked.txt", "sub/secret.txt"};
  std::ofstream(dump / "manifest.json") << ManifestToJson(manifest);
  const fs::path graphs = root_ / "graphs";
  fs::create_directories(graphs);
  std::ofstream(graphs / "real.pbtxt") << "node { name: 'a' op: 'NoOp' }\n";
  fs::create_symlink("../outside/secret.txt", graphs / "stolen.pbtxt");
  BundleOptions options;
  options.dump_dir = dump.string();
  options.graphs_dir = graphs.string();
  options.output = (root_ / "b.tar.gz").string();
  auto bundle = MakeBundle(options);
  ASSERT_TRUE(bundle.ok()) << bundle.status().message();
  std::set<std::string> names;
  for (const BundleEntry& entry : bundle->entries) names.insert(entry.name);
  EXPECT_EQ(names, (std::set<std::string>{"manifest.json", "environment.json",
                                          "module_0001.m.before_optimizations.txt",
                                          "graphs/real.pbtxt"}));
  std::string dropped;
  for (const std::string& line : bundle->dropped) dropped += line + "\n";
  EXPECT_EQ(bundle->dropped.size(), 3u) << dropped;
  for (const char* name : {"linked.txt: a symbolic link", "sub/secret.txt: a symbolic link",
                           "stolen.pbtxt: a symbolic link"}) {
    EXPECT_NE(dropped.find(name), std::string::npos) << name << " in:\n" << dropped;
  }
}

TEST(ManifestExecutionsTest, RoundTrip) {
  Manifest manifest;
  ManifestModule& module = manifest.modules.emplace_back();
  module.id = 3;
  module.name = "m";
  module.invocation = {{"xlens", "run", "m.hlo"}, "cpu", "--xla_dump_to=d", ""};
  module.executions.push_back(
      {1, {{"module_0003.m.execution_0001.arg0.npy", "f32[2]", "crc32:01020304", 136}},
       {{"module_0003.m.execution_0001.out0.npy", "f32[2]", "crc32:0a0b0c0d", 136}}});
  auto parsed = ParseManifest(ManifestToJson(manifest));
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(*parsed, manifest);
  auto bad = ParseManifest(
      R"({"format": 1, "modules": [{"id": 1, "name": "m", "executions": [{"execution": 1,
          "arguments": [{"shape": "f32[2]"}]}]}]})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("modules[0].executions[0].arguments[0]: missing \"file\""),
            std::string::npos)
      << bad.status().message();
}

}  // namespace
}  // namespace xlens
