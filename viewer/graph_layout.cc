#include "viewer/graph_layout.h"

#include <graphviz/cgraph.h>
#include <graphviz/gvc.h>

#include <QFontMetricsF>
#include <QGuiApplication>
#include <QRegularExpression>
#include <algorithm>
#include <cctype>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

namespace xlens::viewer {
namespace {

// ---------------------------------------------------------------------------------------------
// Writing DOT from an outline.

std::string Quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out.push_back('\\');
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    if (static_cast<unsigned char>(c) < 0x20) continue;  // control bytes have no place in DOT
    out.push_back(c);
  }
  out.push_back('"');
  return out;
}

std::string JoinLines(const std::vector<std::string>& lines) {
  std::string joined;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i) joined.push_back('\n');
    joined += lines[i];
  }
  return joined;
}

std::string ColorName(const QColor& color) { return color.name(QColor::HexRgb).toStdString(); }

// Measures labels with the font the items draw with, so a fixed-size node fits its text.
class LabelMeasure {
 public:
  LabelMeasure() {
    if (qobject_cast<QGuiApplication*>(QCoreApplication::instance()) != nullptr) {
      metrics_.emplace(GraphLabelFont());
    }
  }
  QSizeF Size(const std::vector<std::string>& lines) const {
    double width = 0;
    for (const std::string& line : lines) {
      double w = metrics_ ? metrics_->horizontalAdvance(QString::fromStdString(line))
                          : 0.62 * GraphLabelFont().pixelSize() * static_cast<double>(line.size());
      width = std::max(width, w);
    }
    double line_height = metrics_ ? metrics_->height() : 1.3 * GraphLabelFont().pixelSize();
    return {std::max(48.0, width + 16.0), line_height * static_cast<double>(lines.size()) + 8.0};
  }

 private:
  std::optional<QFontMetricsF> metrics_;
};

int ParameterNumber(const HloOutlineInstruction& instruction) {
  size_t open = instruction.text.find("parameter(");
  if (open == std::string::npos) return -1;
  open += 10;
  size_t close = instruction.text.find(')', open);
  if (close == std::string::npos || close == open || close - open > 9) return -1;
  int number = 0;
  for (size_t i = open; i < close; ++i) {
    if (!std::isdigit(static_cast<unsigned char>(instruction.text[i]))) return -1;
    number = number * 10 + (instruction.text[i] - '0');
  }
  return number;
}

constexpr int kMaxFusionDepth = 32;  // deeper nesting is drawn collapsed

class DotWriter {
 public:
  DotWriter(const HloOutline& outline, const DotOptions& options) : outline_(outline), options_(options) {}

  // The fused computation a fusion expands into, or nullptr when it is drawn as one node.
  const HloOutlineComputation* Expansion(const HloOutlineInstruction& instruction, int depth) const {
    if (options_.collapse_fusions || instruction.opcode != "fusion" || instruction.called.empty() ||
        depth >= kMaxFusionDepth) {
      return nullptr;
    }
    const HloOutlineComputation* fused = outline_.FindComputation(instruction.called.front());
    if (fused == nullptr || on_path_.count(fused)) return nullptr;
    return fused;
  }

