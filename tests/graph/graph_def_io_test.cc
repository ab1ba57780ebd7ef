// GraphDef I/O against what TensorFlow 2.21 wrote: every graph and dump of the corpus reads,
// and writes back as the same protocol buffer message (compared field by field with protobuf's
// MessageDifferencer against the file parsed straight into the generated message); broken files
// give one line that names the file and what is wrong.

#include "compiler/graph/graph_def_io.h"

#include <google/protobuf/text_format.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include <complex>
#include <filesystem>
#include <string>
#include <vector>

#include "compiler/graph/proto/graph.pb.h"
#include "compiler/support/file_io.h"

namespace xlens::graph {
namespace {

namespace fs = std::filesystem;
namespace pb = ::google::protobuf;

const std::string kCorpus = std::string(XLENS_SHARED_DIR) + "/corpus/tf";
const std::string kBroken = std::string(XLENS_TESTDATA_DIR) + "/broken_graphdefs";

// `encapsulate_fdef_<cluster>.pbtxt` holds a FunctionDef; every other dump a GraphDef.
bool IsFunctionDefDump(const fs::path& path) {
  const std::string name = path.filename().string();
  return name.rfind("encapsulate_fdef_", 0) == 0 && name.rfind("encapsulate_fdef_graph_", 0) != 0;
}

std::vector<fs::path> CorpusFiles() {
  std::vector<fs::path> files;
  if (!fs::is_directory(kCorpus)) return files;
  for (const auto& entry : fs::recursive_directory_iterator(kCorpus)) {
    if (!entry.is_regular_file() || entry.path().extension() != ".pbtxt") continue;
    const std::string name = entry.path().filename().string();
    const bool in_dump = entry.path().parent_path().filename() == "tf_dump";
    if (in_dump || name.rfind("graph", 0) == 0) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string Diff(const pb::Message& a, const pb::Message& b) {
  std::string report;
  pb::util::MessageDifferencer differ;
  differ.ReportDifferencesToString(&report);
  differ.Compare(a, b);
  return report.substr(0, 2000);
}

// The file as TensorFlow's message, parsed by protobuf alone, is what our export must equal.
template <typename Message, typename Struct>
void CheckRoundTrip(const fs::path& path, const std::string& text,
                    StatusOr<Struct> (*parse)(std::string_view, GraphDefFormat, const std::string&,
                                              const GraphDefReadOptions&),
                    StatusOr<std::string> (*serialize)(const Struct&, GraphDefFormat)) {
  SCOPED_TRACE(path.string());
  Message original;
  ASSERT_TRUE(pb::TextFormat::ParseFromString(text, &original));

  auto parsed = parse(text, GraphDefFormat::kText, path.string(), {});
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();

  // Text: export equals the original message, and a second round is a fixed point.
  auto out_text = serialize(*parsed, GraphDefFormat::kText);
  ASSERT_TRUE(out_text.ok()) << out_text.status().message();
  Message exported;
  ASSERT_TRUE(pb::TextFormat::ParseFromString(*out_text, &exported));
  EXPECT_TRUE(pb::util::MessageDifferencer::Equals(original, exported)) << Diff(original, exported);
  auto again = parse(*out_text, GraphDefFormat::kText, "again", {});
  ASSERT_TRUE(again.ok()) << again.status().message();
  auto again_text = serialize(*again, GraphDefFormat::kText);
  ASSERT_TRUE(again_text.ok());
  EXPECT_EQ(*again_text, *out_text);
  // TensorFlow's C++ dumps are printed by the same TextFormat printer: byte for byte.
  if (path.parent_path().filename() == "tf_dump") {
    EXPECT_EQ(*out_text, text);
  }

  // Binary: the same.
  auto out_binary = serialize(*parsed, GraphDefFormat::kBinary);
  ASSERT_TRUE(out_binary.ok()) << out_binary.status().message();
  Message from_binary;
  ASSERT_TRUE(from_binary.ParseFromString(*out_binary));
  EXPECT_TRUE(pb::util::MessageDifferencer::Equals(original, from_binary))
      << Diff(original, from_binary);
  auto reparsed = parse(*out_binary, GraphDefFormat::kBinary, "binary", {});
  ASSERT_TRUE(reparsed.ok()) << reparsed.status().message();
  auto binary_again = serialize(*reparsed, GraphDefFormat::kBinary);
  ASSERT_TRUE(binary_again.ok());
  EXPECT_EQ(*binary_again, *out_binary);
}

TEST(GraphDefIoTest, EveryCorpusGraphRoundTrips) {
  const auto files = CorpusFiles();
  if (files.empty()) GTEST_SKIP() << "no TensorFlow corpus at " << kCorpus;
  int graphs = 0, functions = 0;
  for (const auto& path : files) {
    auto text = ReadFile(path.string());
    ASSERT_TRUE(text.ok()) << text.status().message();
    if (IsFunctionDefDump(path)) {
      CheckRoundTrip<tfproto::FunctionDef, FunctionDef>(path, *text, &ParseFunctionDef,
                                                        &SerializeFunctionDef);
      ++functions;
    } else {
      CheckRoundTrip<tfproto::GraphDef, GraphDef>(path, *text, &ParseGraphDef, &SerializeGraphDef);
      ++graphs;
    }
    if (HasFatalFailure()) return;
  }
  EXPECT_GT(graphs, 500);
  EXPECT_GT(functions, 40);
}

TEST(GraphDefIoTest, ReadsByExtensionAndContent) {
  const auto files = CorpusFiles();
  if (files.empty()) GTEST_SKIP() << "no TensorFlow corpus at " << kCorpus;
  const fs::path source = files.front();
  auto graph = ReadGraphDef(source.string());
  ASSERT_TRUE(graph.ok()) << graph.status().message();
  EXPECT_FALSE(graph->node.empty());

  const fs::path dir = fs::temp_directory_path() / ("graph_def_io_test_" + std::to_string(getpid()));
  fs::create_directories(dir);
  for (const char* name : {"g.pb", "g.pbtxt", "g.unknown_extension", "binary_named.pbtxt"}) {
    const std::string path = (dir / name).string();
    const GraphDefFormat format = std::string(name) == "binary_named.pbtxt" ? GraphDefFormat::kBinary
                                                                          : GraphDefFormat::kAuto;
    ASSERT_TRUE(WriteGraphDef(path, *graph, format).ok()) << name;
    auto back = ReadGraphDef(path, format);
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_EQ(back->node.size(), graph->node.size());
    EXPECT_EQ(*SerializeGraphDef(*back, GraphDefFormat::kText),
              *SerializeGraphDef(*graph, GraphDefFormat::kText));
  }
  // kAuto picks by extension: .pb is binary, an unknown extension is written as text.
  EXPECT_EQ(SniffGraphDefFormat(*ReadFile((dir / "g.pb").string())), GraphDefFormat::kBinary);
  EXPECT_EQ(SniffGraphDefFormat(*ReadFile((dir / "g.unknown_extension").string())),
            GraphDefFormat::kText);
  fs::remove_all(dir);
}

// `bytes` as gzip writes them (one member).
std::string Gzip(const std::string& bytes) {
  z_stream stream{};
  EXPECT_EQ(deflateInit2(&stream, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&stream, bytes.size()) + 64, '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  stream.avail_in = static_cast<uInt>(bytes.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&stream, Z_FINISH), Z_STREAM_END);
  out.resize(stream.total_out);
  deflateEnd(&stream);
  return out;
}

TEST(GraphDefIoTest, GzippedGraphDefsReadAsTheirInnerFormat) {
  const std::string text = R"(node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "y" op: "Neg" input: "x" attr { key: "T" value { type: DT_FLOAT } } })";
  auto plain = ParseGraphDef(text, GraphDefFormat::kText, "g.pbtxt");
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  const std::string binary = *SerializeGraphDef(*plain, GraphDefFormat::kBinary);
  const fs::path dir = fs::temp_directory_path() / ("graph_def_gz_test_" + std::to_string(getpid()));
  fs::create_directories(dir);
  // Text and binary, named as kept (x.pbtxt.gz, x.pb.gz) or not named gzip at all.
  const std::vector<std::pair<std::string, std::string>> files = {
      {"g.pbtxt.gz", Gzip(text)}, {"g.pb.gz", Gzip(binary)}, {"g.pb", Gzip(binary)},
      {"two_members.pb.gz", Gzip(binary.substr(0, 10)) + Gzip(binary.substr(10))}};
  for (const auto& [name, bytes] : files) {
    ASSERT_TRUE(WriteFile((dir / name).string(), bytes).ok());
    auto read = ReadGraphDef((dir / name).string());
    ASSERT_TRUE(read.ok()) << name << ": " << read.status().message();
    EXPECT_EQ(*SerializeGraphDef(*read, GraphDefFormat::kText),
              *SerializeGraphDef(*plain, GraphDefFormat::kText)) << name;
  }
  // Cut short, corrupt, and a bomb past the input limit: one line naming the file.
  const std::string gz = Gzip(binary);
  std::string corrupt = gz;
  corrupt[corrupt.size() / 2] ^= 0x5a;
  ASSERT_TRUE(WriteFile((dir / "cut.pb.gz").string(), gz.substr(0, gz.size() - 12)).ok());
  ASSERT_TRUE(WriteFile((dir / "corrupt.pb.gz").string(), corrupt).ok());
  ASSERT_TRUE(WriteFile((dir / "bomb.pb.gz").string(), Gzip(std::string(8 << 20, '\n'))).ok());
  for (const char* name : {"cut.pb.gz", "corrupt.pb.gz"}) {
    auto read = ReadGraphDef((dir / name).string());
    ASSERT_FALSE(read.ok()) << name;
    EXPECT_NE(read.status().message().find(name), std::string::npos) << read.status().message();
    EXPECT_NE(read.status().message().find("gzip"), std::string::npos) << read.status().message();
  }
  SetMaxInputBytes(1 << 20);
  auto bomb = ReadGraphDef((dir / "bomb.pb.gz").string());
  SetMaxInputBytes(kDefaultMaxInputBytes);
  ASSERT_FALSE(bomb.ok());
  EXPECT_NE(bomb.status().message().find("inflates past 1048576 bytes"), std::string::npos)
      << bomb.status().message();
  fs::remove_all(dir);
}

// ---- TensorProto: TensorFlow's rules (tensor_util.make_ndarray / Tensor::FromProto) ----------

StatusOr<Tensor> TensorFromText(const std::string& text, const GraphDefReadOptions& options = {}) {
  tfproto::TensorProto proto;
  if (!pb::TextFormat::ParseFromString(text, &proto)) return Status::Error("bad test text");
  return TensorFromProto(proto.SerializeAsString(), "node 'c' (Const)", options);
}

TEST(GraphDefIoTest, ShortValueListRepeatsItsLastValue) {
  // tf.make_ndarray of this proto is [1, 2, 2, 2, 2].
  auto t = TensorFromText("dtype: DT_FLOAT tensor_shape { dim { size: 5 } } float_val: 1 float_val: 2");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(std::vector<float>(t->flat<float>().begin(), t->flat<float>().end()),
            (std::vector<float>{1, 2, 2, 2, 2}));
  // A Const of shape [1000] with one value, as tf.fill and tf.ones write them.
  auto ones = TensorFromText("dtype: DT_FLOAT tensor_shape { dim { size: 1000 } } float_val: 1");
  ASSERT_TRUE(ones.ok());
  for (float v : ones->flat<float>()) ASSERT_EQ(v, 1.0f);
}

TEST(GraphDefIoTest, EmptyValueListIsZeros) {
  auto t = TensorFromText("dtype: DT_INT32 tensor_shape { dim { size: 3 } }");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->AsInt64Vector(), (std::vector<int64_t>{0, 0, 0}));
}

TEST(GraphDefIoTest, EveryStoredDtypeReads) {
  // Expected values: what tf.make_ndarray returns for the same protos.
  auto half = TensorFromText("dtype: DT_HALF tensor_shape { dim { size: 3 } } half_val: 15360");
  ASSERT_TRUE(half.ok());
  EXPECT_EQ(half->flat<uint16_t>()[2], 0x3c00);  // 1.0 in binary16
  auto bf16 = TensorFromText("dtype: DT_BFLOAT16 tensor_shape { } half_val: 16256");
  ASSERT_TRUE(bf16.ok());
  EXPECT_EQ(bf16->GetAsDouble(0), 1.0);
  auto c64 = TensorFromText(
      "dtype: DT_COMPLEX64 tensor_shape { dim { size: 2 } } scomplex_val: 1 scomplex_val: 2");
  ASSERT_TRUE(c64.ok());
  EXPECT_EQ(c64->flat<std::complex<float>>()[1], std::complex<float>(1, 2));
  auto c128 = TensorFromText("dtype: DT_COMPLEX128 tensor_shape { } dcomplex_val: 3 dcomplex_val: -4");
  ASSERT_TRUE(c128.ok());
  EXPECT_EQ(c128->flat<std::complex<double>>()[0], std::complex<double>(3, -4));
  auto s = TensorFromText("dtype: DT_STRING tensor_shape { dim { size: 3 } } string_val: \"a\"");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->strings(), (std::vector<std::string>{"a", "a", "a"}));
  auto b = TensorFromText("dtype: DT_BOOL tensor_shape { dim { size: 2 } } bool_val: true bool_val: false");
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(b->flat<bool>()[0]);
  EXPECT_FALSE(b->flat<bool>()[1]);
  auto i8 = TensorFromText("dtype: DT_INT8 tensor_shape { dim { size: 2 } } int_val: -5 int_val: 7");
  ASSERT_TRUE(i8.ok());
  EXPECT_EQ(i8->AsInt64Vector(), (std::vector<int64_t>{-5, 7}));
  auto u64 = TensorFromText("dtype: DT_UINT64 tensor_shape { } uint64_val: 18446744073709551615");
  ASSERT_TRUE(u64.ok());
  EXPECT_EQ(u64->flat<uint64_t>()[0], UINT64_MAX);
  auto i64 = TensorFromText("dtype: DT_INT64 tensor_shape { dim { size: 2 } } "
                            "tensor_content: \"\\001\\000\\000\\000\\000\\000\\000\\000"
                            "\\376\\377\\377\\377\\377\\377\\377\\377\"");
  ASSERT_TRUE(i64.ok()) << i64.status().message();
  EXPECT_EQ(i64->AsInt64Vector(), (std::vector<int64_t>{1, -2}));
  auto handle = TensorFromText(
      "dtype: DT_RESOURCE tensor_shape { } resource_handle_val { device: \"/cpu:0\" container: "
      "\"c\" name: \"v\" dtypes_and_shapes { dtype: DT_FLOAT shape { dim { size: 2 } } } }");
  ASSERT_TRUE(handle.ok()) << handle.status().message();
  EXPECT_EQ(handle->handle().name, "v");
  EXPECT_EQ(handle->handle().dtype, DT_FLOAT);
  EXPECT_EQ(handle->handle().shape, PartialShape({2}));
}

TEST(GraphDefIoTest, TensorsMadeInCodeAreWrittenAsTensorFlowWritesThem) {
  // tf.make_tensor_proto([[1., 2.], [3., 4.]]) and tf.make_tensor_proto(3.0).
  auto matrix = TensorToProto(Tensor::Vector<float>(DT_FLOAT, {1, 2, 3, 4}).Reshaped({2, 2}));
  ASSERT_TRUE(matrix.ok());
  tfproto::TensorProto m;
  ASSERT_TRUE(m.ParseFromString(*matrix));
  tfproto::TensorProto expected_m;
  ASSERT_TRUE(pb::TextFormat::ParseFromString(
      "dtype: DT_FLOAT tensor_shape { dim { size: 2 } dim { size: 2 } } "
      "tensor_content: \"\\000\\000\\200?\\000\\000\\000@\\000\\000@@\\000\\000\\200@\"",
      &expected_m));
  EXPECT_TRUE(pb::util::MessageDifferencer::Equals(m, expected_m)) << Diff(m, expected_m);

  auto scalar = TensorToProto(Tensor::Scalar<float>(DT_FLOAT, 3.0f));
  ASSERT_TRUE(scalar.ok());
  tfproto::TensorProto sc, expected_sc;
  ASSERT_TRUE(sc.ParseFromString(*scalar));
  ASSERT_TRUE(pb::TextFormat::ParseFromString("dtype: DT_FLOAT tensor_shape { } float_val: 3", &expected_sc));
  EXPECT_TRUE(pb::util::MessageDifferencer::Equals(sc, expected_sc)) << Diff(sc, expected_sc);

  // tf.make_tensor_proto([True, False]): bool is not written as tensor_content.
  auto bools = TensorToProto(Tensor::Vector<bool>(DT_BOOL, {true, false}));
  ASSERT_TRUE(bools.ok());
  tfproto::TensorProto bp;
  ASSERT_TRUE(bp.ParseFromString(*bools));
  EXPECT_EQ(bp.bool_val_size(), 2);
  EXPECT_TRUE(bp.tensor_content().empty());

  // And they read back identical.
  auto back = TensorFromProto(*matrix, "m");
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back->Identical(Tensor::Vector<float>(DT_FLOAT, {1, 2, 3, 4}).Reshaped({2, 2})));
}

TEST(GraphDefIoTest, ConstantKeepsTheEncodingItCameIn) {
  // Three values repeated to fill 4 elements: a re-encoding would write 4; the original stays.
  const std::string text = R"(node {
  name: "c"
  op: "Const"
  attr {
    key: "dtype"
    value {
      type: DT_FLOAT
    }
  }
  attr {
    key: "value"
    value {
      tensor {
        dtype: DT_FLOAT
        tensor_shape {
          dim {
            size: 4
          }
        }
        float_val: 1
        float_val: 2
      }
    }
  }
}
)";
  auto g = ParseGraphDef(text, GraphDefFormat::kText, "inline");
  ASSERT_TRUE(g.ok()) << g.status().message();
  const AttrValue& value = g->node[0].attr.at("value");
  EXPECT_EQ(value.tensor().num_elements(), 4);
  EXPECT_EQ(value.tensor().flat<float>()[3], 2.0f);
  EXPECT_EQ(*SerializeGraphDef(*g, GraphDefFormat::kText), text);
}

