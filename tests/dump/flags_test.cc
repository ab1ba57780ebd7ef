#include "dump/flags.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace xlens {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

FlagEnvironment Env(std::string xla_flags, std::string tf_xla_flags = "",
                    std::string tf_dump_graph_prefix = "") {
  FlagEnvironment environment;
  environment.xla_flags = std::move(xla_flags);
  environment.tf_xla_flags = std::move(tf_xla_flags);
  environment.tf_dump_graph_prefix = std::move(tf_dump_graph_prefix);
  return environment;
}

StatusOr<DebugOptions> FromXlaFlags(std::string xla_flags,
                                    const std::vector<std::string>& command_line = {}) {
  return ParseDebugOptions(Env(std::move(xla_flags)), command_line);
}

std::string ErrorOf(const StatusOr<DebugOptions>& result) {
  EXPECT_FALSE(result.ok()) << "expected an error";
  return result.ok() ? "" : result.status().message();
}

TEST(FlagsTest, DefaultsMatchXla) {
  StatusOr<DebugOptions> options = ParseDebugOptions(FlagEnvironment{});
  ASSERT_TRUE(options.ok()) << options.status().message();
  EXPECT_EQ(options->xla_dump_to, "");
  EXPECT_FALSE(options->xla_dump_hlo_as_text);
  EXPECT_EQ(options->xla_dump_max_hlo_modules, -1);
  EXPECT_EQ(options->xla_backend_optimization_level, 3);
  EXPECT_EQ(options->tf_xla_min_cluster_size, 4);
  EXPECT_EQ(options->tf_xla_auto_jit_general, 0);
  EXPECT_TRUE(*options == DebugOptions{});
}

TEST(FlagsTest, ParsesTheUsualDumpCommand) {
  StatusOr<DebugOptions> options = FromXlaFlags(
      "  --xla_dump_to=/tmp/generated --xla_dump_hlo_as_text\t--xla_dump_hlo_pass_re=.*\n"
      "--xla_dump_max_hlo_modules=7 --xla_disable_hlo_passes=\"cse, dce,,fusion\" ");
  ASSERT_TRUE(options.ok()) << options.status().message();
  EXPECT_EQ(options->xla_dump_to, "/tmp/generated");
  EXPECT_TRUE(options->xla_dump_hlo_as_text);
  EXPECT_EQ(options->xla_dump_hlo_pass_re, ".*");
  EXPECT_EQ(options->xla_dump_max_hlo_modules, 7);
  EXPECT_THAT(options->xla_disable_hlo_passes, ElementsAre("cse", "dce", "fusion"));
}

TEST(FlagsTest, QuotedValuesKeepSpaces) {
  StatusOr<DebugOptions> options =
      FromXlaFlags(R"(--xla_dump_to="/tmp/a dir/x" --xla_dump_hlo_module_re='my mod.*' )"
                   R"(--xla_dump_hlo_pass_re="a\"b\\.c")");
  ASSERT_TRUE(options.ok()) << options.status().message();
  EXPECT_EQ(options->xla_dump_to, "/tmp/a dir/x");
  EXPECT_EQ(options->xla_dump_hlo_module_re, "my mod.*");
  EXPECT_EQ(options->xla_dump_hlo_pass_re, R"(a"b\.c)");
}

