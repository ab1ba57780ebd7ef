// Laying DOT out (LayoutDot, declared in graph_layout.h): parsing it with Graphviz's cgraph,
// taking out everything in it that names a file, then either Graphviz's dot or our layered layout
// (layered_layout.h), and reading the result into a GraphLayout.
#include <graphviz/cgraph.h>
#include <graphviz/gvc.h>

#include <QLineF>
#include <QRegularExpression>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <unordered_map>

#include "viewer/graph_layout.h"
#include "viewer/layered_layout.h"

namespace xlens::viewer {
namespace {

std::mutex& GraphvizMutex() {
  static std::mutex mutex;
  return mutex;
}

std::string& GraphvizErrors() {
  static std::string errors;
  return errors;
}

int CollectGraphvizError(char* message) {
  std::string& errors = GraphvizErrors();
  if (errors.size() < 4096 && message != nullptr) errors += message;
  return 0;
}

QString Attribute(void* object, const char* name) {
  char* value = agget(object, const_cast<char*>(name));
  return value == nullptr ? QString() : QString::fromUtf8(value);
}

QColor ParseColor(const QString& value, const QColor& fallback) {
  QString v = value.trimmed();
  int colon = v.indexOf(':');  // gradients "a:b" and weighted lists: the first colour
  if (colon > 0) v = v.left(colon);
  if (v.startsWith('#') && v.size() == 9) {  // Graphviz writes RRGGBBAA, Qt reads AARRGGBB
    QColor color(v.left(7));
    bool ok = false;
    int alpha = v.mid(7, 2).toInt(&ok, 16);
    if (color.isValid() && ok) color.setAlpha(alpha);
    return color.isValid() ? color : fallback;
  }
  if (v.isEmpty() || v.contains('/') || v.contains(' ') || v.contains(',')) return fallback;
  QColor color = QColor::fromString(v);
  return color.isValid() ? color : fallback;
}

// A label's lines: Graphviz escapes (\n \l \r line breaks, \N the node's name) interpreted, and
// HTML-like labels reduced to their text.
QStringList LabelLines(const QString& label, bool html, const QString& node_name, const QString& graph_name) {
  QString text;
  if (html) {
    QString flat = label;
    flat.replace(QRegularExpression("<br\\s*/?>", QRegularExpression::CaseInsensitiveOption), "\n");
    flat.remove(QRegularExpression("<[^>]*>"));
    flat.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", "\"").replace("&amp;", "&");
    text = flat;
  } else {
    for (qsizetype i = 0; i < label.size(); ++i) {
      QChar c = label[i];
      if (c != '\\' || i + 1 >= label.size()) {
        text += c;
        continue;
      }
      QChar next = label[++i];
      if (next == 'n' || next == 'l' || next == 'r') {
        text += '\n';
      } else if (next == 'N') {
        text += node_name;
      } else if (next == 'G') {
        text += graph_name;
      } else if (next == 'E' || next == 'T' || next == 'H') {
        // Edge-only escapes mean nothing on a node.
      } else {
        text += next;
      }
    }
  }
  QStringList lines = text.split('\n');
  while (!lines.isEmpty() && lines.back().trimmed().isEmpty()) lines.pop_back();
  return lines;
}

// A node's look and names, everything but where it is.
GraphNode ReadNodeStyle(Agnode_t* node, const QString& graph_name) {
  GraphNode out;
  out.id = QString::fromUtf8(agnameof(node));
  QString name = Attribute(node, "xlens_name");
  out.name = name.isEmpty() ? out.id : name;
  out.opcode = Attribute(node, "xlens_opcode");
  QString op_names = Attribute(node, "xlens_op_names");
  if (!op_names.isEmpty()) out.op_names = op_names.split(';', Qt::SkipEmptyParts);
  char* raw_label = agget(node, const_cast<char*>("label"));
  QString label = raw_label ? QString::fromUtf8(raw_label) : QString("\\N");
  out.label = LabelLines(label.isEmpty() ? QString("\\N") : label, raw_label && aghtmlstr(raw_label), out.id, graph_name);
  QString style = Attribute(node, "style");
  bool filled = style.contains("filled");
  QColor color = ParseColor(Attribute(node, "color"), Qt::black);
  out.stroke = color;
  out.fill = filled ? ParseColor(Attribute(node, "fillcolor"), ParseColor(Attribute(node, "color"), QColor("lightgrey")))
                    : QColor(Qt::white);
  out.text = ParseColor(Attribute(node, "fontcolor"), Qt::black);
  out.dashed = style.contains("dashed") || style.contains("dotted");
  out.shape = ShapeFromGraphvizName(Attribute(node, "shape").toStdString());
  if (out.shape == NodeShape::kBox && style.contains("rounded")) out.shape = NodeShape::kRoundedBox;
  out.tooltip = Attribute(node, "tooltip");
  return out;
}

// A cluster's id, title and colours, everything but its box.
GraphCluster ReadClusterStyle(Agraph_t* cluster, int depth) {
  GraphCluster out;
  QString id = Attribute(cluster, "xlens_id");
  if (id.isEmpty()) {
    id = QString::fromUtf8(agnameof(cluster));
    if (id.startsWith("cluster_")) id = id.mid(8);
    else if (id.startsWith("cluster")) id = id.mid(7);
  }
  out.id = id;
  QString label = Attribute(cluster, "label");
  char* raw_label = agget(cluster, const_cast<char*>("label"));
  out.title = LabelLines(label, raw_label != nullptr && aghtmlstr(raw_label), QString(), id).join('\n');
  QString style = Attribute(cluster, "style");
  out.rounded = style.contains("rounded");
  bool filled = style.contains("filled");
  out.stroke = ParseColor(Attribute(cluster, "pencolor"), ParseColor(Attribute(cluster, "color"), Qt::black));
  out.fill = filled ? ParseColor(Attribute(cluster, "fillcolor"), ParseColor(Attribute(cluster, "color"), QColor("lightgrey")))
                    : QColor(Qt::transparent);
  out.depth = depth;
  return out;
}

struct LayoutReader {
  Agraph_t* graph;
  double top;  // Graphviz's y of the top edge; scene y = top - graphviz y

