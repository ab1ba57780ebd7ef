#include "compiler/hlo/parser.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "compiler/hlo/printer.h"
#include "test_util.h"

namespace xlens {
namespace {

using ::testing::HasSubstr;
using xlens::testing::ExpectedError;
using xlens::testing::HloCorpusDir;
using xlens::testing::HloFilesIn;
using xlens::testing::ReadTestFile;

std::unique_ptr<HloModule> ParseOrDie(std::string_view text, bool verify = true) {
  auto module = ParseHloModule(text, ParseOptions{.verify = verify, .filename = "test.hlo"});
  EXPECT_TRUE(module.ok()) << module.status().message();
  return module.ok() ? std::move(module).value() : nullptr;
}

std::string ParseError(std::string_view text, bool verify = true) {
  auto module = ParseHloModule(text, ParseOptions{.verify = verify, .filename = "test.hlo"});
  EXPECT_FALSE(module.ok()) << "parsed, but should not have:\n" << text;
  return module.ok() ? "" : module.status().message();
}

// print(parse(text)) is a fixed point: printing, parsing and printing again changes nothing.
void ExpectRoundTrip(const std::string& text, const std::string& name, bool short_form) {
  auto first = ParseHloModule(text, ParseOptions{.verify = false, .filename = name});
  ASSERT_TRUE(first.ok()) << first.status().message();
  std::string printed = PrintModule(**first, PrintOptions{.short_form = short_form});
  auto second = ParseHloModule(printed, ParseOptions{.verify = false, .filename = name + " (printed)"});
  ASSERT_TRUE(second.ok()) << second.status().message() << "\n--- printed:\n" << printed;
  std::string reprinted = PrintModule(**second, PrintOptions{.short_form = short_form});
  EXPECT_EQ(printed, reprinted) << name;
}

TEST(ParserTest, LongFormPrintsBackExactly) {
  const std::string text = R"(HloModule axpy, entry_computation_layout={(f32[], f32[4]{0}, f32[4]{0})->f32[4]{0}}

ENTRY %axpy (alpha: f32[], x: f32[4], y: f32[4]) -> f32[4] {
  %alpha = f32[] parameter(0)
  %broadcast = f32[4]{0} broadcast(f32[] %alpha), dimensions={}
  %x = f32[4]{0} parameter(1)
  %multiply = f32[4]{0} multiply(f32[4]{0} %broadcast, f32[4]{0} %x), metadata={op_type="Mul" op_name="axpy/mul" source_file="axpy.py" source_line=3}
  %y = f32[4]{0} parameter(2)
  ROOT %add = f32[4]{0} add(f32[4]{0} %multiply, f32[4]{0} %y), backend_config={"outer_dimension_partitions":["2"]}
}
)";
  auto module = ParseOrDie(text);
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(PrintModule(*module), text);
}

TEST(ParserTest, ShortFormHasBareNamesAndNoMetadataButKeepsBackendConfig) {
  auto module = ParseOrDie(R"(HloModule m
ENTRY main {
  p = f32[2] parameter(0), metadata={op_name="p"}
  ROOT n = f32[2] negate(p), backend_config="x"
})");
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(PrintModule(*module, PrintOptions{.short_form = true}),
            "HloModule m, entry_computation_layout={(f32[2]{0})->f32[2]{0}}\n\n"
            "ENTRY main {\n  p = f32[2]{0} parameter(0)\n  ROOT n = f32[2]{0} negate(p), backend_config=\"x\"\n}\n");
}

TEST(ParserTest, DefaultLayoutsAreAddedAsXlaDoes) {
  auto module = ParseOrDie("HloModule m\nENTRY e {\n  ROOT p = f32[2,3] parameter(0)\n}\n");
  ASSERT_NE(module, nullptr);
  const Shape& shape = module->entry_computation()->root_instruction()->shape();
  ASSERT_TRUE(shape.has_layout());
  EXPECT_EQ(shape.layout().minor_to_major, (std::vector<int64_t>{1, 0}));
}

TEST(ParserTest, OmittedResultShapeIsInferred) {
  auto module = ParseOrDie(R"(HloModule m
max { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT m = f32[] maximum(a, b) }
ENTRY e {
  p = f32[3,5] parameter(0)
  z = f32[] constant(0)
  ROOT r = reduce(p, z), dimensions={1}, to_apply=max
})");
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(module->entry_computation()->root_instruction()->shape().ToString(), "f32[3]{0}");
}

TEST(ParserTest, NestedAnonymousOperandsBecomeInstructions) {
  auto module = ParseOrDie(R"(HloModule test
ENTRY test {
    ROOT root = add(f32[10] parameter(0), multiply(f32[10] parameter(1), f32[10] parameter(2)))
})");
  ASSERT_NE(module, nullptr);
  const HloComputation* entry = module->entry_computation();
  EXPECT_EQ(entry->instruction_count(), 5);
  EXPECT_EQ(entry->num_parameters(), 3);
  EXPECT_EQ(entry->root_instruction()->shape().ToString(), "f32[10]{0}");
  EXPECT_EQ(entry->root_instruction()->operand(1)->opcode(), HloOpcode::kMultiply);
}

TEST(ParserTest, SeveralInstructionsOnOneLineAndComments) {
  auto module = ParseOrDie(R"(HloModule m /* header */
// a comment before the computation
ENTRY e { p = f32[2] parameter(0) /* inline */ n = f32[2] negate(p) ROOT a = f32[2] abs(n) } // after
)");
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(module->entry_computation()->root_instruction()->name(), "a");
}

TEST(ParserTest, KeepsAttributesItDoesNotActOn) {
  const std::string text = R"(HloModule m, is_scheduled=true, entry_computation_layout={(f32[8]{0})->f32[8]{0}}, input_output_alias={ {}: (0, {}, must-alias) }

ENTRY %e (p: f32[8]) -> f32[8] {
  %p = f32[8]{0} parameter(0), sharding={devices=[2]0,1}, frontend_attributes={_xla_x="{a,b}"}
  ROOT %c = f32[8]{0} custom-call(f32[8]{0} %p), custom_call_target="Foo", api_version=API_VERSION_TYPED_FFI, operand_layout_constraints={f32[8]{0}}, custom_call_has_side_effect=true, backend_config="{\"k\": \"v\"}"
}
)";
  auto module = ParseOrDie(text);
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(PrintModule(*module), text);
}

