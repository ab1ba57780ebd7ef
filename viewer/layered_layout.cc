#include "viewer/layered_layout.h"

#include <algorithm>
#include <functional>
#include <map>
#include <numeric>
#include <queue>

namespace xlens::viewer {
namespace {

// The edges with those that close a cycle reversed: a back edge of an iterative depth-first
// search (no recursion, so a 50,000-node chain cannot overflow the stack).
std::vector<std::pair<int, int>> AcyclicEdges(int n, const std::vector<std::pair<int, int>>& edges,
                                              std::vector<bool>* reversed) {
  std::vector<std::vector<int>> out(static_cast<size_t>(n));
  for (size_t e = 0; e < edges.size(); ++e) {
    auto [from, to] = edges[e];
    if (from != to) out[static_cast<size_t>(from)].push_back(static_cast<int>(e));
  }
  enum : char { kNew, kOpen, kDone };
  std::vector<char> state(static_cast<size_t>(n), kNew);
  reversed->assign(edges.size(), false);
  std::vector<std::pair<int, size_t>> stack;  // node, next out-edge to look at
  for (int root = 0; root < n; ++root) {
    if (state[static_cast<size_t>(root)] != kNew) continue;
    stack.emplace_back(root, 0);
    state[static_cast<size_t>(root)] = kOpen;
    while (!stack.empty()) {
      auto& [node, next] = stack.back();
      const std::vector<int>& list = out[static_cast<size_t>(node)];
      if (next == list.size()) {
        state[static_cast<size_t>(node)] = kDone;
        stack.pop_back();
        continue;
      }
      int e = list[next++];
      int to = edges[static_cast<size_t>(e)].second;
      if (state[static_cast<size_t>(to)] == kOpen) {
        (*reversed)[static_cast<size_t>(e)] = true;
      } else if (state[static_cast<size_t>(to)] == kNew) {
        state[static_cast<size_t>(to)] = kOpen;
        stack.emplace_back(to, 0);
      }
    }
  }
  std::vector<std::pair<int, int>> dag;
  dag.reserve(edges.size());
  for (size_t e = 0; e < edges.size(); ++e) {
    auto [from, to] = edges[e];
    if (from == to) continue;
    dag.push_back((*reversed)[e] ? std::make_pair(to, from) : std::make_pair(from, to));
  }
  return dag;
}

}  // namespace

std::vector<int> LongestPathRanks(int n, const std::vector<std::pair<int, int>>& edges) {
  std::vector<bool> reversed;
  std::vector<std::pair<int, int>> dag = AcyclicEdges(n, edges, &reversed);
  std::vector<std::vector<int>> out(static_cast<size_t>(n));
  std::vector<int> indegree(static_cast<size_t>(n), 0);
  for (auto [from, to] : dag) {
    out[static_cast<size_t>(from)].push_back(to);
    ++indegree[static_cast<size_t>(to)];
  }
  std::vector<int> rank(static_cast<size_t>(n), 0);
  std::vector<int> ready;
  for (int v = n - 1; v >= 0; --v) {
    if (indegree[static_cast<size_t>(v)] == 0) ready.push_back(v);
  }
  while (!ready.empty()) {
    int v = ready.back();
    ready.pop_back();
    for (int to : out[static_cast<size_t>(v)]) {
      rank[static_cast<size_t>(to)] = std::max(rank[static_cast<size_t>(to)], rank[static_cast<size_t>(v)] + 1);
      if (--indegree[static_cast<size_t>(to)] == 0) ready.push_back(to);
    }
  }
  return rank;
}

int64_t EstimateOrderingWork(int n, const std::vector<std::pair<int, int>>& edges, const std::vector<int>& ranks,
                             int64_t* cells) {
  int max_rank = 0;
  for (int r : ranks) max_rank = std::max(max_rank, r);
  // Widths by a difference array: an edge spanning ranks lo..hi adds one to each rank between.
  std::vector<int64_t> delta(static_cast<size_t>(max_rank) + 2, 0);
  for (int r : ranks) {
    delta[static_cast<size_t>(r)] += 1;
    delta[static_cast<size_t>(r) + 1] -= 1;
  }
  int64_t virtual_nodes = 0;
  for (auto [from, to] : edges) {
    int lo = std::min(ranks[static_cast<size_t>(from)], ranks[static_cast<size_t>(to)]);
    int hi = std::max(ranks[static_cast<size_t>(from)], ranks[static_cast<size_t>(to)]);
    if (hi - lo < 2) continue;
    virtual_nodes += hi - lo - 1;
    delta[static_cast<size_t>(lo) + 1] += 1;
    delta[static_cast<size_t>(hi)] -= 1;
  }
  int64_t work = 0, width = 0;
  for (int r = 0; r <= max_rank; ++r) {
    width += delta[static_cast<size_t>(r)];
    work += width * width;
  }
  if (cells != nullptr) *cells = n + virtual_nodes;
  return work;
}

LayeredResult LayOutLayered(const LayeredGraph& graph, double node_gap, double rank_gap) {
  const int n = static_cast<int>(graph.sizes.size());
  LayeredResult result;
  result.rank = LongestPathRanks(n, graph.edges);
  result.centres.assign(static_cast<size_t>(n), QPointF());
  result.edges.assign(graph.edges.size(), LayeredEdgeRoute());
  if (n == 0) return result;
  const std::vector<int>& rank = result.rank;
  int ranks = *std::max_element(rank.begin(), rank.end()) + 1;

  // Layers, first in input order, then one barycentre pass down (by the neighbours above) and
  // one up (by those below): most crossings a chain-like graph has are gone after that.
  std::vector<std::vector<int>> layers(static_cast<size_t>(ranks));
  for (int v = 0; v < n; ++v) layers[static_cast<size_t>(rank[static_cast<size_t>(v)])].push_back(v);
  std::vector<std::vector<int>> above(static_cast<size_t>(n)), below(static_cast<size_t>(n));
  for (auto [from, to] : graph.edges) {
    if (from == to) continue;
    int a = rank[static_cast<size_t>(from)] < rank[static_cast<size_t>(to)] ? from : to;
    int b = a == from ? to : from;
    below[static_cast<size_t>(a)].push_back(b);
    above[static_cast<size_t>(b)].push_back(a);
  }
  std::vector<double> position(static_cast<size_t>(n), 0);
  auto number = [&](const std::vector<int>& layer) {
    for (size_t i = 0; i < layer.size(); ++i) position[static_cast<size_t>(layer[i])] = static_cast<double>(i);
  };
  for (const auto& layer : layers) number(layer);
  auto sweep = [&](int r, const std::vector<std::vector<int>>& neighbours) {
    std::vector<int>& layer = layers[static_cast<size_t>(r)];
    std::vector<std::pair<double, int>> keyed;
    keyed.reserve(layer.size());
    for (int v : layer) {
      const std::vector<int>& list = neighbours[static_cast<size_t>(v)];
      double key = position[static_cast<size_t>(v)];
      if (!list.empty()) {
        double sum = 0;
        for (int u : list) sum += position[static_cast<size_t>(u)];
        key = sum / static_cast<double>(list.size());
      }
      keyed.emplace_back(key, v);
    }
    std::stable_sort(keyed.begin(), keyed.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (size_t i = 0; i < layer.size(); ++i) layer[i] = keyed[i].second;
    number(layer);
  };
  for (int r = 1; r < ranks; ++r) sweep(r, above);
  for (int r = ranks - 2; r >= 0; --r) sweep(r, below);

  // Coordinates: each layer packed left to right and centred on x = 0; layers stacked down.
  constexpr double kMargin = 8.0;
  std::vector<double> top(static_cast<size_t>(ranks)), height(static_cast<size_t>(ranks), 0);
  double y = kMargin, left = 0, right = 0;
  for (int r = 0; r < ranks; ++r) {
    const std::vector<int>& layer = layers[static_cast<size_t>(r)];
    double width = 0;
    for (int v : layer) {
      width += graph.sizes[static_cast<size_t>(v)].width();
      height[static_cast<size_t>(r)] = std::max(height[static_cast<size_t>(r)], graph.sizes[static_cast<size_t>(v)].height());
    }
    width += node_gap * static_cast<double>(std::max<size_t>(layer.size(), 1) - 1);
    double x = -width / 2;
    left = std::min(left, x);
    right = std::max(right, x + width);
    top[static_cast<size_t>(r)] = y;
    for (int v : layer) {
      const QSizeF& size = graph.sizes[static_cast<size_t>(v)];
      result.centres[static_cast<size_t>(v)] = QPointF(x + size.width() / 2, y + height[static_cast<size_t>(r)] / 2);
      x += size.width() + node_gap;
    }
    y += height[static_cast<size_t>(r)] + rank_gap;
  }
  const double shift = kMargin - left;
  for (QPointF& centre : result.centres) centre.rx() += shift;
  right += shift;

  // Long edges: one lane per (source, direction), lanes handed out by interval so that lanes
  // free again below a source's last target are reused.
  struct Group {
    int lo, hi, lane = 0;
  };
  std::map<std::pair<int, bool>, Group> groups;
  for (auto [from, to] : graph.edges) {
    int rf = rank[static_cast<size_t>(from)], rt = rank[static_cast<size_t>(to)];
    if (from == to || std::abs(rf - rt) < 2) continue;
    auto [it, fresh] = groups.try_emplace({from, rt > rf}, Group{std::min(rf, rt), std::max(rf, rt)});
    if (!fresh) {
      it->second.lo = std::min(it->second.lo, std::min(rf, rt));
      it->second.hi = std::max(it->second.hi, std::max(rf, rt));
    }
  }
  std::vector<Group*> by_start;
  for (auto& [key, group] : groups) by_start.push_back(&group);
  std::stable_sort(by_start.begin(), by_start.end(), [](Group* a, Group* b) { return a->lo < b->lo; });
  std::priority_queue<std::pair<int, int>, std::vector<std::pair<int, int>>, std::greater<>> busy;  // (hi, lane)
  std::priority_queue<int, std::vector<int>, std::greater<>> free_lanes;
  int lanes = 0;
  for (Group* group : by_start) {
    while (!busy.empty() && busy.top().first < group->lo) {
      free_lanes.push(busy.top().second);
      busy.pop();
    }
    if (free_lanes.empty()) free_lanes.push(lanes++);
    group->lane = free_lanes.top();
    free_lanes.pop();
    busy.emplace(group->hi, group->lane);
  }
  const double lane_gap = 6.0;
  auto lane_x = [&](int lane) { return right + node_gap + lane_gap * lane; };

  for (size_t e = 0; e < graph.edges.size(); ++e) {
    auto [from, to] = graph.edges[e];
    if (from == to) continue;
    QPointF a = result.centres[static_cast<size_t>(from)], b = result.centres[static_cast<size_t>(to)];
    const QSizeF& sa = graph.sizes[static_cast<size_t>(from)];
    const QSizeF& sb = graph.sizes[static_cast<size_t>(to)];
    int rf = rank[static_cast<size_t>(from)], rt = rank[static_cast<size_t>(to)];
    bool down = rt > rf;
    double dir = down ? 1.0 : -1.0;
    QPointF start(a.x(), a.y() + dir * sa.height() / 2), end(b.x(), b.y() - dir * sb.height() / 2);
    std::vector<QPointF>& points = result.edges[e].points;
    if (std::abs(rf - rt) < 2) {
      points = {start, end};
      continue;
    }
    double x = lane_x(groups.at({from, down}).lane);
    double out_y = start.y() + dir * rank_gap * 0.4, in_y = end.y() - dir * rank_gap * 0.4;
    points = {start, QPointF(start.x(), out_y), QPointF(x, out_y), QPointF(x, in_y), QPointF(end.x(), in_y), end};
  }
  result.bounds = QRectF(0, 0, lane_x(std::max(lanes - 1, 0)) + kMargin, y - rank_gap + kMargin);
  return result;
}

}  // namespace xlens::viewer