TEST(FlagsTest, BackslashIsLiteralInSingleQuotes) {
  StatusOr<std::vector<std::string>> tokens = SplitFlagString(R"(--a='x\y' --b=c"d)");
  ASSERT_TRUE(tokens.ok()) << tokens.status().message();
  // As XLA: a quote that does not follow "=" directly is part of the value.
  EXPECT_THAT(*tokens, ElementsAre(R"(--a=x\y)", R"(--b=c"d)"));
}

TEST(FlagsTest, BrokenQuotingIsAnError) {
  EXPECT_THAT(ErrorOf(FromXlaFlags("--xla_dump_to=\"/tmp/x")),
              HasSubstr("unterminated double quote"));
  EXPECT_THAT(ErrorOf(FromXlaFlags("--xla_dump_to='/tmp/x'y")),
              HasSubstr("expected a space after the closing quote"));
  EXPECT_THAT(ErrorOf(FromXlaFlags("--xla_dump_to=/tmp/x stray")),
              HasSubstr("expected a flag starting with --, got 'stray'"));
}

TEST(FlagsTest, BooleanForms) {
  for (const auto& [text, expected] : std::vector<std::pair<std::string, bool>>{
           {"--xla_hlo_profile", true},
           {"--xla_hlo_profile=true", true},
           {"--xla_hlo_profile=TRUE", true},
           {"--xla_hlo_profile=1", true},
           {"--xla_hlo_profile=false", false},
           {"--xla_hlo_profile=0", false},
           {"--xla_hlo_profile --xla_hlo_profile=false", false},
       }) {
    StatusOr<DebugOptions> options = FromXlaFlags(text);
    ASSERT_TRUE(options.ok()) << text << ": " << options.status().message();
    EXPECT_EQ(options->xla_hlo_profile, expected) << text;
  }
  EXPECT_THAT(ErrorOf(FromXlaFlags("--xla_hlo_profile=yes")),
              HasSubstr("--xla_hlo_profile=yes: expected true, false, 1 or 0"));
}

TEST(FlagsTest, UnknownFlagNamesTheClosestOne) {
  EXPECT_EQ(ErrorOf(FromXlaFlags("--xla_dump_too=/tmp/x")),
            "XLA_FLAGS: unknown flag --xla_dump_too; did you mean --xla_dump_to?");
  EXPECT_EQ(ErrorOf(FromXlaFlags("--xla_dump_hlo_as_txt")),
            "XLA_FLAGS: unknown flag --xla_dump_hlo_as_txt; did you mean --xla_dump_hlo_as_text?");
  EXPECT_EQ(ErrorOf(ParseDebugOptions(FlagEnvironment{}, {"--tf_xla_auto_jt=2"})),
            "command line: unknown flag --tf_xla_auto_jt; did you mean --tf_xla_auto_jit?");
  // Nothing close: no suggestion that would mislead.
  EXPECT_THAT(ErrorOf(FromXlaFlags("--completely_different")),
              HasSubstr("unknown flag --completely_different (the flags are listed by --help)"));
}

TEST(FlagsTest, UnknownTfXlaFlagGetsTensorFlowsMessage) {
  // TensorFlow 2.21 stops with "Unknown flag in TF_XLA_FLAGS: --tf_xla_no_such_flag=1" (the
  // corpus's flag_probe); the hint follows in parentheses.
  EXPECT_THAT(ErrorOf(ParseDebugOptions(Env("", "--tf_xla_no_such_flag=1"))),
              ::testing::StartsWith(
                  "Unknown flag in TF_XLA_FLAGS: --tf_xla_no_such_flag=1 (unknown flag "
                  "--tf_xla_no_such_flag"));
}

TEST(FlagsTest, ClusteringFlagsOfTensorFlow) {
  auto options = ParseDebugOptions(
      Env("", "--tf_xla_auto_jit=fusible --tf_xla_clustering_fuel=3 "
              "--tf_xla_deterministic_cluster_names --tf_xla_cluster_exclude_ops=Where"));
  ASSERT_TRUE(options.ok()) << options.status().message();
  EXPECT_EQ(options->tf_xla_auto_jit_general, 1);
  EXPECT_EQ(options->tf_xla_ops_to_cluster, "FUSIBLE");  // what "fusible" means in TensorFlow
  EXPECT_EQ(options->tf_xla_clustering_fuel, 3);
  EXPECT_TRUE(options->tf_xla_deterministic_cluster_names);
  EXPECT_EQ(options->tf_xla_cluster_exclude_ops, "Where");
  options = ParseDebugOptions(Env("", "--tf_xla_ops_to_cluster=Sin,AddV2,Exp"));
  ASSERT_TRUE(options.ok());
  EXPECT_EQ(options->tf_xla_ops_to_cluster, "Sin,AddV2,Exp");
}

TEST(FlagsTest, XlaFlagsThatXlensDoesNotImplementSayWhatToUse) {
  EXPECT_THAT(ErrorOf(FromXlaFlags("--xla_dump_hlo_as_proto")),
              HasSubstr("--xla_dump_hlo_as_proto is not supported by xlens"));
  // The flag of old TensorFlow tutorials.
  EXPECT_THAT(ErrorOf(ParseDebugOptions(FlagEnvironment{}, {"--xla_generate_hlo_graph=.*"})),
              HasSubstr("--xla_dump_hlo_pass_re"));
}

TEST(FlagsTest, FlagsInTheWrongVariableSayWhereTheyBelong) {
  EXPECT_EQ(ErrorOf(FromXlaFlags("--tf_xla_auto_jit=2")),
            "XLA_FLAGS: --tf_xla_auto_jit belongs in TF_XLA_FLAGS");
  EXPECT_EQ(ErrorOf(ParseDebugOptions(Env("", "--xla_dump_to=/x"))),
            "TF_XLA_FLAGS: --xla_dump_to belongs in XLA_FLAGS");
}

TEST(FlagsTest, BadValuesNameTheFlagAndWhatItExpects) {
  EXPECT_EQ(ErrorOf(FromXlaFlags("--xla_dump_max_hlo_modules=abc")),
            "XLA_FLAGS: --xla_dump_max_hlo_modules=abc: expected an integer");
  EXPECT_EQ(ErrorOf(FromXlaFlags("--xla_dump_max_hlo_modules=12x")),
            "XLA_FLAGS: --xla_dump_max_hlo_modules=12x: expected an integer");
  EXPECT_EQ(ErrorOf(FromXlaFlags("--xla_dump_max_hlo_modules=-2")),
            "XLA_FLAGS: --xla_dump_max_hlo_modules=-2: expected an integer >= -1");
  EXPECT_EQ(ErrorOf(FromXlaFlags("--xla_backend_optimization_level=4")),
            "XLA_FLAGS: --xla_backend_optimization_level=4: expected an integer from 0 to 3");
  EXPECT_EQ(ErrorOf(FromXlaFlags("--xla_dump_to")),
            "XLA_FLAGS: --xla_dump_to needs a value: --xla_dump_to=DIR");
  EXPECT_THAT(ErrorOf(FromXlaFlags("--xla_dump_hlo_pass_re=(")),
              HasSubstr("--xla_dump_hlo_pass_re=(: expected a regular expression"));
  EXPECT_THAT(ErrorOf(ParseDebugOptions(Env("", "--tf_xla_auto_jit=3"))),
              HasSubstr("--tf_xla_auto_jit=3: expected -1, 0, 1, 2, single-gpu(N) or fusible"));
  EXPECT_THAT(ErrorOf(ParseDebugOptions(FlagEnvironment{}, {"xla_dump_to=/x"})),
              HasSubstr("expected --name or --name=value, got 'xla_dump_to=/x'"));
  EXPECT_THAT(ErrorOf(ParseDebugOptions(FlagEnvironment{}, {"-xla_hlo_profile"})),
              HasSubstr("did you mean --xla_hlo_profile?"));
}

TEST(FlagsTest, DisableAndEnableOnlyTogetherIsAnError) {
  EXPECT_THAT(
      ErrorOf(FromXlaFlags("--xla_disable_hlo_passes=cse --xla_enable_hlo_passes_only=dce")),
      HasSubstr("--xla_disable_hlo_passes and --xla_enable_hlo_passes_only cannot be used "
                "together"));
  // Clearing one on the command line resolves it.
  StatusOr<DebugOptions> options =
      FromXlaFlags("--xla_disable_hlo_passes=cse --xla_enable_hlo_passes_only=dce",
                   {"--xla_disable_hlo_passes="});
  ASSERT_TRUE(options.ok()) << options.status().message();
  EXPECT_THAT(options->xla_enable_hlo_passes_only, ElementsAre("dce"));
}

TEST(FlagsTest, CommandLineWinsOverTheEnvironment) {
  FlagEnvironment environment =
      Env("--xla_dump_to=/env --xla_backend_optimization_level=1", "--tf_xla_min_cluster_size=10");
  StatusOr<DebugOptions> options =
      ParseDebugOptions(environment, {"--xla_dump_to=/cli", "--tf_xla_min_cluster_size=2"});
  ASSERT_TRUE(options.ok()) << options.status().message();
  EXPECT_EQ(options->xla_dump_to, "/cli");
  EXPECT_EQ(options->tf_xla_min_cluster_size, 2);
  EXPECT_EQ(options->xla_backend_optimization_level, 1);
}

TEST(FlagsTest, TensorFlowFlags) {
  StatusOr<DebugOptions> options = ParseDebugOptions(
      Env("", "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit --tf_xla_clustering_debug",
          "/tmp/generated"));
  ASSERT_TRUE(options.ok()) << options.status().message();
  EXPECT_EQ(options->tf_xla_auto_jit_general, 2);
  EXPECT_EQ(options->tf_xla_auto_jit_single_gpu, 2);
  EXPECT_TRUE(options->tf_xla_cpu_global_jit);
  EXPECT_TRUE(options->tf_xla_clustering_debug);
  EXPECT_EQ(options->tf_dump_graph_prefix, "/tmp/generated");

  options = ParseDebugOptions(Env("", "--tf_xla_auto_jit=single-gpu(1)"));
  ASSERT_TRUE(options.ok()) << options.status().message();
  EXPECT_EQ(options->tf_xla_auto_jit_general, 0);
  EXPECT_EQ(options->tf_xla_auto_jit_single_gpu, 1);

  options = ParseDebugOptions(Env("", "--tf_xla_auto_jit=fusible"));
  ASSERT_TRUE(options.ok()) << options.status().message();
  EXPECT_TRUE(options->tf_xla_auto_jit_fusible_only);
  EXPECT_EQ(options->tf_xla_auto_jit_general, 1);
}

TEST(FlagsTest, AValueThatIsNotAFlagNamesAFileOfFlags) {
  std::string path = (std::filesystem::temp_directory_path() /
                      ("xlens_flags_test_" + std::to_string(::getpid()) + ".txt"))
                         .string();
  {
    std::ofstream out(path);
    out << "--xla_dump_to=/tmp/from_file\n--xla_dump_hlo_as_dot\n";
  }
  StatusOr<DebugOptions> options = FromXlaFlags("  " + path);
  std::filesystem::remove(path);
  ASSERT_TRUE(options.ok()) << options.status().message();
  EXPECT_EQ(options->xla_dump_to, "/tmp/from_file");
  EXPECT_TRUE(options->xla_dump_hlo_as_dot);
  EXPECT_THAT(ErrorOf(FromXlaFlags("/nonexistent/flags.txt")),
              HasSubstr("XLA_FLAGS=/nonexistent/flags.txt: /nonexistent/flags.txt: cannot open"));
}

// A flags file in a fresh temporary directory, removed with it.
class FlagsFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "xlens_flags_file_XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& contents) {
    std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary) << contents;
    return path;
  }
  std::string dir_;
};

