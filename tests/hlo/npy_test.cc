#include "compiler/hlo/npy.h"

#include <cmath>
#include <complex>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "compiler/support/file_io.h"
#include "scratch_directory.h"

namespace xlens {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::StartsWith;

const fs::path kFixtures = fs::path(XLENS_SOURCE_DIR) / "tests/hlo/testdata/npy";

using ::xlens::testing::FreshScratchDir;

// A literal of `type` and `dims` whose element i is i - 3 (wrapping for unsigned types,
// 1 for odd i for pred, i - 3i*j for complex).
Literal Iota(PrimitiveType type, std::vector<int64_t> dims) {
  Shape shape(type, std::move(dims));
  shape.SetDefaultLayout();
  Literal literal(shape);
  for (int64_t i = 0; i < literal.element_count(); ++i) {
    if (type == PrimitiveType::PRED) {
      literal.SetFromInt64(i, i % 2);
    } else if (IsComplexType(type)) {
      literal.SetFromComplex(i, complex128(i, -3.0 * i));
    } else if (IsFloatingPointType(type)) {
      literal.SetFromDouble(i, (i - 3) * 0.5);
    } else {
      literal.SetFromInt64(i, i - 3);
    }
  }
  return literal;
}

const PrimitiveType kSupportedTypes[] = {
    PrimitiveType::PRED, PrimitiveType::S8,  PrimitiveType::S16, PrimitiveType::S32,
    PrimitiveType::S64,  PrimitiveType::U8,  PrimitiveType::U16, PrimitiveType::U32,
    PrimitiveType::U64,  PrimitiveType::F16, PrimitiveType::F32, PrimitiveType::F64,
    PrimitiveType::C64,  PrimitiveType::C128,
};

// Every supported type as a scalar, a vector, a matrix, a rank-3 array and zero-sized arrays.
std::vector<Literal> RoundTripCases() {
  std::vector<Literal> cases;
  for (PrimitiveType type : kSupportedTypes) {
    for (std::vector<int64_t> dims : std::vector<std::vector<int64_t>>{
             {}, {7}, {2, 3}, {2, 1, 4}, {0}, {3, 0, 2}}) {
      cases.push_back(Iota(type, dims));
    }
  }
  return cases;
}

std::string CaseName(const Literal& literal) { return literal.shape().ToString(false); }

TEST(NpyTest, RoundTripsEverySupportedType) {
  for (const Literal& literal : RoundTripCases()) {
    SCOPED_TRACE(CaseName(literal));
    StatusOr<std::string> bytes = SerializeNpy(literal);
    ASSERT_TRUE(bytes.ok()) << bytes.status().message();
    StatusOr<Literal> back = ParseNpy(*bytes, "case.npy");
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_EQ(back->shape(), literal.shape());
    EXPECT_TRUE(*back == literal);
  }
}

TEST(NpyTest, WriteAndReadFiles) {
  fs::path dir = FreshScratchDir("files");
  Literal literal = Iota(PrimitiveType::F32, {4, 5});
  std::string path = (dir / "x.npy").string();
  ASSERT_TRUE(WriteNpy(path, literal).ok());
  StatusOr<Literal> back = ReadNpy(path);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_TRUE(*back == literal);

  StatusOr<Literal> missing = ReadNpy((dir / "missing.npy").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("missing.npy"));
}

TEST(NpyTest, HeaderIsFormattedAndAlignedAsNumpyWritesIt) {
  struct Case {
    PrimitiveType type;
    std::vector<int64_t> dims;
    std::string dict;
  };
  const Case cases[] = {
      {PrimitiveType::F32, {3}, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }"},
      {PrimitiveType::PRED, {}, "{'descr': '|b1', 'fortran_order': False, 'shape': (), }"},
      {PrimitiveType::F16, {2, 3}, "{'descr': '<f2', 'fortran_order': False, 'shape': (2, 3), }"},
      {PrimitiveType::S8, {1, 0}, "{'descr': '|i1', 'fortran_order': False, 'shape': (1, 0), }"},
      {PrimitiveType::C128, {5}, "{'descr': '<c16', 'fortran_order': False, 'shape': (5,), }"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.dict);
    StatusOr<std::string> bytes = SerializeNpy(Iota(c.type, c.dims));
    ASSERT_TRUE(bytes.ok());
    ASSERT_GE(bytes->size(), 10u);
    EXPECT_EQ(bytes->substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
    size_t header_length = static_cast<unsigned char>((*bytes)[8]) |
                           static_cast<unsigned char>((*bytes)[9]) << 8;
    size_t data_start = 10 + header_length;
    EXPECT_EQ(data_start % 64, 0u);
    EXPECT_EQ(bytes->substr(10, c.dict.size()), c.dict);
    EXPECT_EQ((*bytes)[data_start - 1], '\n');
    EXPECT_EQ(bytes->size() - data_start,
              static_cast<size_t>(Iota(c.type, c.dims).size_bytes()));
  }
}

TEST(NpyTest, RefusesLiteralsWithoutData) {
  const Literal refused[] = {
      Literal(Shape(PrimitiveType::F4E2M1FN, {2})),
      Literal::MakeTuple({Iota(PrimitiveType::F32, {1})}),
      Literal::CreateElided(Shape(PrimitiveType::F32, {1000})),
  };
  for (const Literal& literal : refused) {
    StatusOr<std::string> bytes = SerializeNpy(literal);
    EXPECT_FALSE(bytes.ok()) << CaseName(literal);
  }
  StatusOr<std::string> f4 = SerializeNpy(refused[0]);
  EXPECT_THAT(f4.status().message(), HasSubstr("no dtype for f4e2m1fn"));
  fs::path path = FreshScratchDir("refused") / "t.npy";
  Status write = WriteNpy(path.string(), refused[1]);
  ASSERT_FALSE(write.ok());
  EXPECT_THAT(write.message(), HasSubstr("t.npy"));
  EXPECT_FALSE(fs::exists(path));
}

// .npy has no bfloat16 (ml_dtypes' '<V2' is unreadable without it) and no 4-bit integers: they
// are written widened, exactly, so that plain numpy.load reads the same values.
TEST(NpyTest, WidensTypesWithoutADtypeExactly) {
  EXPECT_EQ(NpyStoredType(PrimitiveType::BF16), PrimitiveType::F32);
  EXPECT_EQ(NpyStoredType(PrimitiveType::S4), PrimitiveType::S8);
  EXPECT_EQ(NpyStoredType(PrimitiveType::U4), PrimitiveType::U8);
  EXPECT_EQ(NpyStoredType(PrimitiveType::F32), PrimitiveType::F32);
  EXPECT_EQ(NpyStoredType(PrimitiveType::F8E5M2), PrimitiveType::F32);
  EXPECT_EQ(NpyStoredType(PrimitiveType::F8E8M0FNU), PrimitiveType::PRIMITIVE_TYPE_INVALID);

  Literal bf16(Shape(PrimitiveType::BF16, {2, 3}));
  const double values[] = {1.5, -2.0, 3.140625, 1e30, -0.0, 65536.0};
  for (int i = 0; i < 6; ++i) bf16.SetFromDouble(i, values[i]);
  StatusOr<std::string> bytes = SerializeNpy(bf16);
  ASSERT_TRUE(bytes.ok()) << bytes.status().message();
  EXPECT_THAT(*bytes, HasSubstr("'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)"));
  StatusOr<Literal> read = ParseNpy(*bytes, "bf16.npy");
  ASSERT_TRUE(read.ok()) << read.status().message();
  ASSERT_EQ(read->shape().element_type(), PrimitiveType::F32);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(read->GetAsDouble(i), bf16.GetAsDouble(i)) << i;
  }
  EXPECT_TRUE(std::signbit(read->data<float>()[4]));

  Literal s4(Shape(PrimitiveType::S4, {3}));
  // Sub-byte integers are held one per byte.
  s4.data<int8_t>()[0] = -8;
  s4.data<int8_t>()[1] = 7;
  s4.data<int8_t>()[2] = -1;
  bytes = SerializeNpy(s4);
  ASSERT_TRUE(bytes.ok()) << bytes.status().message();
  EXPECT_THAT(*bytes, HasSubstr("'descr': '|i1'"));
  read = ParseNpy(*bytes, "s4.npy");
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_EQ(read->GetAsInt64(0), -8);
  EXPECT_EQ(read->GetAsInt64(1), 7);
  EXPECT_EQ(read->GetAsInt64(2), -1);
}

// The fixtures were written by numpy.save (see testdata/npy/make_fixtures.py).
TEST(NpyTest, ReadsFilesWrittenByNumpy) {
  struct Fixture {
    std::string file;
    PrimitiveType type;
    std::vector<int64_t> dims;
    std::vector<complex128> values;
  };
  const Fixture fixtures[] = {
      {"pred_5.npy", PrimitiveType::PRED, {5}, {1, 0, 1, 1, 0}},
      {"s8_2x3.npy", PrimitiveType::S8, {2, 3}, {-3, -2, -1, 0, 1, 2}},
      {"s16_4.npy", PrimitiveType::S16, {4}, {-2, -1, 0, 1}},
      {"s32_2x2x2.npy", PrimitiveType::S32, {2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7}},
      {"s64_scalar.npy", PrimitiveType::S64, {}, {-4611686018427387904.0}},
      {"u8_6.npy", PrimitiveType::U8, {6}, {0, 50, 100, 150, 200, 250}},
      {"u16_3.npy", PrimitiveType::U16, {3}, {65533, 65534, 65535}},
      {"u32_2.npy", PrimitiveType::U32, {2}, {0, 4294967295.0}},
      {"f16_2x3.npy", PrimitiveType::F16, {2, 3}, {0, 0.25, 0.5, 0.75, 1, 1.25}},
      {"f32_2x3.npy", PrimitiveType::F32, {2, 3}, {0, 0.5, 1, 1.5, 2, 2.5}},
      {"f64_scalar.npy", PrimitiveType::F64, {}, {3.25}},
      {"c64_3.npy", PrimitiveType::C64, {3}, {{0, 0}, {1, -1}, {2, -2}}},
      {"c128_2.npy", PrimitiveType::C128, {2}, {{1.5, -2}, {-0.25, 8}}},
      {"f32_0x3.npy", PrimitiveType::F32, {0, 3}, {}},
  };
  for (const Fixture& f : fixtures) {
    SCOPED_TRACE(f.file);
    std::string path = (kFixtures / f.file).string();
    StatusOr<Literal> literal = ReadNpy(path);
    ASSERT_TRUE(literal.ok()) << literal.status().message();
    EXPECT_EQ(literal->shape().element_type(), f.type);
    EXPECT_EQ(literal->shape().dimensions(), f.dims);
    ASSERT_EQ(literal->element_count(), static_cast<int64_t>(f.values.size()));
    for (int64_t i = 0; i < literal->element_count(); ++i) {
      EXPECT_EQ(literal->GetAsComplex(i), f.values[i]) << "element " << i;
    }
    // What xlens writes is what numpy wrote, byte for byte.
    StatusOr<std::string> original = ReadFile(path);
    ASSERT_TRUE(original.ok());
    StatusOr<std::string> written = SerializeNpy(*literal);
    ASSERT_TRUE(written.ok());
    EXPECT_EQ(*written, *original);
  }

  StatusOr<Literal> u64 = ReadNpy((kFixtures / "u64_2.npy").string());
  ASSERT_TRUE(u64.ok()) << u64.status().message();
  EXPECT_EQ(u64->data<uint64_t>()[1], UINT64_MAX);

  StatusOr<Literal> v1 = ReadNpy((kFixtures / "f32_2x3.npy").string());
  ASSERT_TRUE(v1.ok());
  for (const char* file : {"f32_2x3_v2.npy", "f32_2x3_v3.npy"}) {
    StatusOr<Literal> later = ReadNpy((kFixtures / file).string());
    ASSERT_TRUE(later.ok()) << later.status().message();
    EXPECT_TRUE(*later == *v1) << file;
  }
}

TEST(NpyTest, RefusesNumpyFilesOfUnsupportedKinds) {
  struct Refused {
    std::string file;
    std::string message;
  };
  const Refused refused[] = {
      {"fortran_f32_2x3.npy", "Fortran-order"},
      {"bigendian_f32_3.npy", "big-endian dtype '>f4'"},
      {"object_2.npy", "object arrays"},
      {"structured_2.npy", "structured dtypes"},
      {"bf16_3.npy", "'<V2'"},
  };
  for (const Refused& r : refused) {
    SCOPED_TRACE(r.file);
    std::string path = (kFixtures / r.file).string();
    StatusOr<Literal> literal = ReadNpy(path);
    ASSERT_FALSE(literal.ok());
    EXPECT_THAT(literal.status().message(), StartsWith(path + ": "));
    EXPECT_THAT(literal.status().message(), HasSubstr(r.message));
  }
}

// A version 1.0 file around `dict` (no alignment padding: the reader must not need it).
std::string V1File(const std::string& dict, const std::string& data = "") {
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(dict.size() & 0xff);
  out += static_cast<char>(dict.size() >> 8);
  return out + dict + data;
}

std::string Dict(const std::string& descr, const std::string& shape,
                 const std::string& fortran = "False") {
  return "{'descr': '" + descr + "', 'fortran_order': " + fortran + ", 'shape': " + shape +
         ", }\n";
}

TEST(NpyTest, BrokenInputsGiveOneClearError) {
  std::string good = *SerializeNpy(Iota(PrimitiveType::F32, {2, 3}));
  std::string v2_overflow("\x93NUMPY\x02\x00\xff\xff\xff\xff{}", 14);
  struct Broken {
    std::string name;
    std::string bytes;
    std::string message;
  };
  const Broken broken[] = {
      {"empty", "", "magic string"},
      {"bad_magic", "\x93NUMPZ" + good.substr(6), "magic string"},
      {"png", "\x89PNG\r\n\x1a\n", "magic string"},
      {"magic_only", std::string("\x93NUMPY\x01", 7), "ends in its magic"},
      {"version_4", std::string("\x93NUMPY\x04\x00", 8) + good.substr(8), "version 4.0"},
      {"truncated_length", std::string("\x93NUMPY\x01\x00\x10", 9), "header length"},
      {"truncated_header", good.substr(0, 40), "header is 118 bytes long but only 30"},
      {"v2_length_overflow", v2_overflow, "4294967295 bytes long"},
      {"truncated_data", good.substr(0, good.size() - 3), "truncated data"},
      {"trailing_bytes", good + "xyz", "needs 24 data bytes, but 27"},
      {"not_a_dict", V1File("[1, 2]\n"), "the header is a list, expected a dict"},
      {"not_python", V1File("descr=<f4\n"), "malformed header"},
      {"unterminated_dict", V1File("{'descr': '<f4'"), "',' or '}'"},
      {"unterminated_string", V1File("{'descr': '<f4}"), "closing quote"},
      {"missing_shape", V1File("{'descr': '<f4', 'fortran_order': False}\n"), "'shape'"},
      {"missing_descr", V1File("{'fortran_order': False, 'shape': ()}\n"), "'descr'"},
      {"extra_key", V1File("{'descr': '<f4', 'fortran_order': False, 'shape': (), 'x': 1}"),
       "unexpected header key 'x'"},
      {"duplicate_key",
       V1File("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': ()}"),
       "appears twice"},
      {"non_string_key", V1File("{1: 2}"), "header key is an integer"},
      {"fortran_order", V1File(Dict("<f4", "(2, 3)", "True"), std::string(24, '\0')),
       "Fortran-order"},
      {"fortran_not_bool", V1File(Dict("<f4", "()", "0"), std::string(4, '\0')),
       "'fortran_order' is an integer"},
      {"big_endian", V1File(Dict(">f8", "(1,)"), std::string(8, '\0')), "big-endian"},
      {"native_order", V1File(Dict("=i4", "(1,)"), std::string(4, '\0')), "native byte order"},
      {"object", V1File(Dict("|O", "(1,)"), std::string(8, '\0')), "object arrays"},
      {"unicode", V1File(Dict("<U3", "(1,)"), std::string(12, '\0')), "unsupported dtype '<U3'"},
      {"bf16", V1File(Dict("<V2", "(1,)"), std::string(2, '\0')), "bfloat16"},
      {"void", V1File(Dict("|V4", "(1,)"), std::string(4, '\0')), "opaque"},
      {"descr_not_string", V1File("{'descr': 4, 'fortran_order': False, 'shape': ()}"),
       "'descr' is an integer"},
      {"structured",
       V1File("{'descr': [('x', '<f4')], 'fortran_order': False, 'shape': (1,)}"),
       "structured dtypes"},
      {"shape_list", V1File(Dict("<f4", "[2]"), std::string(8, '\0')), "'shape' is a list"},
      {"shape_negative", V1File(Dict("<f4", "(-2,)")), "non-negative"},
      {"shape_not_int", V1File(Dict("<f4", "('2',)")), "non-negative integers"},
      {"shape_overflows", V1File(Dict("<f4", "(4294967296, 4294967296)")), "64 bits"},
      {"shape_overflow_with_zero", V1File(Dict("<f4", "(4294967296, 4294967296, 0)")),
       "64 bits"},
      {"dim_too_big", V1File(Dict("<f4", "(99999999999999999999,)")),
       "an integer that fits in 64 bits"},
      {"shape_exceeds_file", V1File(Dict("<f8", "(1099511627776,)"), "abcdefgh"),
       "truncated data"},
      {"deep_nesting", V1File(std::string(5000, '(')), "nesting"},
  };
  for (const Broken& b : broken) {
    SCOPED_TRACE(b.name);
    StatusOr<Literal> literal = ParseNpy(b.bytes, b.name + ".npy");
    ASSERT_FALSE(literal.ok());
    EXPECT_THAT(literal.status().message(), StartsWith(b.name + ".npy: "));
    EXPECT_THAT(literal.status().message(), HasSubstr(b.message));
  }
}

TEST(NpyTest, AcceptsHeaderVariantsNumpyAccepts) {
  // Python 2 long integers, no trailing comma or space, double quotes, '<' on a one-byte type.
  StatusOr<Literal> py2 = ParseNpy(
      V1File("{\"descr\":\"<u1\",\"fortran_order\":False,\"shape\":(2L,1L)}", "\x01\x02"),
      "py2.npy");
  ASSERT_TRUE(py2.ok()) << py2.status().message();
  EXPECT_EQ(py2->shape().dimensions(), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(py2->data<uint8_t>()[1], 2);

  // Bytes other than 0 and 1 in a bool array read as true.
  StatusOr<Literal> pred = ParseNpy(V1File(Dict("|b1", "(2,)"), std::string("\x00\x07", 2)),
                                    "pred.npy");
  ASSERT_TRUE(pred.ok()) << pred.status().message();
  EXPECT_EQ(pred->data<uint8_t>()[1], 1);
}

// Writes every round-trip case, has NumPy load and re-save each, and checks that NumPy read the
// values xlens wrote and saved the very same bytes.
TEST(NpyTest, NumpyReadsWhatXlensWrites) {
  if (std::system("python3 -c 'import numpy' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "python3 with numpy is not available; the committed fixtures cover reading";
  }
  fs::path dir = FreshScratchDir("numpy");
  std::vector<Literal> cases = RoundTripCases();
  for (size_t i = 0; i < cases.size(); ++i) {
    ASSERT_TRUE(WriteNpy((dir / ("case" + std::to_string(i) + ".npy")).string(), cases[i]).ok());
  }
  {
    std::ofstream script(dir / "resave.py");
    script << "import glob, numpy as np, sys\n"
              "for path in glob.glob(sys.argv[1] + '/case*.npy'):\n"
              "    np.save(path[:-4] + '.numpy', np.load(path))\n";
  }
  std::string command = "python3 " + (dir / "resave.py").string() + " " + dir.string() + " > " +
                        (dir / "log").string() + " 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0) << ReadFile((dir / "log").string()).value();
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(CaseName(cases[i]));
    std::string ours = (dir / ("case" + std::to_string(i) + ".npy")).string();
    std::string theirs = (dir / ("case" + std::to_string(i) + ".numpy.npy")).string();
    EXPECT_EQ(ReadFile(theirs).value(), ReadFile(ours).value());
    StatusOr<Literal> back = ReadNpy(theirs);
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_TRUE(*back == cases[i]);
  }
}

}  // namespace
}  // namespace xlens