TEST(ParserTest, LiteralsOfEveryKind) {
  auto module = ParseOrDie(R"(HloModule m
ENTRY e {
  a = pred[2] constant({true, false})
  b = s64[2] constant({-9223372036854775808, 9223372036854775807})
  c = u64[1] constant({18446744073709551615})
  d = f32[4] constant({-inf, inf, nan, 0.333333343})
  e = c64[2] constant({(1, -2), (0.5, 0)})
  f = f16[2] constant({65504, -0.000122070312})
  g = bf16[2] constant({1, -2.5})
  h = f32[2,2] constant({ { 1, 2 }, { 3, 4 } })
  i = f8e4m3fn[4] constant({1, 2, 3, 4})
  j = f32[0] constant({})
  ROOT t = (pred[2], s64[2], u64[1], f32[4], c64[2], f16[2], bf16[2], f32[2,2], f8e4m3fn[4], f32[0]) tuple(a, b, c, d, e, f, g, h, i, j)
})");
  ASSERT_NE(module, nullptr);
  std::string printed = PrintModule(*module);
  EXPECT_THAT(printed, HasSubstr("constant({true, false})"));
  EXPECT_THAT(printed, HasSubstr("constant({-9223372036854775808, 9223372036854775807})"));
  EXPECT_THAT(printed, HasSubstr("constant({18446744073709551615})"));
  EXPECT_THAT(printed, HasSubstr("constant({-inf, inf, nan, 0.333333343})"));
  EXPECT_THAT(printed, HasSubstr("constant({(1, -2), (0.5, 0)})"));
  EXPECT_THAT(printed, HasSubstr("constant({65504, -0.000122070312})"));
  EXPECT_THAT(printed, HasSubstr("constant({1, -2.5})"));
  EXPECT_THAT(printed, HasSubstr("constant({ { 1, 2 }, { 3, 4 } })"));
  EXPECT_THAT(printed, HasSubstr("f8e4m3fn[4]{0} constant({1, 2, 3, 4})"));
  EXPECT_THAT(printed, HasSubstr("f32[0]{0} constant({})"));
}