TEST_F(FlagsFileTest, ErrorsNameTheFileAndTheLine) {
  std::string path = Write("flags.txt", "--xla_dump_to=d\n\n  --xla_dump_hlo_as_txt --xla_hlo_profile\n");
  EXPECT_EQ(ErrorOf(FromXlaFlags(path)),
            path + ":3: unknown flag --xla_dump_hlo_as_txt; did you mean --xla_dump_hlo_as_text?");
  path = Write("words.txt", "--xla_dump_to=d\nnot-a-flag\n--xla_nope=1\n");
  EXPECT_EQ(ErrorOf(FromXlaFlags(path)),
            path + ":2: expected a flag starting with --, got 'not-a-flag'");
  path = Write("value.txt", "--xla_hlo_profile\r\n--xla_dump_max_hlo_modules=many\r\n");
  EXPECT_EQ(ErrorOf(FromXlaFlags(path)),
            path + ":2: --xla_dump_max_hlo_modules=many: expected an integer");
  // A quoted value may span lines; the error names the line its flag starts on.
  path = Write("quote.txt", "--xla_hlo_profile\n--xla_dump_to=\"a\nb\n");
  EXPECT_THAT(ErrorOf(FromXlaFlags(path)), HasSubstr(path + ":2: unterminated double quote"));
  path = Write("tf.txt", "--tf_xla_auto_jit=2\n--tf_xla_frobnicate=1\n");
  EXPECT_THAT(ErrorOf(ParseDebugOptions(Env("", path))),
              HasSubstr(path + ":2: unknown flag --tf_xla_frobnicate"));
  // In the variable itself there are no lines to count.
  EXPECT_EQ(ErrorOf(FromXlaFlags("--xla_hlo_profile\n--xla_nope")),
            "XLA_FLAGS: unknown flag --xla_nope (the flags are listed by --help)");
}

