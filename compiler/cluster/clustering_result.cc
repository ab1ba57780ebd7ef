#include "compiler/cluster/clustering_result.h"

namespace xlens::cluster {

std::string ClusteringResult::ReasonFor(const std::string& node) const {
  if (auto it = declustered.find(node); it != declustered.end()) return it->second;
  if (auto it = unclustered.find(node); it != unclustered.end()) return it->second;
  return "";
}

std::string ClusteringResult::FinalClusterOf(const std::string& node) const {
  if (declustered.count(node)) return "";
  for (const auto& [name, nodes] : clusters) {
    for (const std::string& n : nodes) {
      if (n == node) return name;
    }
  }
  return "";
}

}  // namespace xlens::cluster