// ---- Hostile input ----------------------------------------------------------------------------

struct BrokenCase {
  const char* file;
  std::vector<const char*> words;  // each must appear in the message
};

TEST(GraphDefIoTest, BrokenInputsGiveOneClearLine) {
  const std::vector<BrokenCase> cases = {
      {"truncated.pb", {"not a binary GraphDef", "truncated"}},
      {"garbage.pb", {"not a binary GraphDef"}},
      {"invalid_utf8_name.pb", {"UTF-8"}},
      {"unknown_dtype.pb", {"node 'c' (Placeholder)", "attr 'dtype'", "unknown DataType 999"}},
      {"bad_text.pbtxt", {"bad_text.pbtxt:10:", "no field named \"colour\""}},
      {"unknown_dtype_name.pbtxt", {"Unknown enumeration value", "DT_FLOAT99"}},
      {"unterminated_string.pbtxt", {":2:"}},
      {"huge_const_shape.pbtxt",
       {"node 'huge' (Const)", "attr 'value'", "[1000000,1000000,1000000,1000000]", "larger"}},
      {"negative_const_shape.pbtxt", {"node 'negative' (Const)", "negative dimension"}},
      {"content_size_mismatch.pbtxt",
       {"node 'weights' (Const)", "tensor_content has 8 bytes", "[3]", "needs 12"}},
      {"deep_nesting.pbtxt", {"deep_nesting.pbtxt:"}},
      {"escaped_invalid_utf8_attr_key.pbtxt", {"not valid UTF-8", "AttrEntry.key"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.file);
    const std::string path = kBroken + "/" + c.file;
    auto g = ReadGraphDef(path);
    ASSERT_FALSE(g.ok());
    const std::string message = g.status().message();
    EXPECT_NE(message.find(c.file), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    for (const char* word : c.words) EXPECT_NE(message.find(word), std::string::npos) << message;
  }
}

TEST(GraphDefIoTest, NonUtf8NameInTextIsRefused) {
  auto g = ParseGraphDef("node { name: \"a\\377b\" op: \"NoOp\" }", GraphDefFormat::kText, "x.pbtxt");
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("x.pbtxt"), std::string::npos) << g.status().message();
  EXPECT_NE(g.status().message().find("UTF-8"), std::string::npos) << g.status().message();
}

TEST(GraphDefIoTest, ConstantLimitIsAnOption) {
  GraphDefReadOptions small;
  small.max_constant_bytes = 1024;
  auto t = TensorFromText("dtype: DT_FLOAT tensor_shape { dim { size: 1000 } } float_val: 1", small);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("node 'c' (Const)"), std::string::npos);
  EXPECT_NE(t.status().message().find("1 KiB"), std::string::npos) << t.status().message();
}