// XLA stops when it cannot open the file XLA_FLAGS names; what fopen opens but is no file of
// flags (a directory reads as nothing, a FIFO waits for a writer, /dev/zero never ends) is
// refused too, before anything blocks.
TEST_F(FlagsFileTest, APathThatIsNotARegularFileIsAnError) {
  std::filesystem::create_directory(dir_ + "/flagsdir");
  EXPECT_THAT(ErrorOf(FromXlaFlags(dir_ + "/flagsdir")),
              HasSubstr("XLA_FLAGS=" + dir_ + "/flagsdir: " + dir_ + "/flagsdir: is a directory"));
  ASSERT_EQ(::mkfifo((dir_ + "/fifo").c_str(), 0600), 0);
  EXPECT_THAT(ErrorOf(FromXlaFlags(dir_ + "/fifo")), HasSubstr("not a regular file"));
  EXPECT_THAT(ErrorOf(FromXlaFlags("/dev/zero")), HasSubstr("not a regular file"));
  EXPECT_THAT(ErrorOf(ParseDebugOptions(Env("", dir_))), HasSubstr("TF_XLA_FLAGS=" + dir_ + ": "));
  // Every one says why a path was read at all.
  EXPECT_THAT(ErrorOf(FromXlaFlags(dir_)),
              HasSubstr("a value that does not start with \"--\" is read as the name of a file"));
}