  // Emits the instructions of `computation` that `shown` admits (all when null), and returns the
  // node id standing for each instruction's output.
  void EmitBody(const HloOutlineComputation& computation, const std::string& scope, int depth,
                const std::unordered_set<std::string>* shown, const std::set<std::string>* dashed,
                std::string& out) {
    on_path_.insert(&computation);
    std::unordered_map<std::string, std::string>& outputs = outputs_[{&computation, scope}];
    std::unordered_map<int, std::string>& params = params_[{&computation, scope}];
    std::string indent(static_cast<size_t>(depth + 1) * 2, ' ');
    for (const HloOutlineInstruction& instruction : computation.instructions) {
      if (shown != nullptr && !shown->count(instruction.name)) continue;
      std::string id = UniqueId(instruction.name, scope);
      if (const HloOutlineComputation* fused = Expansion(instruction, depth)) {
        ++summary_.shown_nodes;  // the cluster stands for the fusion in the count
        out += indent + "subgraph " + Quote("cluster_" + id) + " {\n";
        NodeColors colors = FusionClusterColors();
        std::string title = instruction.name + "\n" +
                            (instruction.fusion_kind.empty() ? std::string("fusion") : instruction.fusion_kind);
        out += indent + "  label=" + Quote(title) + "; labelloc=t; style=\"rounded,filled,bold\"; fillcolor=" +
               Quote(ColorName(colors.fill)) + "; color=" + Quote(ColorName(colors.stroke)) +
               "; xlens_id=" + Quote(id) + "; tooltip=" + Quote(Tooltip(instruction)) + ";\n";
        EmitBody(*fused, id, depth + 1, nullptr, nullptr, out);
        out += indent + "}\n";
        fusions_[{&computation, scope, instruction.name}] = {fused, id};
        outputs[instruction.name] = OutputOf(*fused, id);
        continue;
      }
      ++summary_.shown_nodes;
      if (instruction.opcode == "fusion") ++summary_.collapsed_fusions;
      bool boundary = dashed != nullptr && dashed->count(instruction.name);
      bool fused_scope = !scope.empty();
      ColorScheme scheme = SchemeForInstruction(instruction, fused_scope);
      NodeColors colors = ColorsForScheme(scheme);
      // A node with hidden neighbours keeps its colours (they say what it is) and gets XLA's
      // dashed grey outline for "some operands omitted".
      if (boundary) colors.stroke = ColorsForScheme(ColorScheme::kDashedBorder).stroke;
      std::vector<std::string> label = LabelForInstruction(instruction);
      QSizeF size = measure_.Size(label);
      std::string op_names;
      for (const std::string& op_name : instruction.op_names) op_names += (op_names.empty() ? "" : ";") + op_name;
      out += indent + Quote(id) + " [label=" + Quote(JoinLines(label)) + ", shape=" +
             GraphvizShapeName(ShapeForInstruction(instruction)) + ", style=" +
             Quote(boundary ? "filled,dashed" : "filled") + ", fillcolor=" + Quote(ColorName(colors.fill)) +
             ", color=" + Quote(ColorName(colors.stroke)) + ", fontcolor=" + Quote(ColorName(colors.text)) +
             ", width=" + std::to_string(size.width() / 72.0) + ", height=" + std::to_string(size.height() / 72.0) +
             ", xlens_name=" + Quote(instruction.name) + ", xlens_opcode=" + Quote(instruction.opcode) +
             ", xlens_op_names=" + Quote(op_names) + ", tooltip=" + Quote(Tooltip(instruction)) + "];\n";
      if (boundary) ++summary_.boundary_nodes;
      outputs[instruction.name] = id;
      if (instruction.opcode == "parameter") {
        int number = ParameterNumber(instruction);
        if (number >= 0) params[number] = id;
      }
    }
    // Operand -> user edges; an edge into an expanded fusion goes to its fused parameter.
    for (const HloOutlineInstruction& instruction : computation.instructions) {
      if (shown != nullptr && !shown->count(instruction.name)) continue;
      auto fusion = fusions_.find({&computation, scope, instruction.name});
      for (size_t i = 0; i < instruction.operands.size(); ++i) {
        const std::string& operand = instruction.operands[i];
        if (shown != nullptr && !shown->count(operand)) continue;
        auto source = outputs.find(operand);
        if (source == outputs.end() || source->second.empty()) continue;
        std::string target;
        if (fusion != fusions_.end()) {
          const auto& fused_params = params_[{fusion->second.first, fusion->second.second}];
          auto param = fused_params.find(static_cast<int>(i));
          if (param == fused_params.end()) continue;
          target = param->second;
        } else {
          target = outputs[instruction.name];
        }
        edges_ += "  " + Quote(source->second) + " -> " + Quote(target) + ";\n";
      }
    }
    on_path_.erase(&computation);
  }