TEST(GraphDefIoTest, EmptyInputIsAnEmptyGraph) {
  auto g = ParseGraphDef("", GraphDefFormat::kAuto, "empty");
  ASSERT_TRUE(g.ok());
  EXPECT_TRUE(g->node.empty());
}

}  // namespace
}  // namespace xlens::graph

namespace xlens::graph {
namespace {

// A .pb may carry fields no schema here knows (written by a newer TensorFlow). Binary output keeps
// them; text output leaves them out, since text has no form for them that reads back (found by
// the GraphDef fuzzer: they printed as bare field numbers).
TEST(GraphDefIoTest, UnknownFieldsSurviveBinaryAndAreLeftOutOfText) {
  const std::string pb("\x6a\x03\x61\x62\x63", 5);  // field 13, length-delimited "abc"
  auto def = ParseGraphDef(pb, GraphDefFormat::kBinary, "newer.pb");
  ASSERT_TRUE(def.ok()) << def.status().message();
  auto binary = SerializeGraphDef(*def, GraphDefFormat::kBinary);
  ASSERT_TRUE(binary.ok());
  EXPECT_NE(binary->find("abc"), std::string::npos);
  auto text = SerializeGraphDef(*def, GraphDefFormat::kText);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(text->find("13"), std::string::npos) << *text;
  auto reread = ParseGraphDef(*text, GraphDefFormat::kText, "written.pbtxt");
  EXPECT_TRUE(reread.ok()) << reread.status().message();
}

}  // namespace
}  // namespace xlens::graph
