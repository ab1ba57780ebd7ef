// Reading and writing GraphDefs and FunctionDefs in TensorFlow's own formats: the binary
// protocol buffer (.pb, what tf.io.write_graph(as_text=False) and SavedModel's graph write) and
// the text format (.pbtxt, what as_graph_def() prints and TF_DUMP_GRAPH_PREFIX dumps are).
//
// A file TensorFlow wrote reads into the structs of graph_def.h and writes back as the same
// protocol buffer message: fields the structs do not model travel in `unmodeled_fields`, and a
// constant keeps the TensorProto it was read from. The text this writes is what TensorFlow's
// C++ TextFormat prints (attr map entries sorted by key).
//
// Input is untrusted: truncated or corrupt bytes, bad text, a Const whose shape is negative,
// huge or disagrees with its content, an unknown DataType, a name that is not UTF-8, nesting
// deeper than kMaxGraphDefNesting are each one single-line error naming the file (and the
// node and the text's line:column where known), never a crash.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "compiler/graph/graph_def.h"
#include "compiler/graph/tensor.h"
#include "compiler/support/status.h"

namespace xlens::graph {

enum class GraphDefFormat {
  kAuto,    // reading: by the file's extension, else by its content; writing: by the extension
  kBinary,  // the protocol buffer wire format (.pb)
  kText,    // protobuf's text format (.pbtxt)
};

// How deeply messages may nest (a function attr holding a function attr ...): protobuf's default.
inline constexpr int kMaxGraphDefNesting = 100;
// The most bytes one constant may expand to. A TensorProto can declare a shape of any size with
// a single value to repeat; this bounds what reading a file can allocate. 2 GiB, TensorFlow's own
// limit for a tensor's serialized content.
inline constexpr int64_t kMaxConstantBytes = int64_t{2} << 30;

struct GraphDefReadOptions {
  int64_t max_constant_bytes = kMaxConstantBytes;
};

// ".pb" -> kBinary; ".pbtxt", ".pbtext", ".txt", ".prototxt" -> kText; anything else kAuto.
GraphDefFormat GraphDefFormatForPath(const std::string& path);
// For kAuto: text when the bytes are printable, binary otherwise.
GraphDefFormat SniffGraphDefFormat(std::string_view bytes);

// Reads a GraphDef from a file (through ReadFile: regular files up to MaxInputBytes(), and never
// more than the 2 GiB a protocol buffer can hold). A gzipped file is read by its magic bytes and
// inflated within the same limit; "x.pbtxt.gz" is text, "x.pb.gz" binary.
StatusOr<GraphDef> ReadGraphDef(const std::string& path, GraphDefFormat format = GraphDefFormat::kAuto,
                                const GraphDefReadOptions& options = {});
// Parses bytes already in memory; `name_for_errors` (a file name) starts every message.
StatusOr<GraphDef> ParseGraphDef(std::string_view bytes, GraphDefFormat format,
                                 const std::string& name_for_errors,
                                 const GraphDefReadOptions& options = {});
// kAuto writes text. Binary output is deterministic (map entries sorted).
StatusOr<std::string> SerializeGraphDef(const GraphDef& graph, GraphDefFormat format);
// Writes atomically (file_io's WriteFile); kAuto chooses by the extension, text when unknown.
Status WriteGraphDef(const std::string& path, const GraphDef& graph,
                     GraphDefFormat format = GraphDefFormat::kAuto);

// A FunctionDef on its own, as TensorFlow's `encapsulate_fdef_<cluster>.pbtxt` dumps are.
StatusOr<FunctionDef> ReadFunctionDef(const std::string& path,
                                      GraphDefFormat format = GraphDefFormat::kAuto,
                                      const GraphDefReadOptions& options = {});
StatusOr<FunctionDef> ParseFunctionDef(std::string_view bytes, GraphDefFormat format,
                                       const std::string& name_for_errors,
                                       const GraphDefReadOptions& options = {});
StatusOr<std::string> SerializeFunctionDef(const FunctionDef& function, GraphDefFormat format);

// One TensorProto (binary) to a Tensor, with TensorFlow's rules: `tensor_content` is the raw
// little-endian elements; otherwise the typed `*_val` field, a shorter list repeating its last
// value and an empty one meaning zeros. Dtypes xlens holds no elements for (variant, quantized,
// float8, int4) give an uninitialised Tensor. `context` starts the message ("node 'c' (Const)").
StatusOr<Tensor> TensorFromProto(std::string_view serialized_tensor_proto,
                                 const std::string& context,
                                 const GraphDefReadOptions& options = {});
// A Tensor as TensorFlow's MakeTensorProto encodes it: the elements of a tensor with more than one
// element as `tensor_content`, a single element in its typed `*_val` field; strings in
// `string_val`, resource handles in `resource_handle_val`. Binary TensorProto.
StatusOr<std::string> TensorToProto(const Tensor& tensor);

}  // namespace xlens::graph