  std::string Tooltip(const HloOutlineInstruction& instruction) const {
    constexpr size_t kMaxTooltip = 400;
    std::string tip = instruction.text.size() > kMaxTooltip ? instruction.text.substr(0, kMaxTooltip) + "..."
                                                            : instruction.text;
    if (!instruction.op_names.empty()) {
      tip += "\nop_name: ";
      for (size_t i = 0; i < instruction.op_names.size() && i < 8; ++i) tip += (i ? "; " : "") + instruction.op_names[i];
    }
    return tip;
  }

  std::string TakeEdges() { return std::move(edges_); }
  DotSummary& summary() { return summary_; }

 private:
  std::string UniqueId(const std::string& name, const std::string& scope) {
    if (used_ids_.insert(name).second) return name;
    std::string id = (scope.empty() ? std::string("_") : scope) + "/" + name;
    for (int n = 2; !used_ids_.insert(id).second; ++n) id = scope + "/" + name + "#" + std::to_string(n);
    return id;
  }

  std::string OutputOf(const HloOutlineComputation& fused, const std::string& scope) {
    const HloOutlineInstruction* root = fused.root();
    if (root == nullptr) return "";
    const auto& outputs = outputs_[{&fused, scope}];
    auto it = outputs.find(root->name);
    return it == outputs.end() ? "" : it->second;
  }

  const HloOutline& outline_;
  const DotOptions& options_;
  LabelMeasure measure_;
  std::set<const HloOutlineComputation*> on_path_;
  std::set<std::string> used_ids_;
  std::map<std::pair<const HloOutlineComputation*, std::string>, std::unordered_map<std::string, std::string>> outputs_;
  std::map<std::pair<const HloOutlineComputation*, std::string>, std::unordered_map<int, std::string>> params_;
  std::map<std::tuple<const HloOutlineComputation*, std::string, std::string>,
           std::pair<const HloOutlineComputation*, std::string>>
      fusions_;
  std::string edges_;
  DotSummary summary_;
};

int CountNodes(const HloOutline& outline, const HloOutlineComputation& computation, bool collapse, int depth,
               std::set<const HloOutlineComputation*>& on_path) {
  int count = 0;
  on_path.insert(&computation);
  for (const HloOutlineInstruction& instruction : computation.instructions) {
    ++count;
    if (collapse || instruction.opcode != "fusion" || instruction.called.empty() || depth >= kMaxFusionDepth) continue;
    const HloOutlineComputation* fused = outline.FindComputation(instruction.called.front());
    if (fused != nullptr && !on_path.count(fused)) count += CountNodes(outline, *fused, collapse, depth + 1, on_path);
  }
  on_path.erase(&computation);
  return count;
}

// The top-level instruction to grow a neighbourhood from: `focus` itself, or the fusion whose
// body holds it, or the root.
std::string ResolveFocus(const HloOutline& outline, const HloOutlineComputation& computation,
                         const std::string& focus) {
  if (computation.Find(focus) != nullptr) return focus;
  for (const HloOutlineInstruction& instruction : computation.instructions) {
    if (instruction.opcode != "fusion") continue;
    std::vector<std::string> stack(instruction.called.begin(), instruction.called.end());
    std::set<std::string> seen;
    while (!stack.empty()) {
      std::string name = stack.back();
      stack.pop_back();
      if (!seen.insert(name).second) continue;
      const HloOutlineComputation* fused = outline.FindComputation(name);
      if (fused == nullptr) continue;
      if (fused->Find(focus) != nullptr) return instruction.name;
      for (const HloOutlineInstruction& inner : fused->instructions) {
        if (inner.opcode == "fusion") stack.insert(stack.end(), inner.called.begin(), inner.called.end());
      }
    }
  }
  const HloOutlineInstruction* root = computation.root();
  return root ? root->name : "";
}

}  // namespace

QFont GraphLabelFont() {
  QFont font = QGuiApplication::font();
  font.setPixelSize(11);
  return font;
}