  QPointF Point(pointf p) const { return {p.x, top - p.y}; }

  void ReadClusters(Agraph_t* subgraph, int depth, GraphLayout& layout,
                    std::unordered_map<Agnode_t*, QString>& cluster_of) const {
    for (int i = 1; i <= GD_n_cluster(subgraph); ++i) {
      Agraph_t* cluster = GD_clust(subgraph)[i];
      if (cluster == nullptr) continue;
      GraphCluster out = ReadClusterStyle(cluster, depth);
      boxf bb = GD_bb(cluster);
      out.box = QRectF(QPointF(bb.LL.x, top - bb.UR.y), QPointF(bb.UR.x, top - bb.LL.y));
      layout.clusters.push_back(out);
      for (Agnode_t* node = agfstnode(cluster); node != nullptr; node = agnxtnode(cluster, node)) {
        cluster_of[node] = out.id;  // inner clusters come later and overwrite: the innermost wins
      }
      ReadClusters(cluster, depth + 1, layout, cluster_of);
    }
  }
};

// ---------------------------------------------------------------------------------------------
// Taking out what names a file.

// Whether an HTML-like label holds an <IMG> element (any case, spaces after '<' allowed).
bool HasImageTag(const char* html) {
  for (const char* p = html; *p != '\0'; ++p) {
    if (*p != '<') continue;
    const char* q = p + 1;
    while (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r') ++q;
    if ((q[0] == 'i' || q[0] == 'I') && (q[1] == 'm' || q[1] == 'M') && (q[2] == 'g' || q[2] == 'G')) return true;
  }
  return false;
}

void ForEachObject(Agraph_t* graph, int kind, const std::function<void(void*)>& visit) {
  if (kind == AGRAPH) {
    std::function<void(Agraph_t*)> walk = [&](Agraph_t* g) {
      visit(g);
      for (Agraph_t* sub = agfstsubg(g); sub != nullptr; sub = agnxtsubg(sub)) walk(sub);
    };
    walk(graph);
    return;
  }
  for (Agnode_t* node = agfstnode(graph); node != nullptr; node = agnxtnode(graph, node)) {
    if (kind == AGNODE) {
      visit(node);
      continue;
    }
    for (Agedge_t* edge = agfstout(graph, node); edge != nullptr; edge = agnxtout(graph, edge)) visit(edge);
  }
}

// Sets every value of attribute `name` of objects of `kind` for which `bad` holds to
// `replacement(value)`, the default included.
void Rewrite(Agraph_t* graph, int kind, const char* name, const std::function<bool(const char*)>& bad,
             const std::function<std::string(const char*)>& replacement) {
  Agsym_t* symbol = agattr(graph, kind, const_cast<char*>(name), nullptr);
  if (symbol == nullptr) return;
  if (symbol->defval != nullptr && bad(symbol->defval)) {
    std::string fixed = replacement(symbol->defval);
    symbol = agattr(graph, kind, const_cast<char*>(name), fixed.data());
  }
  ForEachObject(graph, kind, [&](void* object) {
    char* value = agxget(object, symbol);
    if (value == nullptr || !bad(value)) return;
    std::string fixed = replacement(value);
    agxset(object, symbol, fixed.data());
  });
}

// Graphviz opens a file for an image (image=, an HTML label's <IMG SRC>), a shape file (shapefile=,
// shape=epsf or custom), fonts by path (fontpath, fontname with a '/') and the directories of
// imagepath. A graph from a file names none of them: a FIFO there would block the layout, a device
// would be read. Labels with images become their text.
void SanitizeGraph(Agraph_t* graph) {
  auto empty = [](const char*) { return std::string(); };
  auto nonempty = [](const char* value) { return value[0] != '\0'; };
  for (const char* name : {"image", "shapefile"}) Rewrite(graph, AGNODE, name, nonempty, empty);
  for (const char* name : {"imagepath", "fontpath"}) Rewrite(graph, AGRAPH, name, nonempty, empty);
  auto has_slash = [](const char* value) { return std::strchr(value, '/') != nullptr; };
  for (int kind : {AGRAPH, AGNODE, AGEDGE}) {
    for (const char* name : {"fontname", "labelfontname"}) Rewrite(graph, kind, name, has_slash, empty);
  }
  Rewrite(graph, AGNODE, "shape",
          [](const char* value) { return std::strcmp(value, "epsf") == 0 || std::strcmp(value, "custom") == 0; },
          [](const char*) { return std::string("box"); });
  auto html_image = [](const char* value) { return aghtmlstr(const_cast<char*>(value)) && HasImageTag(value); };
  auto as_text = [](const char* value) {
    // A plain label reads backslash escapes: the text's own backslashes are doubled.
    std::string text;
    for (const QString& line : LabelLines(QString::fromUtf8(value), true, QString(), QString())) {
      if (!text.empty()) text += "\\n";
      for (char c : line.toStdString()) text += c == '\\' ? std::string("\\\\") : std::string(1, c);
    }
    return text;
  };
  for (int kind : {AGRAPH, AGNODE, AGEDGE}) {
    for (const char* name : {"label", "xlabel", "headlabel", "taillabel"}) Rewrite(graph, kind, name, html_image, as_text);
  }
  // A "layout" attribute would pick another engine (neato on a big graph runs for hours); the
  // readers here understand dot's clusters only.
  Rewrite(graph, AGRAPH, "layout", [](const char* value) { return std::strcmp(value, "dot") != 0; },
          [](const char*) { return std::string("dot"); });
}

// ---------------------------------------------------------------------------------------------
// The layered layout's result as a GraphLayout.

struct Indexed {
  std::vector<Agnode_t*> nodes;
  std::unordered_map<Agnode_t*, int> index;
  std::vector<std::pair<int, int>> edges;
  std::vector<Agedge_t*> edge_objects;
};

Indexed IndexGraph(Agraph_t* graph) {
  Indexed out;
  for (Agnode_t* node = agfstnode(graph); node != nullptr; node = agnxtnode(graph, node)) {
    out.index[node] = static_cast<int>(out.nodes.size());
    out.nodes.push_back(node);
  }
  for (Agnode_t* node : out.nodes) {
    for (Agedge_t* edge = agfstout(graph, node); edge != nullptr; edge = agnxtout(graph, edge)) {
      out.edges.emplace_back(out.index[agtail(edge)], out.index[aghead(edge)]);
      out.edge_objects.push_back(edge);
    }
  }
  return out;
}

double Inches(Agnode_t* node, const char* name, double fallback) {
  char* value = agget(node, const_cast<char*>(name));
  if (value == nullptr || value[0] == '\0') return fallback;
  double inches = std::strtod(value, nullptr);
  return inches > 0 && inches < 1000 ? inches : fallback;
}

void AddLayeredClusters(Agraph_t* parent, int depth, const std::unordered_map<Agnode_t*, QRectF>& boxes,
                        GraphLayout& layout, std::unordered_map<Agnode_t*, QString>& cluster_of) {
  for (Agraph_t* sub = agfstsubg(parent); sub != nullptr; sub = agnxtsubg(sub)) {
    bool cluster = std::strncmp(agnameof(sub), "cluster", 7) == 0;
    if (!cluster) {
      AddLayeredClusters(sub, depth, boxes, layout, cluster_of);
      continue;
    }
    GraphCluster out = ReadClusterStyle(sub, depth);
    QRectF box;
    for (Agnode_t* node = agfstnode(sub); node != nullptr; node = agnxtnode(sub, node)) {
      auto found = boxes.find(node);
      if (found != boxes.end()) box = box.isNull() ? found->second : box.united(found->second);
      cluster_of[node] = out.id;
    }
    if (box.isNull()) continue;
    double title = 14.0 * static_cast<double>(out.title.count('\n') + (out.title.isEmpty() ? 0 : 1));
    out.box = box.adjusted(-8, -8 - title, 8, 8);
    layout.clusters.push_back(out);
    AddLayeredClusters(sub, depth + 1, boxes, layout, cluster_of);
  }
}

GraphLayout ReadLayered(Agraph_t* graph, const Indexed& indexed, const QString& note) {
  LayeredGraph input;
  input.edges = indexed.edges;
  for (Agnode_t* node : indexed.nodes) {
    double width = Inches(node, "width", 0.75) * 72.0, height = Inches(node, "height", 0.5) * 72.0;
    char* fixed = agget(node, const_cast<char*>("fixedsize"));
    if (fixed == nullptr || std::strcmp(fixed, "true") != 0) {
      // No font metrics in a layout process: a label's size from its characters, as dot's
      // estimate does without a text layout plugin.
      QString graph_name = QString::fromUtf8(agnameof(graph));
      GraphNode style = ReadNodeStyle(node, graph_name);
      qsizetype longest = 0;
      for (const QString& line : style.label) longest = std::max(longest, line.size());
      width = std::max(width, 6.5 * static_cast<double>(longest) + 16.0);
      height = std::max(height, 14.0 * static_cast<double>(style.label.size()) + 8.0);
    }
    input.sizes.emplace_back(std::min(width, 2000.0), std::min(height, 2000.0));
  }
  LayeredResult placed = LayOutLayered(input);
  GraphLayout layout;
  layout.engine = "layered";
  layout.note = note;
  QString graph_name = QString::fromUtf8(agnameof(graph));
  std::unordered_map<Agnode_t*, QRectF> boxes;
  for (size_t i = 0; i < indexed.nodes.size(); ++i) {
    QSizeF size = input.sizes[i];
    boxes[indexed.nodes[i]] = QRectF(placed.centres[i].x() - size.width() / 2, placed.centres[i].y() - size.height() / 2,
                                     size.width(), size.height());
  }
  std::unordered_map<Agnode_t*, QString> cluster_of;
  AddLayeredClusters(graph, 0, boxes, layout, cluster_of);
  layout.nodes.reserve(indexed.nodes.size());
  for (Agnode_t* node : indexed.nodes) {
    GraphNode out = ReadNodeStyle(node, graph_name);
    out.box = boxes[node];
    auto cluster = cluster_of.find(node);
    if (cluster != cluster_of.end()) out.cluster = cluster->second;
    layout.nodes.push_back(std::move(out));
  }
  for (size_t e = 0; e < indexed.edges.size(); ++e) {
    const std::vector<QPointF>& points = placed.edges[e].points;
    if (points.size() < 2) continue;
    GraphEdge out;
    out.from = layout.nodes[static_cast<size_t>(indexed.edges[e].first)].id;
    out.to = layout.nodes[static_cast<size_t>(indexed.edges[e].second)].id;
    out.dashed = Attribute(indexed.edge_objects[e], "style").contains("dashed");
    // The arrow head takes the last 7 points of the last segment (as dot leaves room for it).
    QPointF tip = points.back(), before = points[points.size() - 2];
    QLineF last(before, tip);
    QPointF base = last.length() > 7 ? last.pointAt(1 - 7 / last.length()) : before;
    out.path.moveTo(points.front());
    for (size_t i = 1; i + 1 < points.size(); ++i) out.path.lineTo(points[i]);
    out.path.lineTo(base);
    out.has_arrow = true;
    out.arrow_base = base;
    out.arrow_tip = tip;
    layout.edges.push_back(std::move(out));
  }
  QRectF bounds = placed.bounds;
  for (const GraphCluster& cluster : layout.clusters) bounds = bounds.united(cluster.box);
  layout.bounds = bounds;
  return layout;
}

}  // namespace

StatusOr<GraphLayout> LayoutDot(const std::string& dot, LayoutEngine engine, const std::string& note) {
  std::lock_guard<std::mutex> lock(GraphvizMutex());
  // One context for the life of the process: gvContext reads the plugin configuration, which is
  // too slow to repeat per layout.
  static GVC_t* context = gvContext();
  if (context == nullptr) return Status::Error("Graphviz: could not create a context (no plugins?)");
  GraphvizErrors().clear();
  agseterr(AGERR);
  agusererrf previous = agseterrf(CollectGraphvizError);
  struct Restore {
    agusererrf previous;
    ~Restore() { agseterrf(previous); }
  } restore{previous};
  auto error = [](const std::string& what) {
    std::string detail = GraphvizErrors();
    while (!detail.empty() && (detail.back() == '\n' || detail.back() == ' ')) detail.pop_back();
    for (char& c : detail) {
      if (c == '\n') c = ' ';
    }
    return Status::Error("DOT: " + what + (detail.empty() ? "" : ": " + detail));
  };
  if (dot.find_first_not_of(" \t\r\n") == std::string::npos) return error("empty input; expected a graph");
  if (dot.find('\0') != std::string::npos) return error("NUL byte in the input; expected DOT text");
  Agraph_t* graph = agmemread(dot.c_str());
  if (graph == nullptr) return error("could not parse the graph");
  struct Close {
    Agraph_t* graph;
    bool laid_out = false;
    ~Close() {
      if (laid_out) gvFreeLayout(context, graph);
      agclose(graph);
    }
  } close{graph};
  int nodes = agnnodes(graph), edges = agnedges(graph);
  if (nodes > kMaxLayoutNodes || edges > kMaxLayoutEdges) {
    return Status::Error("DOT: the graph is too big to lay out (" + std::to_string(nodes) + " nodes, " +
                         std::to_string(edges) + " edges; the limit is " + std::to_string(kMaxLayoutNodes) +
                         " nodes and " + std::to_string(kMaxLayoutEdges) + " edges)");
  }
  SanitizeGraph(graph);
  Indexed indexed = IndexGraph(graph);
  if (engine == LayoutEngine::kAuto) {
    int64_t cells = 0;
    int64_t work = EstimateOrderingWork(nodes, indexed.edges, LongestPathRanks(nodes, indexed.edges), &cells);
    if (work > kMaxDotOrderingWork || cells > kMaxDotCells) {
      return ReadLayered(graph, indexed,
                         QString("Drawn with a simple layered layout: %L1 nodes and %L2 edges, with long edges "
                                 "that would take Graphviz minutes to order.")
                             .arg(nodes)
                             .arg(edges));
    }
  }
  if (engine == LayoutEngine::kLayered) return ReadLayered(graph, indexed, QString::fromStdString(note));
  if (gvLayout(context, graph, "dot") != 0) return error("Graphviz could not lay the graph out");
  close.laid_out = true;

  GraphLayout layout;
  layout.engine = "dot";
  boxf bb = GD_bb(graph);
  LayoutReader reader{graph, bb.UR.y};
  layout.bounds = QRectF(QPointF(bb.LL.x, 0), QPointF(bb.UR.x, bb.UR.y - bb.LL.y));
  std::unordered_map<Agnode_t*, QString> cluster_of;
  reader.ReadClusters(graph, 0, layout, cluster_of);
  QString graph_name = QString::fromUtf8(agnameof(graph));
  std::unordered_map<Agnode_t*, QString> ids;
  layout.nodes.reserve(static_cast<size_t>(nodes));
  for (Agnode_t* node = agfstnode(graph); node != nullptr; node = agnxtnode(graph, node)) {
    GraphNode out = ReadNodeStyle(node, graph_name);
    ids[node] = out.id;
    double width = ND_width(node) * 72.0, height = ND_height(node) * 72.0;
    QPointF centre = reader.Point(ND_coord(node));
    out.box = QRectF(centre.x() - width / 2, centre.y() - height / 2, width, height);
    auto cluster = cluster_of.find(node);
    if (cluster != cluster_of.end()) out.cluster = cluster->second;
    layout.nodes.push_back(std::move(out));
  }
  for (Agnode_t* node = agfstnode(graph); node != nullptr; node = agnxtnode(graph, node)) {
    for (Agedge_t* edge = agfstout(graph, node); edge != nullptr; edge = agnxtout(graph, edge)) {
      GraphEdge out;
      out.from = ids[agtail(edge)];
      out.to = ids[aghead(edge)];
      out.dashed = Attribute(edge, "style").contains("dashed");
      splines* spl = ED_spl(edge);
      if (spl == nullptr) continue;
      for (int b = 0; b < spl->size; ++b) {
        const bezier& bz = spl->list[b];
        if (bz.size < 1) continue;
        out.path.moveTo(reader.Point(bz.list[0]));
        for (int i = 1; i + 2 < bz.size; i += 3) {
          out.path.cubicTo(reader.Point(bz.list[i]), reader.Point(bz.list[i + 1]), reader.Point(bz.list[i + 2]));
        }
        if (bz.eflag) {
          out.has_arrow = true;
          out.arrow_base = reader.Point(bz.list[bz.size - 1]);
          out.arrow_tip = reader.Point(bz.ep);
        }
      }
      layout.edges.push_back(std::move(out));
    }
  }
  return layout;
}

}  // namespace xlens::viewer