TEST_F(FlagsFileTest, ValuesInMessagesAreEscapedAndCutToOneLine) {
  EXPECT_EQ(ErrorOf(FromXlaFlags("--xla_dump_max_hlo_modules=\x1b[2J")),
            "XLA_FLAGS: --xla_dump_max_hlo_modules=\\x1b[2J: expected an integer");
  EXPECT_THAT(ErrorOf(FromXlaFlags("--xla_\x07nope")),
              HasSubstr("XLA_FLAGS: unknown flag --xla_\\x07nope"));
  std::string path = Write("escape.txt", "--xla_hlo_profile=\xff\x9b" "1m\n");
  EXPECT_EQ(ErrorOf(FromXlaFlags(path)),
            path + ":1: --xla_hlo_profile=\\xff\\x9b1m: expected true, false, 1 or 0");
  for (const std::string& flags :
       {"--xla_hlo_profile=" + std::string(100000, 'y'),
        "--xla_dump_to=\"" + std::string(100000, 'q'), std::string(100000, 'z'),
        "--" + std::string(100000, 'n'), "--xla_dump_hlo_pass_re=" + std::string(50000, '(')}) {
    std::string message = ErrorOf(FromXlaFlags(flags));
    // A path is shown as its start and end (DisplayPath), a value as its start.
    EXPECT_LT(message.size(), 700u) << message.substr(0, 700);
    EXPECT_EQ(message.find('\n'), std::string::npos);
  }
  std::string long_name = Write(std::string(200, 'f') + ".txt", "\n--xla_dump_to\x1b=d --xla_x\n");
  std::string message = ErrorOf(FromXlaFlags(long_name));
  EXPECT_THAT(message, HasSubstr(":2: unknown flag --xla_dump_to\\x1b"));
  EXPECT_LT(message.size(), 400u) << message;
}

TEST(FlagsTest, RegexFlagsTakeRe2PatternsAndSayWhyOneIsBad) {
  EXPECT_EQ(ErrorOf(FromXlaFlags("--xla_dump_hlo_module_re=(a)\\1")),
            "XLA_FLAGS: --xla_dump_hlo_module_re=(a)\\1: expected a regular expression (RE2 "
            "syntax): invalid escape sequence: \\1");
  EXPECT_EQ(ErrorOf(ParseDebugOptions(FlagEnvironment{}, {"--xla_dump_hlo_pass_re=("})),
            "command line: --xla_dump_hlo_pass_re=(: expected a regular expression (RE2 syntax): "
            "missing )");
  // RE2 syntax that std::regex refused.
  StatusOr<DebugOptions> options = FromXlaFlags("--xla_dump_hlo_pass_re=(?P<p>fusion)|\\pL+-inliner");
  ASSERT_TRUE(options.ok()) << options.status().message();
  // Deep nesting is checked without recursion (std::regex overflowed the stack here).
  std::string nested = std::string(20000, '(') + "a" + std::string(20000, ')');
  StatusOr<DebugOptions> deep = ParseDebugOptions(FlagEnvironment{}, {"--xla_dump_hlo_pass_re=" + nested});
  if (!deep.ok()) EXPECT_LT(deep.status().message().size(), 400u);
}