int CountGraphNodes(const HloOutline& outline, const HloOutlineComputation& computation, bool collapse_fusions) {
  std::set<const HloOutlineComputation*> on_path;
  return CountNodes(outline, computation, collapse_fusions, 0, on_path);
}

std::string HloComputationToDot(const HloOutline& outline, const HloOutlineComputation& computation,
                                const DotOptions& options, DotSummary* summary) {
  DotWriter writer(outline, options);
  std::string out = "digraph " + Quote(computation.name) + " {\n";
  out += "  rankdir=TB; nodesep=0.18; ranksep=0.3; outputorder=edgesfirst;\n";
  out += "  node [fixedsize=true, fontsize=9, margin=\"0.05,0.02\"];\n  edge [arrowsize=0.6];\n";
  int total = CountGraphNodes(outline, computation, options.collapse_fusions);
  if (total > 400) {
    // On big graphs dot spends nearly all its time in the network simplex that places nodes
    // across (tens of thousands of virtual nodes for long edges): cap it near 100 iterations,
    // and cut the rounds of crossing minimisation. The drawing is a little wider; a 5,000-node
    // graph takes seconds instead of minutes.
    out += "  nslimit=" + std::to_string(std::max(0.01, 100.0 / total)) + "; nslimit1=2; mclimit=" +
           (total > 1500 ? std::string("0.3") : std::string("0.6")) + "; searchsize=30;\n";
  }
  std::unordered_set<std::string> shown;
  std::set<std::string> dashed;
  bool neighbourhood = !options.focus.empty();
  std::string focus;
  if (neighbourhood) {
    focus = ResolveFocus(outline, computation, options.focus);
    // Breadth first over operands and users, so the nearest nodes are kept when max_nodes cuts.
    std::unordered_map<std::string, std::vector<std::string>> neighbours;
    for (const HloOutlineInstruction& instruction : computation.instructions) {
      for (const std::string& operand : instruction.operands) {
        if (computation.Find(operand) == nullptr) continue;
        neighbours[instruction.name].push_back(operand);
        neighbours[operand].push_back(instruction.name);
      }
    }
    std::deque<std::pair<std::string, int>> queue;
    if (!focus.empty()) {
      queue.emplace_back(focus, 0);
      shown.insert(focus);
    }
    bool full = false;
    while (!queue.empty() && !full) {
      auto [name, distance] = queue.front();
      queue.pop_front();
      if (distance >= options.radius) continue;
      for (const std::string& next : neighbours[name]) {
        if (shown.count(next)) continue;
        if (options.max_nodes > 0 && static_cast<int>(shown.size()) >= options.max_nodes) {
          full = true;
          break;
        }
        shown.insert(next);
        queue.emplace_back(next, distance + 1);
      }
    }
    for (const std::string& name : shown) {
      for (const std::string& next : neighbours[name]) {
        if (!shown.count(next)) {
          dashed.insert(name);
          break;
        }
      }
    }
  }
  writer.EmitBody(computation, "", 0, neighbourhood ? &shown : nullptr, neighbourhood ? &dashed : nullptr, out);
  out += writer.TakeEdges();
  out += "}\n";
  if (summary != nullptr) {
    *summary = writer.summary();
    summary->total_nodes = total;
    summary->focus = focus;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Laying DOT out and reading Graphviz's result.

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

struct LayoutReader {
  Agraph_t* graph;
  double top;  // Graphviz's y of the top edge; scene y = top - graphviz y

  QPointF Point(pointf p) const { return {p.x, top - p.y}; }

  void ReadClusters(Agraph_t* subgraph, int depth, GraphLayout& layout,
                    std::unordered_map<Agnode_t*, QString>& cluster_of) const {
    for (int i = 1; i <= GD_n_cluster(subgraph); ++i) {
      Agraph_t* cluster = GD_clust(subgraph)[i];
      if (cluster == nullptr) continue;
      GraphCluster out;
      QString id = Attribute(cluster, "xlens_id");
      if (id.isEmpty()) {
        id = QString::fromUtf8(agnameof(cluster));
        if (id.startsWith("cluster_")) id = id.mid(8);
        else if (id.startsWith("cluster")) id = id.mid(7);
      }
      out.id = id;
      boxf bb = GD_bb(cluster);
      out.box = QRectF(QPointF(bb.LL.x, top - bb.UR.y), QPointF(bb.UR.x, top - bb.LL.y));
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
      layout.clusters.push_back(out);
      for (Agnode_t* node = agfstnode(cluster); node != nullptr; node = agnxtnode(cluster, node)) {
        cluster_of[node] = id;  // inner clusters come later and overwrite: the innermost wins
      }
      ReadClusters(cluster, depth + 1, layout, cluster_of);
    }
  }
};

}  // namespace

StatusOr<GraphLayout> LayoutDot(const std::string& dot) {
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
  // Never let a graph from a file make Graphviz open other files (an image could be a FIFO).
  for (const char* name : {"image", "shapefile"}) {
    if (agattr(graph, AGNODE, const_cast<char*>(name), nullptr) != nullptr) {
      agattr(graph, AGNODE, const_cast<char*>(name), const_cast<char*>(""));
      for (Agnode_t* node = agfstnode(graph); node; node = agnxtnode(graph, node)) {
        agset(node, const_cast<char*>(name), const_cast<char*>(""));
      }
    }
  }
  // A "layout" attribute would pick another engine (neato on a big graph runs for hours); this
  // reader understands dot's clusters only.
  if (agattr(graph, AGRAPH, const_cast<char*>("layout"), nullptr) != nullptr) {
    agset(graph, const_cast<char*>("layout"), const_cast<char*>("dot"));
  }
  if (gvLayout(context, graph, "dot") != 0) return error("Graphviz could not lay the graph out");
  close.laid_out = true;

  GraphLayout layout;
  boxf bb = GD_bb(graph);
  LayoutReader reader{graph, bb.UR.y};
  layout.bounds = QRectF(QPointF(bb.LL.x, 0), QPointF(bb.UR.x, bb.UR.y - bb.LL.y));
  std::unordered_map<Agnode_t*, QString> cluster_of;
  reader.ReadClusters(graph, 0, layout, cluster_of);
  QString graph_name = QString::fromUtf8(agnameof(graph));
  std::unordered_map<Agnode_t*, QString> ids;
  layout.nodes.reserve(static_cast<size_t>(nodes));
  for (Agnode_t* node = agfstnode(graph); node != nullptr; node = agnxtnode(graph, node)) {
    GraphNode out;
    out.id = QString::fromUtf8(agnameof(node));
    ids[node] = out.id;
    QString name = Attribute(node, "xlens_name");
    out.name = name.isEmpty() ? out.id : name;
    out.opcode = Attribute(node, "xlens_opcode");
    QString op_names = Attribute(node, "xlens_op_names");
    if (!op_names.isEmpty()) out.op_names = op_names.split(';', Qt::SkipEmptyParts);
    char* raw_label = agget(node, const_cast<char*>("label"));
    QString label = raw_label ? QString::fromUtf8(raw_label) : QString("\\N");
    out.label = LabelLines(label.isEmpty() ? QString("\\N") : label, raw_label && aghtmlstr(raw_label), out.id, graph_name);
    double width = ND_width(node) * 72.0, height = ND_height(node) * 72.0;
    QPointF centre = reader.Point(ND_coord(node));
    out.box = QRectF(centre.x() - width / 2, centre.y() - height / 2, width, height);
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

int GraphLayout::FindNode(const QString& id_or_name) const {
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].id == id_or_name) return static_cast<int>(i);
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].name == id_or_name) return static_cast<int>(i);
  }
  return -1;
}

int GraphLayout::FindCluster(const QString& id) const {
  for (size_t i = 0; i < clusters.size(); ++i) {
    if (clusters[i].id == id) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace xlens::viewer
