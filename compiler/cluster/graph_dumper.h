// The clustering passes' graph dumps, as TensorFlow's DumpGraphToFile writes them under
// TF_DUMP_GRAPH_PREFIX: `<prefix>/<name>.pbtxt`, GraphDef text TensorFlow's parser reads, with
// `_1`, `_2`, ... appended to the second, third, ... dump of the same name by one dumper (one
// process in TensorFlow). Beside each graph xlens writes `<name>.dot`: the clusters drawn as
// boxes and every op left out of them labelled with why (cluster_graph_dot.h).
//
// A dump that cannot be written comes back as a Status; callers log it and go on: a dump never
// fails a compilation.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "compiler/cluster/clustering_result.h"
#include "compiler/graph/graph.h"
#include "compiler/graph/graph_def.h"
#include "compiler/support/status.h"

namespace xlens::cluster {

class GraphDumper {
 public:
  // `prefix` is the directory (created on the first dump).
  explicit GraphDumper(std::string prefix);

  const std::string& prefix() const { return prefix_; }

  // Writes `<prefix>/<name>[_N].pbtxt` and the `.dot` beside it; returns the .pbtxt's path.
  // `result`, when given, supplies the reasons for the ops outside every cluster.
  StatusOr<std::string> Dump(const std::string& name, const graph::Graph& graph,
                             const ClusteringResult* result = nullptr);
  StatusOr<std::string> Dump(const std::string& name, const graph::GraphDef& graph_def,
                             const ClusteringResult* result = nullptr);
  // A FunctionDef on its own (`encapsulate_fdef_<cluster>.pbtxt`); no .dot.
  StatusOr<std::string> DumpFunctionDef(const std::string& name,
                                        const graph::FunctionDef& function);

  // The path the next dump of `name` gets, without taking it (for messages).
  std::string PeekPath(const std::string& name) const;

  // Every file written so far, with the dump's name ("mark_for_compilation", ...), in order (for
  // the manifest).
  struct WrittenFile {
    std::string name;
    std::string path;
  };
  const std::vector<WrittenFile>& written() const { return written_; }

 private:
  // `<prefix>/<name>[_N]` (no suffix), counting `name`.
  std::string TakeBasePath(const std::string& name);

  std::string prefix_;
  std::map<std::string, int> dumped_;  // name -> how many times it was dumped
  std::vector<WrittenFile> written_;
};

// The `mark_for_compilation_annotated` form of a clustered graph: every node renamed
// `<cluster>/<name>` after its `_XlaCluster` attr, `varhandle/<name>` when it is a VarHandleOp
// outside every cluster, `unclustered/<name>` otherwise, and every input renamed with it.
// `result`, when given, places nodes that carry no `_XlaCluster` attr but are members of one of
// its clusters.
graph::GraphDef AnnotateForDump(const graph::GraphDef& graph_def,
                                const ClusteringResult* result = nullptr);
graph::GraphDef AnnotateForDump(const graph::Graph& graph, const ClusteringResult* result = nullptr);

}  // namespace xlens::cluster