TEST(FlagsTest, ReadsTheProcessEnvironment) {
  ::setenv("XLA_FLAGS", "--xla_dump_to=/tmp/env_dump --xla_dump_include_timestamp", 1);
  ::setenv("TF_XLA_FLAGS", "--tf_xla_auto_jit=1", 1);
  ::setenv("TF_DUMP_GRAPH_PREFIX", "/tmp/graphs", 1);
  StatusOr<DebugOptions> options = DebugOptionsFromEnvironment({"--xla_hlo_profile"});
  ::unsetenv("XLA_FLAGS");
  ::unsetenv("TF_XLA_FLAGS");
  ::unsetenv("TF_DUMP_GRAPH_PREFIX");
  ASSERT_TRUE(options.ok()) << options.status().message();
  EXPECT_EQ(options->xla_dump_to, "/tmp/env_dump");
  EXPECT_TRUE(options->xla_dump_include_timestamp);
  EXPECT_TRUE(options->xla_hlo_profile);
  EXPECT_EQ(options->tf_xla_auto_jit_general, 1);
  EXPECT_EQ(options->tf_dump_graph_prefix, "/tmp/graphs");
}

TEST(FlagsTest, HelpListsEveryFlagWithDefaultAndMeaning) {
  std::string help = FlagsHelp();
  for (const char* name :
       {"xla_dump_to", "xla_dump_hlo_as_text", "xla_dump_hlo_as_dot", "xla_dump_hlo_as_html",
        "xla_dump_hlo_pass_re", "xla_dump_hlo_module_re", "xla_dump_include_timestamp",
        "xla_dump_max_hlo_modules", "xla_hlo_profile", "xla_disable_hlo_passes",
        "xla_enable_hlo_passes_only", "xla_backend_optimization_level", "xla_gpu_dump_llvmir",
        "tf_xla_auto_jit", "tf_xla_cpu_global_jit", "tf_xla_min_cluster_size",
        "tf_xla_clustering_debug", "TF_DUMP_GRAPH_PREFIX"}) {
    EXPECT_THAT(help, HasSubstr(name)) << name;
  }
  for (const FlagInfo& flag : AllFlags()) {
    EXPECT_THAT(help, HasSubstr("--" + flag.name + "=")) << flag.name;
    EXPECT_THAT(help, HasSubstr(flag.help)) << flag.name;
    EXPECT_FALSE(flag.help.empty()) << flag.name;
  }
  EXPECT_THAT(help, HasSubstr("--xla_dump_max_hlo_modules=-1"));
  EXPECT_THAT(help, HasSubstr("--tf_xla_min_cluster_size=4"));
  EXPECT_THAT(help, HasSubstr("--xla_backend_optimization_level=3"));
}

TEST(FlagsTest, OptionsPrintAsFlagsThatParseBack) {
  DebugOptions options;
  options.xla_dump_to = "/tmp/with space";
  options.xla_dump_hlo_as_html = true;
  options.xla_dump_hlo_pass_re = "a\"b";
  options.xla_enable_hlo_passes_only = {"cse", "dce"};
  options.xla_dump_max_hlo_modules = 3;
  options.tf_xla_auto_jit = "2";
  options.tf_xla_auto_jit_general = 2;
  options.tf_xla_auto_jit_single_gpu = 2;
  options.tf_xla_min_cluster_size = 1;
  FlagStrings flags = DebugOptionsToFlags(options);
  EXPECT_EQ(flags.tf_xla_flags, "--tf_xla_auto_jit=2 --tf_xla_min_cluster_size=1");
  StatusOr<DebugOptions> parsed = ParseDebugOptions(Env(flags.xla_flags, flags.tf_xla_flags));
  ASSERT_TRUE(parsed.ok()) << parsed.status().message() << "\n" << flags.xla_flags;
  EXPECT_TRUE(*parsed == options) << flags.xla_flags;
  EXPECT_EQ(DebugOptionsToFlags(DebugOptions{}).xla_flags, "");
}

TEST(FlagsTest, IsDebugFlagPicksOutXlaAndTfFlags) {
  EXPECT_TRUE(IsDebugFlag("--xla_dump_to=/x"));
  EXPECT_TRUE(IsDebugFlag("--tf_xla_auto_jit=2"));
  EXPECT_FALSE(IsDebugFlag("--backend=cpu"));
  EXPECT_FALSE(IsDebugFlag("xla_dump_to"));
}

TEST(FlagsTest, EditDistance) {
  EXPECT_EQ(EditDistance("xla_dump_too", "xla_dump_to"), 1);
  EXPECT_EQ(EditDistance("", "abc"), 3);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3);
}

}  // namespace
}  // namespace xlens