TEST(ParserTest, ShapesWithDynamicDimensionsTilesAndMemorySpace) {
  for (const char* text : {"f32[<=4,?,3]{2,1,0}", "s32[2,<=2,2]{2,1,0}", "f32[8,128]{1,0:T(8,128)}",
                           "s32[]{:T(128)}", "f32[4]{0:S(5)}", "(f32[2]{0}, (s32[], token[]), ())",
                           "f16[0]{0}", "c128[3]{0}", "u4[16]{0}"}) {
    auto shape = ParseShape(text);
    ASSERT_TRUE(shape.ok()) << text << ": " << shape.status().message();
    EXPECT_EQ(shape->ToString(), text);
  }
}

TEST(ParserTest, ErrorsCarryFileLineColumnAndCaret) {
  std::string message = ParseError("HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT n = f32[2] nope(p)\n}\n");
  EXPECT_THAT(message, HasSubstr("test.hlo:4:19: unknown opcode 'nope'"));
  EXPECT_THAT(message, HasSubstr("\n  ROOT n = f32[2] nope(p)\n                  ^"));
}

TEST(ParserTest, DeclaredOperandShapeMustMatch) {
  std::string message = ParseError(R"(HloModule m
ENTRY e {
  p = f32[2,2] parameter(0)
  ROOT n = f32[2,2] negate(f32[2,5] p)
})");
  EXPECT_THAT(message, HasSubstr("The declared operand shape f32[2,5]{1,0} is not compatible with "
                                 "the shape of the operand instruction f32[2,2]{1,0}."));
}

TEST(ParserTest, ShapesWhoseSizeOverflowsAreErrorsNamingTheInstruction) {
  // broadcast and iota of 2^64 elements once verified and then overran a wrapped-to-zero buffer.
  std::string error = ParseError(R"(HloModule m
ENTRY e {
  c = f32[] constant(1)
  ROOT b = f32[4294967296,4294967296] broadcast(c), dimensions={}
})", /*verify=*/false);
  EXPECT_THAT(error, HasSubstr("test.hlo:4:12: the shape of %b: f32[4294967296,4294967296] has "
                               "18446744073709551616 elements: more than fit in 64 bits"));
  error = ParseError("HloModule m\nENTRY e {\n  ROOT i = s32[4294967296,4294967296] iota(), "
                     "iota_dimension=0\n}\n");
  EXPECT_THAT(error, HasSubstr("the shape of %i: s32[4294967296,4294967296] has"));
  // The bytes overflow although the element count fits.
  error = ParseError("HloModule m\nENTRY e {\n  ROOT p = f64[1152921504606846976] parameter(0)\n}\n");
  EXPECT_THAT(error, HasSubstr("1152921504606846976 elements of 8 bytes: more bytes than fit"));
  // Each leaf fits; their sum does not.
  error = ParseError(
      "HloModule m\nENTRY e {\n  ROOT p = (f32[1152921504606846976], f32[1152921504606846976]) "
      "parameter(0)\n}\n");
  EXPECT_THAT(error, HasSubstr("hold more bytes than fit in 64 bits"));
  // Operand shapes and a zero-sized dimension next to huge ones.
  error = ParseError(
      "HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT n = f32[2] "
      "negate(f32[0,4294967296,4294967296] p)\n}\n");
  EXPECT_THAT(error, HasSubstr("its non-zero dimensions multiply to 18446744073709551616"));
  // The largest sizes that fit still parse.
  ParseOrDie("HloModule m\nENTRY e {\n  ROOT p = f32[2305843009213693951] parameter(0)\n}\n");
}

TEST(ParserTest, HundredMegabyteLineFailsQuicklyWithAShortMessage) {
  std::string text = "HloModule m\nENTRY e {\n  ROOT c = f32[2] constant({1, 2";
  text.append(100 * 1024 * 1024, ' ');
  text += "x})\n}\n";
  std::string message = ParseError(text);
  EXPECT_THAT(message, HasSubstr("test.hlo:3:"));
  EXPECT_LT(message.size(), 600u) << "the error must not echo the whole line";
}

