#include "compiler/cluster/clustering_result.h"

namespace xlens::cluster {

std::string ClusteringResult::ReasonFor(const std::string& node) const {
  if (auto it = declustered.find(node); it != declustered.end()) return it->second;
  if (auto it = unclustered.find(node); it != unclustered.end()) return it->second;
  return "";
}

}  // namespace xlens::cluster
