// Our own layered ("Sugiyama") layout, for graphs Graphviz's dot cannot lay out in time: longest-
// path layering, one barycentre ordering pass down and up, nodes packed left to right in each
// layer, edges between adjacent layers drawn straight, longer ones along a vertical lane right of
// the layers (one lane per source node, shared by all its long edges, lanes reused once free).
// Linear in nodes plus edges apart from the sorts, so a 50,000-node stage lays out in well under
// a second where dot would run for hours.
//
// It also estimates what dot would spend on a graph: dot adds a virtual node per layer an edge
// crosses and orders every layer by repeated sweeps, so its time grows with the square of the
// layers' widths (a chain whose every node also reads the parameter: 10 s at 100 nodes).
#pragma once

#include <QPointF>
#include <QRectF>
#include <QSizeF>
#include <cstdint>
#include <utility>
#include <vector>

namespace xlens::viewer {

struct LayeredGraph {
  std::vector<QSizeF> sizes;                // one per node, in points
  std::vector<std::pair<int, int>> edges;   // (from, to) node indices; self loops are dropped
};

struct LayeredEdgeRoute {
  std::vector<QPointF> points;  // a polyline from the source's border to the target's
};

struct LayeredResult {
  std::vector<QPointF> centres;         // one per node
  std::vector<LayeredEdgeRoute> edges;  // one per input edge (self loops: empty)
  std::vector<int> rank;                // each node's layer
  QRectF bounds;                        // everything drawn, top left at (0, 0)
};

// Each node's layer by longest path from the sources, edges that close a cycle reversed first
// (found by a depth-first search, so the layering is a function of the graph alone).
std::vector<int> LongestPathRanks(int node_count, const std::vector<std::pair<int, int>>& edges);

// What dot would have to order: the sum over layers of the square of the layer's width (its
// nodes plus the virtual nodes of the edges that cross it), with `ranks` from LongestPathRanks.
// Also the total of nodes and virtual nodes in `*cells`.
int64_t EstimateOrderingWork(int node_count, const std::vector<std::pair<int, int>>& edges,
                             const std::vector<int>& ranks, int64_t* cells = nullptr);

LayeredResult LayOutLayered(const LayeredGraph& graph, double node_gap = 14.0, double rank_gap = 36.0);

}  // namespace xlens::viewer
