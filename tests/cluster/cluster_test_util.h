// Small GraphDefs written as text, for the clustering passes' tests.
#pragma once

#include <algorithm>
#include <filesystem>
#include <memory>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "compiler/graph/graph.h"
#include "compiler/graph/graph_def_io.h"

namespace xlens::cluster::cluster_testing {

inline std::string NodeText(const std::string& name, const std::string& op,
                            const std::vector<std::string>& inputs, const std::string& attrs = "") {
  std::string text = "node { name: \"" + name + "\" op: \"" + op + "\" ";
  for (const std::string& in : inputs) text += "input: \"" + in + "\" ";
  return text + attrs + " }\n";
}

inline constexpr char kF32[] = "attr { key: \"T\" value { type: DT_FLOAT } }";
inline constexpr char kPlaceholderF32[] = "attr { key: \"dtype\" value { type: DT_FLOAT } }";
inline constexpr char kPlaceholderBool[] = "attr { key: \"dtype\" value { type: DT_BOOL } }";

// TensorFlow's corpus (../shared/corpus/tf beside the clone), "" when it is absent.
inline std::string TfCorpusDir() {
  std::string dir = std::string(XLENS_SHARED_DIR) + "/corpus/tf";
  return std::filesystem::is_directory(dir) ? dir : "";
}

// Every CASE/VARIANT/tf_dump folder of the corpus, sorted (none when it is absent).
inline std::vector<std::filesystem::path> TfDumpDirs() {
  namespace fs = std::filesystem;
  std::vector<fs::path> dirs;
  const std::string root = TfCorpusDir();
  if (root.empty()) return dirs;
  for (const auto& c : fs::directory_iterator(root)) {
    if (!c.is_directory()) continue;
    for (const auto& v : fs::directory_iterator(c.path())) {
      if (fs::is_directory(v.path() / "tf_dump")) dirs.push_back(v.path() / "tf_dump");
    }
  }
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

// (tf_dump folder, suffix) of every dump TensorFlow named `<name>[_N].pbtxt`, sorted; the
// suffix is "" or "_N".
inline std::vector<std::pair<std::string, std::string>> TfDumpsNamed(const std::string& name) {
  std::vector<std::pair<std::string, std::string>> out;
  const std::regex pattern(name + R"((_\d+)?\.pbtxt)");
  for (const auto& dump : TfDumpDirs()) {
    for (const auto& f : std::filesystem::directory_iterator(dump)) {
      std::smatch m;
      const std::string file = f.path().filename().string();
      if (std::regex_match(file, m, pattern)) out.emplace_back(dump.string(), m[1].str());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

inline std::unique_ptr<graph::Graph> LoadGraph(const std::string& text) {
  auto def = graph::ParseGraphDef(text, graph::GraphDefFormat::kText, "test.pbtxt");
  EXPECT_TRUE(def.ok()) << def.status().message();
  if (!def.ok()) return nullptr;
  auto g = graph::Graph::FromGraphDef(*def);
  EXPECT_TRUE(g.ok()) << g.status().message();
  return g.ok() ? std::move(*g) : nullptr;
}

}  // namespace xlens::cluster::cluster_testing
