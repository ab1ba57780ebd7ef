// What the clustering decided for a graph, for the dumps, the manifest and the command line: the
// partition of the nodes into clusters as mark_for_compilation leaves it, and for every op node
// left out, one reason a user can read. TensorFlow keeps the decisions in the `_XlaCluster` attrs
// of the nodes and says why only at VLOG(3); xlens keeps the why beside the attrs.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace xlens::cluster {

// The node attributes the clustering passes read and write (TensorFlow's names, jit/defs.h).
inline constexpr char kXlaClusterAttr[] = "_XlaCluster";
inline constexpr char kXlaAlreadyClusteredAttr[] = "_XlaAlreadyClustered";
inline constexpr char kXlaCompileAttr[] = "_XlaCompile";
inline constexpr char kXlaScopeAttr[] = "_XlaScope";
inline constexpr char kXlaInternalScopeAttr[] = "_XlaInternalScope";
inline constexpr char kXlaMustCompileAttr[] = "_XlaMustCompile";
inline constexpr char kXlaCompiledKernelAttr[] = "_XlaCompiledKernel";
inline constexpr char kXlaHasReferenceVarsAttr[] = "_XlaHasReferenceVars";
inline constexpr char kXlaNumConstantArgsAttr[] = "_XlaNumConstantArgs";
inline constexpr char kXlaNumResourceArgsAttr[] = "_XlaNumResourceArgs";

struct ClusteringResult {
  // Cluster name -> its nodes' names, in node id order, as mark_for_compilation assigned them
  // (TensorFlow's mark_for_compilation dump). Those in `declustered` left afterwards.
  std::map<std::string, std::vector<std::string>> clusters;
  // Op node left out of every cluster -> why ("no XLA kernel for Unique on XLA_CPU_JIT: Unique
  // op", "cluster too small (3 < 4)", ...).
  std::map<std::string, std::string> unclustered;
  // Node taken back out of its cluster by partially_decluster -> why.
  std::map<std::string, std::string> declustered;
  // Whether any node was a compilation candidate (TensorFlow dumps the clustering graphs only
  // then).
  bool had_candidates = false;

  // The reason for `node` when it is outside every cluster (declustered first), else "".
  std::string ReasonFor(const std::string& node) const;
  // The cluster `node` ends up in after partially_decluster, "" for none.
  std::string FinalClusterOf(const std::string& node) const;
};

}  // namespace xlens::cluster
