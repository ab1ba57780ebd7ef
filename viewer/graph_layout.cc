#include "viewer/graph_layout.h"

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
