#include "compiler/cluster/graph_cycles.h"

#include <algorithm>
#include <unordered_set>

namespace xlens::cluster {

bool OrderedNodeSet::Insert(int32_t value) {
  if (!index_.emplace(value, static_cast<int>(sequence_.size())).second) return false;
  sequence_.push_back(value);
  return true;
}

bool OrderedNodeSet::Erase(int32_t value) {
  auto it = index_.find(value);
  if (it == index_.end()) return false;
  int index = it->second;
  sequence_[index] = sequence_.back();
  index_[sequence_[index]] = index;
  sequence_.pop_back();
  index_.erase(value);
  return true;
}

int32_t GraphCycles::NewNode() {
  if (!free_nodes_.empty()) {
    // A reused id keeps its rank: the ranks in use stay a permutation of [0, size).
    int32_t id = free_nodes_.back();
    free_nodes_.pop_back();
    return id;
  }
  Node node;
  node.rank = static_cast<int32_t>(nodes_.size());
  nodes_.push_back(std::move(node));
  return static_cast<int32_t>(nodes_.size() - 1);
}

bool GraphCycles::IsFree(int32_t node) const {
  return std::find(free_nodes_.begin(), free_nodes_.end(), node) != free_nodes_.end();
}

bool GraphCycles::HasEdge(int32_t x, int32_t y) const { return nodes_[x].out.Contains(y); }

void GraphCycles::RemoveEdge(int32_t x, int32_t y) {
  // A rank order stays valid when an edge goes away.
  nodes_[x].out.Erase(y);
  nodes_[y].in.Erase(x);
}

bool GraphCycles::InsertEdge(int32_t x, int32_t y) {
  if (x == y) return false;
  if (!nodes_[x].out.Insert(y)) return true;  // already there
  nodes_[y].in.Insert(x);
  if (nodes_[x].rank <= nodes_[y].rank) return true;  // consistent with the ranks as they are
  // Only nodes ranked within [rank(y), rank(x)] can need new ranks.
  if (!ForwardDfs(y, nodes_[x].rank)) {
    nodes_[x].out.Erase(y);
    nodes_[y].in.Erase(x);
    ClearVisited(deltaf_);
    return false;
  }
  BackwardDfs(x, nodes_[y].rank);
  Reorder();
  return true;
}

bool GraphCycles::ForwardDfs(int32_t n, int32_t upper_bound) {
  deltaf_.clear();
  stack_.clear();
  stack_.push_back(n);
  while (!stack_.empty()) {
    n = stack_.back();
    stack_.pop_back();
    Node& node = nodes_[n];
    if (node.visited) continue;
    node.visited = true;
    deltaf_.push_back(n);
    for (int32_t w : node.out.GetSequence()) {
      const Node& nw = nodes_[w];
      if (nw.rank == upper_bound) return false;  // a cycle
      if (!nw.visited && nw.rank < upper_bound) stack_.push_back(w);
    }
  }
  return true;
}

void GraphCycles::BackwardDfs(int32_t n, int32_t lower_bound) {
  deltab_.clear();
  stack_.clear();
  stack_.push_back(n);
  while (!stack_.empty()) {
    n = stack_.back();
    stack_.pop_back();
    Node& node = nodes_[n];
    if (node.visited) continue;
    node.visited = true;
    deltab_.push_back(n);
    for (int32_t w : node.in.GetSequence()) {
      const Node& nw = nodes_[w];
      if (!nw.visited && lower_bound < nw.rank) stack_.push_back(w);
    }
  }
}

void GraphCycles::SortByRank(std::vector<int32_t>* delta) const {
  std::sort(delta->begin(), delta->end(),
            [&](int32_t a, int32_t b) { return nodes_[a].rank < nodes_[b].rank; });
}

void GraphCycles::MoveToList(std::vector<int32_t>* src, std::vector<int32_t>* dst) {
  for (int32_t& v : *src) {
    int32_t w = v;
    v = nodes_[w].rank;
    nodes_[w].visited = false;
    dst->push_back(w);
  }
}

void GraphCycles::Reorder() {
  SortByRank(&deltab_);
  SortByRank(&deltaf_);
  // The nodes that reach x come first, then those y reaches, and they take the freed ranks in
  // increasing order.
  list_.clear();
  MoveToList(&deltab_, &list_);
  MoveToList(&deltaf_, &list_);
  merged_.resize(deltab_.size() + deltaf_.size());
  std::merge(deltab_.begin(), deltab_.end(), deltaf_.begin(), deltaf_.end(), merged_.begin());
  for (size_t i = 0; i < list_.size(); ++i) nodes_[list_[i]].rank = merged_[i];
}

void GraphCycles::ClearVisited(const std::vector<int32_t>& nodes) {
  for (int32_t n : nodes) nodes_[n].visited = false;
}

bool GraphCycles::IsReachable(int32_t x, int32_t y) {
  if (x == y) return true;
  if (nodes_[x].rank >= nodes_[y].rank) return false;  // x comes after y in the order
  bool reachable = !ForwardDfs(x, nodes_[y].rank);
  ClearVisited(deltaf_);
  return reachable;
}

std::optional<int32_t> GraphCycles::ContractEdge(int32_t a, int32_t b) {
  RemoveEdge(a, b);
  if (IsReachable(a, b)) {
    InsertEdge(a, b);
    return std::nullopt;
  }
  // Keep the end with more edges, to move fewer of them.
  if (nodes_[b].in.Size() + nodes_[b].out.Size() > nodes_[a].in.Size() + nodes_[a].out.Size()) {
    std::swap(a, b);
  }
  OrderedNodeSet out = std::move(nodes_[b].out);
  OrderedNodeSet in = std::move(nodes_[b].in);
  nodes_[b].out = OrderedNodeSet();
  nodes_[b].in = OrderedNodeSet();
  for (int32_t y : out.GetSequence()) nodes_[y].in.Erase(b);
  for (int32_t y : in.GetSequence()) nodes_[y].out.Erase(b);
  free_nodes_.push_back(b);
  for (int32_t y : out.GetSequence()) InsertEdge(a, y);
  for (int32_t y : in.GetSequence()) InsertEdge(y, a);
  return a;
}

std::vector<int32_t> GraphCycles::Successors(int32_t node) const {
  return nodes_[node].out.GetSequence();
}

std::vector<int32_t> GraphCycles::Predecessors(int32_t node) const {
  return nodes_[node].in.GetSequence();
}

std::vector<int32_t> GraphCycles::AllNodesInPostOrder() const {
  std::unordered_set<int32_t> free(free_nodes_.begin(), free_nodes_.end());
  std::vector<int32_t> all;
  all.reserve(nodes_.size());
  for (int32_t i = 0; i < static_cast<int32_t>(nodes_.size()); ++i) {
    if (!free.count(i)) all.push_back(i);
  }
  std::sort(all.begin(), all.end(),
            [&](int32_t a, int32_t b) { return nodes_[a].rank > nodes_[b].rank; });
  return all;
}

std::vector<int32_t> GraphCycles::FindPath(int32_t x, int32_t y) const {
  // Breadth-first from x, remembering each node's predecessor on the way.
  std::unordered_map<int32_t, int32_t> parent{{x, -1}};
  std::vector<int32_t> queue{x};
  for (size_t i = 0; i < queue.size(); ++i) {
    int32_t n = queue[i];
    if (n == y) {
      std::vector<int32_t> path;
      for (int32_t p = y; p != -1; p = parent[p]) path.push_back(p);
      std::reverse(path.begin(), path.end());
      return path;
    }
    for (int32_t w : nodes_[n].out.GetSequence()) {
      if (parent.emplace(w, n).second) queue.push_back(w);
    }
  }
  return {};
}

}  // namespace xlens::cluster
