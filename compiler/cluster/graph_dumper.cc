#include "compiler/cluster/graph_dumper.h"

#include "compiler/cluster/cluster_graph_dot.h"
#include "compiler/graph/graph_def_io.h"
#include "compiler/support/file_io.h"

namespace xlens::cluster {
namespace {

// TensorFlow's MakeUniqueFilename keeps a dump name to one path component.
std::string SanitizeName(std::string name) {
  for (char& c : name) {
    if (c == '/' || c == '[' || c == ']' || c == '*' || c == '?' || c == '\\') c = '_';
  }
  return name;
}

std::string BaseName(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

GraphDumper::GraphDumper(std::string prefix) : prefix_(std::move(prefix)) {
  while (prefix_.size() > 1 && prefix_.back() == '/') prefix_.pop_back();
}

std::string GraphDumper::PeekPath(const std::string& name) const {
  std::string clean = SanitizeName(name);
  auto it = dumped_.find(clean);
  int count = it == dumped_.end() ? 0 : it->second;
  return prefix_ + "/" + clean + (count == 0 ? "" : "_" + std::to_string(count)) + ".pbtxt";
}

std::string GraphDumper::TakeBasePath(const std::string& name) {
  std::string clean = SanitizeName(name);
  int count = dumped_[clean]++;
  return prefix_ + "/" + clean + (count == 0 ? "" : "_" + std::to_string(count));
}

StatusOr<std::string> GraphDumper::Dump(const std::string& name, const graph::Graph& graph,
                                        const ClusteringResult* result) {
  return Dump(name, graph.ToGraphDef(), result);
}

StatusOr<std::string> GraphDumper::Dump(const std::string& name,
                                        const graph::GraphDef& graph_def,
                                        const ClusteringResult* result) {
  const std::string base = TakeBasePath(name);
  const std::string what = "dumping " + name + " to " + base + ".pbtxt";
  Status dir = CreateDirectories(prefix_);
  if (!dir.ok()) return dir.WithContext(what);
  // TensorFlow's DumpGraphToFile always writes the function library, `library {}` when empty:
  // an empty message field marks it present.
  graph::GraphDef with_library = graph_def;
  if (with_library.library.function.empty() && with_library.library.gradient.empty()) {
    with_library.unmodeled_fields += std::string("\x12\x00", 2);
  }
  auto text = graph::SerializeGraphDef(with_library, graph::GraphDefFormat::kText);
  if (!text.ok()) return text.status().WithContext(what);
  Status written = WriteFile(base + ".pbtxt", *text);
  if (!written.ok()) return written.WithContext(what);
  written_.push_back({name, base + ".pbtxt"});
  ClusterGraphDotOptions options;
  options.title = BaseName(base) + ".pbtxt";
  Status dot = WriteFile(base + ".dot", ClusterGraphToDot(graph_def, result, options));
  if (!dot.ok()) return dot.WithContext("dumping " + name + " to " + base + ".dot");
  written_.push_back({name, base + ".dot"});
  return base + ".pbtxt";
}

StatusOr<std::string> GraphDumper::DumpFunctionDef(const std::string& name,
                                                   const graph::FunctionDef& function) {
  const std::string base = TakeBasePath(name);
  const std::string what = "dumping " + name + " to " + base + ".pbtxt";
  Status dir = CreateDirectories(prefix_);
  if (!dir.ok()) return dir.WithContext(what);
  auto text = graph::SerializeFunctionDef(function, graph::GraphDefFormat::kText);
  if (!text.ok()) return text.status().WithContext(what);
  Status written = WriteFile(base + ".pbtxt", *text);
  if (!written.ok()) return written.WithContext(what);
  written_.push_back({name, base + ".pbtxt"});
  return base + ".pbtxt";
}

graph::GraphDef AnnotateForDump(const graph::GraphDef& def, const ClusteringResult* result) {
  std::map<std::string, std::string> member_of;
  if (result) {
    for (const auto& [cluster, members] : result->clusters) {
      for (const std::string& m : members) member_of[m] = cluster;
    }
  }
  std::map<std::string, std::string> renamed;
  for (const graph::NodeDef& n : def.node) {
    std::string prefix;
    auto it = n.attr.find(kXlaClusterAttr);
    if (it != n.attr.end() && it->second.kind() == graph::AttrValue::Kind::kString) {
      prefix = it->second.s();
    } else if (auto m = member_of.find(n.name); m != member_of.end()) {
      prefix = m->second;
    } else if (n.op == "VarHandleOp") {
      prefix = "varhandle";
    } else {
      prefix = "unclustered";
    }
    renamed[n.name] = prefix + "/" + n.name;
  }
  graph::GraphDef out = def;
  for (graph::NodeDef& n : out.node) {
    n.name = renamed.at(n.name);
    for (std::string& input : n.input) {
      auto id = graph::ParseTensorName(input);
      if (!id.ok()) continue;
      auto r = renamed.find(id->node);
      if (r == renamed.end()) continue;
      id->node = r->second;
      input = id->ToString();
    }
  }
  return out;
}

graph::GraphDef AnnotateForDump(const graph::Graph& graph, const ClusteringResult* result) {
  return AnnotateForDump(graph.ToGraphDef(), result);
}

}  // namespace xlens::cluster