TEST(ParserTest, BrokenInputsGiveTheirExpectedErrors) {
  auto files = HloFilesIn(std::string(XLENS_TESTDATA_DIR) + "/broken");
  ASSERT_GE(files.size(), 15u);
  for (const std::string& file : files) {
    std::string text = ReadTestFile(file);
    std::string expected = ExpectedError(text);
    ASSERT_FALSE(expected.empty()) << file << " has no '// expect error:' line";
    auto module = ParseHloModule(text, ParseOptions{.verify = true, .filename = file});
    ASSERT_FALSE(module.ok()) << file << " parsed but should not have";
    EXPECT_THAT(module.status().message(), HasSubstr(expected)) << file;
    EXPECT_THAT(module.status().message(), HasSubstr(file + ":")) << "no location in " << file;
  }
}

TEST(ParserTest, TruncatedPrefixesNeverCrash) {
  // Every prefix of a real module is either a module or a clean error.
  const std::string text = R"(HloModule m, entry_computation_layout={(f32[2,3]{1,0})->f32[3]{0}}
add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }
ENTRY e {
  p = f32[2,3]{1,0} parameter(0), metadata={op_name="p" source_line=3}
  c = f32[] constant(0)
  t = f32[3,2]{1,0} transpose(p), dimensions={1,0}
  ROOT r = f32[3]{0} reduce(t, c), dimensions={1}, to_apply=add
})";
  for (size_t n = 0; n < text.size(); ++n) {
    auto module = ParseHloModule(text.substr(0, n), ParseOptions{.filename = "prefix"});
    if (!module.ok()) {
      EXPECT_THAT(module.status().message(), HasSubstr("prefix:"));
    }
  }
}

TEST(ParserTest, GatherAndScatterAttributesOnOtherOpcodesRoundTrip) {
  // Found by the fuzzer: gather keys on a parameter used to print differently after a reparse.
  ExpectRoundTrip(R"(HloModule m
ENTRY main {
  operand = s32[3,3] parameter(0)
  ROOT indices = s32[2,2,2] parameter(1), offset_dims={}, collapsed_slice_dims={5,1},
      start_index_map={0,1}, index_vector_dim=2, slice_sizes={1, 1}, update_window_dims={0}
})", "gather_keys_on_parameter", /*short_form=*/false);
}

TEST(ParserTest, StringsWithEscapesRoundTrip) {
  // Found by the fuzzer: an escaped quote in custom_call_target was printed unescaped.
  ExpectRoundTrip(R"(HloModule m
ENTRY main {
  p = f32[2] parameter(0)
  ROOT c = f32[2] custom-call(p), custom_call_target="a\"b\\c", metadata={op_name="x\"y"}
})", "escaped_strings", /*short_form=*/false);
}

class CorpusTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = HloCorpusDir();
    if (dir_.empty()) GTEST_SKIP() << "../shared/corpus/hlo is not beside the clone";
  }
  std::string dir_;
};

TEST_F(CorpusTest, EveryModuleRoundTripsInLongAndShortForm) {
  auto files = HloFilesIn(dir_);
  auto large = HloFilesIn(dir_ + "/large");
  files.insert(files.end(), large.begin(), large.end());
  ASSERT_GE(files.size(), 70u);
  for (const std::string& file : files) {
    SCOPED_TRACE(file);
    std::string text = ReadTestFile(file);
    ExpectRoundTrip(text, file, /*short_form=*/false);
    ExpectRoundTrip(text, file, /*short_form=*/true);
  }
}

TEST_F(CorpusTest, InvalidModulesGiveTheExpectedError) {
  auto files = HloFilesIn(dir_ + "/invalid");
  ASSERT_EQ(files.size(), 10u);
  for (const std::string& file : files) {
    std::string text = ReadTestFile(file);
    std::string expected = ExpectedError(text);
    ASSERT_FALSE(expected.empty()) << file;
    auto module = ParseHloModule(text, ParseOptions{.verify = true, .filename = file});
    ASSERT_FALSE(module.ok()) << file << " parsed but should not have";
    EXPECT_THAT(module.status().message(), HasSubstr(expected)) << file;
  }
}

}  // namespace
}  // namespace xlens
