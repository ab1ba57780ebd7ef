// tfcompile's tf2xla.Config read into plain structs: the feeds (the compiled function's
// arguments, in order), the fetches (its results, in order) and the resource variables, each
// with the name the generated header gives its accessors. Text (.pbtxt, what tfcompile's docs
// show) and binary (.pb, what saved_model_cli writes) are both read, as TensorFlow's messages
// with their field names and numbers (proto/tf2xla.proto).
//
// The file is untrusted: every error is one line naming the file, and for text the line:column
// of the field at fault, or the feed/fetch/variable by index and node; never a crash. What the
// config alone can get wrong is checked here (a missing node name, a negative output index, a
// shape dimension that is not static, a name that is not a C++ identifier, two entries with
// the same name or tensor); what needs the graph (unknown nodes, types, shapes that disagree)
// is the graph lowering's (aot_graph.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/graph/types.h"
#include "compiler/support/status.h"

namespace xlens::aot {

// "node:1" as TensorFlow writes a tensor name.
struct TensorId {
  std::string node_name;
  int64_t output_index = 0;
  std::string ToString() const;
};

struct ConfigFeed {
  TensorId id;
  std::vector<int64_t> shape;  // every dimension static (>= 0); {} is a scalar
  std::string name;            // "" when the config gives none
  graph::DataType type = graph::DT_INVALID;  // DT_INVALID: the graph's
  std::string where;           // "config.pbtxt:3:1" or "config.pb: feed 0", for messages
};

struct ConfigFetch {
  TensorId id;
  std::string name;
  std::string where;
};

struct ConfigVariable {
  std::string node_name;
  std::string name;
  std::vector<int64_t> shape;
  bool has_shape = false;
  graph::DataType type = graph::DT_INVALID;
  bool readonly = false;
  std::string where;
};

struct Tf2XlaConfig {
  std::vector<ConfigFeed> feed;
  std::vector<ConfigFetch> fetch;
  std::vector<ConfigVariable> variable;
};

enum class ConfigFormat { kAuto, kText, kBinary };

// Reads `path` (through file_io's ReadFile); kAuto: ".pb" binary, ".pbtxt"/".txt" text, else by
// the content.
StatusOr<Tf2XlaConfig> ReadTf2XlaConfig(const std::string& path,
                                        ConfigFormat format = ConfigFormat::kAuto);
// The same for bytes in memory; `name_for_errors` starts every message.
StatusOr<Tf2XlaConfig> ParseTf2XlaConfig(std::string_view bytes, ConfigFormat format,
                                         const std::string& name_for_errors);

// Whether `name` may name an accessor: a C++ identifier ([A-Za-z_][A-Za-z0-9_]*), not a keyword.
bool IsValidCppIdentifier(std::string_view name);

}  // namespace xlens::aot
