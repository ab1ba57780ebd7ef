#include "compiler/hlo/dot_printer.h"

#include <algorithm>
#include <cstdint>
#include <deque>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <fmt/format.h>

#include "compiler/hlo/stack_frames.h"
#include "compiler/support/terminal_text.h"

namespace xlens {
namespace {

// ---------------------------------------------------------------------------------------------
// Text. Names, shapes and metadata come from outside, so every string goes through Sanitize
// (Graphviz stops at malformed UTF-8 and raw control characters) and then is escaped for where
// it lands: node and cluster labels are HTML-like (Html), everything else is a quoted string.

constexpr std::string_view kReplacementCharacter = "\xef\xbf\xbd";
constexpr std::string_view kEllipsis = "\xe2\x80\xa6";

std::string Sanitize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = s[i];
    if (c < 0x80) {
      out += c < 0x20 || c == 0x7f ? ' ' : static_cast<char>(c);
      ++i;
      continue;
    }
    size_t length = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3
                    : c >= 0xf0 && c <= 0xf4                            ? 4
                                                                        : 0;
    bool valid = length > 0 && i + length <= s.size();
    for (size_t k = 1; valid && k < length; ++k) {
      valid = (static_cast<unsigned char>(s[i + k]) & 0xc0) == 0x80;
    }
    if (valid && length >= 3) {
      // Overlong forms, UTF-16 surrogates and code points past U+10FFFF.
      unsigned char next = s[i + 1];
      valid = !(c == 0xe0 && next < 0xa0) && !(c == 0xed && next >= 0xa0) &&
              !(c == 0xf0 && next < 0x90) && !(c == 0xf4 && next >= 0x90);
    }
    if (valid) {
      out.append(s.substr(i, length));
      i += length;
    } else {
      out += kReplacementCharacter;
      ++i;
    }
  }
  return out;
}

std::string Html(std::string_view s) {
  std::string out;
  for (char c : Sanitize(s)) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// The body of a quoted string. Backslashes are doubled so that Graphviz's escapes (\N, \G, \l)
// never fire on user text.
std::string EscapeQuoted(std::string_view s) {
  std::string out;
  for (char c : Sanitize(s)) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

bool IsContinuationByte(char c) { return (static_cast<unsigned char>(c) & 0xc0) == 0x80; }

// At most `max` bytes of `s` (plus an ellipsis), cut on a character boundary.
std::string Shorten(std::string_view s, size_t max) {
  if (s.size() <= max) return std::string(s);
  size_t cut = max;
  while (cut > 0 && IsContinuationByte(s[cut])) --cut;
  return std::string(s.substr(0, cut)) + std::string(kEllipsis);
}

// The longest quoted string (tooltip line, edge label, graph name) drawn whole. Names may be
// any length (a 100,000-character instruction name parses); nobody reads that much in a tooltip,
// and Graphviz's SVG grows with every one of them.
constexpr size_t kMaxQuotedBytes = 256;

std::string Quote(std::string_view s) {
  return "\"" + EscapeQuoted(Shorten(s, kMaxQuotedBytes)) + "\"";
}

// Lines of a tooltip, joined by Graphviz's newline escape.
std::string QuoteLines(const std::vector<std::string>& lines) {
  std::vector<std::string> escaped;
  for (const std::string& line : lines) escaped.push_back(EscapeQuoted(Shorten(line, kMaxQuotedBytes)));
  return "\"" + fmt::format("{}", fmt::join(escaped, "\\n")) + "\"";
}

// The last `max` bytes of `s`: the informative end of a hierarchical op_name.
std::string ShortenFront(std::string_view s, size_t max) {
  if (s.size() <= max) return std::string(s);
  size_t start = s.size() - max;
  while (start < s.size() && IsContinuationByte(s[start])) ++start;
  return std::string(kEllipsis) + std::string(s.substr(start));
}

std::string Small(std::string_view html) {
  return fmt::format("<font point-size=\"9\">{}</font>", html);
}

std::string Dims(const std::vector<int64_t>& dims) {
  return fmt::format("{{{}}}", fmt::join(dims, ","));
}

// ---------------------------------------------------------------------------------------------
// Node kinds and their colors (the material palette XLA's dumper uses; dark fills take white
// text).

enum class NodeKind {
  kElementwise,
  kDataMovement,
  kReduction,
  kDotOrConvolution,
  kParameterOrConstant,
  kControlFlow,
  kOther,
};

struct KindStyle {
  std::string_view legend;
  std::string_view css_class;  // becomes the SVG element's class
  std::string_view fill;
  std::string_view font;
};

constexpr KindStyle kKindStyles[] = {
    {"elementwise", "elementwise", "#bbdefb", "black"},
    {"data movement", "data-movement", "#c8e6c9", "black"},
    {"reduction", "reduction", "#e1bee7", "black"},
    {"dot / convolution", "dot-convolution", "#1565c0", "white"},
    {"parameter / constant", "parameter-constant", "#ffe0b2", "black"},
    {"control flow", "control-flow", "#2e7d32", "white"},
    {"other", "other", "#cfd8dc", "black"},
};
constexpr std::string_view kFusionFill = "#fff8e1";
constexpr std::string_view kFusionBorder = "#c8a415";
constexpr std::string_view kCalledBorder = "#2e7d32";
constexpr std::string_view kCutColor = "#9e9e9e";
constexpr std::string_view kCenterColor = "#d50000";

// A node with more users than this is not expanded through its users when a neighbourhood is
// selected (XLA's kMaxUsersToRender).
constexpr size_t kMaxUsersToExpand = 16;

const KindStyle& StyleOf(NodeKind kind) { return kKindStyles[static_cast<int>(kind)]; }

NodeKind Classify(HloOpcode opcode) {
  using H = HloOpcode;
  switch (opcode) {
    case H::kParameter: case H::kConstant:
      return NodeKind::kParameterOrConstant;
    case H::kBitcast: case H::kBroadcast: case H::kConcatenate: case H::kCopy:
    case H::kCopyDone: case H::kCopyStart: case H::kDynamicReshape: case H::kDynamicSlice:
    case H::kDynamicUpdateSlice: case H::kGather: case H::kGetTupleElement: case H::kPad:
    case H::kReshape: case H::kReverse: case H::kSlice: case H::kTranspose: case H::kTuple:
      return NodeKind::kDataMovement;
    case H::kReduce: case H::kReduceWindow: case H::kScatter: case H::kSelectAndScatter:
      return NodeKind::kReduction;
    case H::kCholesky: case H::kConvolution: case H::kDot: case H::kFft: case H::kRaggedDot:
    case H::kScaledDot: case H::kTriangularSolve:
      return NodeKind::kDotOrConvolution;
    case H::kCall: case H::kConditional: case H::kWhile:
      return NodeKind::kControlFlow;
    default:
      return IsElementwise(opcode) ? NodeKind::kElementwise : NodeKind::kOther;
  }
}

// Whether the edges into `instr` need operand numbers: not for commutative ops.
bool OperandOrderMatters(const HloInstruction& instr) {
  if (instr.operand_count() < 2) return false;
  using H = HloOpcode;
  switch (instr.opcode()) {
    case H::kAdd: case H::kAfterAll: case H::kAnd: case H::kMaximum: case H::kMinimum:
    case H::kMultiply: case H::kOr: case H::kXor:
      return false;
    case H::kCompare:
      return instr.comparison_direction != ComparisonDirection::kEq &&
             instr.comparison_direction != ComparisonDirection::kNe;
    default:
      return true;
  }
}

// Computations called by these opcodes are drawn as clusters; those of every other opcode
// (reducers, comparators, scatter combiners, map functions) are small and shared, and read
// better as a note on the caller.
bool DrawsCalleesAsClusters(HloOpcode opcode) {
  using H = HloOpcode;
  switch (opcode) {
    case H::kAsyncDone: case H::kAsyncStart: case H::kAsyncUpdate: case H::kCall:
    case H::kConditional: case H::kCustomCall: case H::kFusion: case H::kWhile:
      return true;
    default:
      return false;
  }
}

// How a callee is named on the dashed edge to its caller and in its cluster's label.
std::string Role(const CalledComputationAttribute& attr, size_t index) {
  if (attr.key == "branch_computations") return fmt::format("branch {}", index);
  if (attr.key == "true_computation") return "true";
  if (attr.key == "false_computation") return "false";
  if (attr.computations.size() > 1) return fmt::format("{} {}", attr.key, index);
  return attr.key;
}

// "add" for a computation whose root only combines its parameters, else its size.
std::string Summary(const HloComputation& computation) {
  const HloInstruction* root = computation.root_instruction();
  if (root != nullptr && root->opcode() != HloOpcode::kTuple && root->operand_count() > 0) {
    bool on_parameters = true;
    for (const HloInstruction* operand : root->operands()) {
      on_parameters &= operand->opcode() == HloOpcode::kParameter;
    }
    if (on_parameters) {
      std::string op(HloOpcodeString(root->opcode()));
      if (root->comparison_direction) {
        op += fmt::format(" {}", ComparisonDirectionString(*root->comparison_direction));
      }
      return op;
    }
  }
  int64_t count = computation.instruction_count();
  return fmt::format("{} instruction{}", count, count == 1 ? "" : "s");
}

// The attributes worth a line on the node.
std::string Attributes(const HloInstruction& instr) {
  using H = HloOpcode;
  switch (instr.opcode()) {
    case H::kGetTupleElement:
      return fmt::format("index={}", instr.tuple_index());
    case H::kCompare:
      return instr.comparison_direction
                 ? fmt::format("direction={}",
                               ComparisonDirectionString(*instr.comparison_direction))
                 : "";
    case H::kCustomCall:
      return instr.custom_call_target ? fmt::format("target={}", *instr.custom_call_target) : "";
    case H::kFusion:
      return instr.fusion_kind ? std::string(FusionKindString(*instr.fusion_kind)) : "";
    case H::kIota:
      return instr.iota_dimension_attr
                 ? fmt::format("iota_dimension={}", *instr.iota_dimension_attr)
                 : "";
    case H::kBroadcast: case H::kConcatenate: case H::kReduce: case H::kReverse:
    case H::kSort: case H::kTranspose:
      return instr.dimensions_attr ? "dimensions=" + Dims(*instr.dimensions_attr) : "";
    case H::kSlice: {
      if (!instr.has_slice) return "";
      std::vector<std::string> ranges;
      for (size_t i = 0; i < instr.slice_starts.size() && i < instr.slice_limits.size(); ++i) {
        int64_t stride = i < instr.slice_strides.size() ? instr.slice_strides[i] : 1;
        ranges.push_back(stride == 1 ? fmt::format("[{}:{}]", instr.slice_starts[i],
                                                   instr.slice_limits[i])
                                     : fmt::format("[{}:{}:{}]", instr.slice_starts[i],
                                                   instr.slice_limits[i], stride));
      }
      return fmt::format("slice={{{}}}", fmt::join(ranges, ","));
    }
    case H::kConvolution:
      return instr.convolution_dimension_numbers
                 ? "dim_labels=" + instr.convolution_dimension_numbers->ToString()
                 : "";
    case H::kDot: {
      if (!instr.dot_dimension_numbers) return "";
      const DotDimensionNumbers& dnums = *instr.dot_dimension_numbers;
      std::string out;
      if (!dnums.lhs_batch_dimensions.empty()) {
        out += fmt::format("lhs_batch_dims={} rhs_batch_dims={} ",
                           Dims(dnums.lhs_batch_dimensions), Dims(dnums.rhs_batch_dimensions));
      }
      return out + fmt::format("lhs_contracting_dims={} rhs_contracting_dims={}",
                               Dims(dnums.lhs_contracting_dimensions),
                               Dims(dnums.rhs_contracting_dimensions));
    }
    default:
      return "";
  }
}

// ---------------------------------------------------------------------------------------------

struct Edge {
  enum class Style { kData, kControl, kCall };
  int from;
  int to;
  Style style;
  std::string label;
};

// A called computation drawn as a cluster beside (inside the computation of) its first caller.
struct CalleeCluster {
  const HloComputation* computation;
  const HloInstruction* caller;
  std::string role;
};

struct Call {
  const HloInstruction* caller;
  const HloComputation* callee;
  std::string role;
};

class DotDumper {
 public:
  DotDumper(const HloModule& module, const DotOptions& options)
      : module_(module), options_(options) {}

  StatusOr<std::string> Dump() {
    const HloComputation* entry = module_.entry_computation();
    if (entry == nullptr) return Error(fmt::format("module {} has no entry computation",
                                                   module_.name()));
    drawn_.insert(entry);
    Walk(entry);
    BuildEdges();
    RETURN_IF_ERROR(SelectNodes());
    return Emit(*entry);
  }

 private:
  // Assigns nodes and clusters, depth first from the entry. A computation is drawn once, at its
  // first caller; later callers only get the dashed edge. Iterative: calls nest as deep as the
  // module says (100,000 is fine), the machine stack does not.
  void Walk(const HloComputation* entry) {
    struct Frame {
      const HloComputation* computation;
      size_t instr = 0;             // the next instruction of order_[computation]
      bool in_callees = false;      // walking the callees of instruction `instr`
      size_t attr = 0, callee = 0;  // the next callee: attribute, then position in it
    };
    std::vector<Frame> stack;
    auto enter = [&](const HloComputation* computation) {
      order_[computation] = computation->MakeInstructionPostOrder();
      stack.push_back({computation});
    };
    enter(entry);
    while (!stack.empty()) {
      Frame& frame = stack.back();
      const std::vector<HloInstruction*>& order = order_[frame.computation];
      if (frame.in_callees) {
        const HloInstruction* instr = order[frame.instr];
        const std::vector<CalledComputationAttribute>& attrs =
            instr->called_computation_attributes();
        if (frame.attr == attrs.size()) {
          frame.in_callees = false;
          ++frame.instr;
          continue;
        }
        const CalledComputationAttribute& attr = attrs[frame.attr];
        if (frame.callee == attr.computations.size()) {
          ++frame.attr;
          frame.callee = 0;
          continue;
        }
        const size_t i = frame.callee++;
        const HloComputation* callee = attr.computations[i];
        if (callee == nullptr) continue;
        calls_.push_back({instr, callee, Role(attr, i)});
        if (drawn_.insert(callee).second) {
          callee_clusters_[frame.computation].push_back({callee, instr, Role(attr, i)});
          enter(callee);  // `frame` is not used after this
        }
        continue;
      }
      if (frame.instr == order.size()) {
        stack.pop_back();
        continue;
      }
      const HloInstruction* instr = order[frame.instr];
      walk_order_.push_back(instr);
      const HloComputation* fused =
          instr->opcode() == HloOpcode::kFusion ? instr->fused_computation() : nullptr;
      if (fused != nullptr && drawn_.insert(fused).second) {
        fusion_clusters_[instr] = fused;
        ++frame.instr;
        enter(fused);
        continue;
      }
      node_index_[instr] = static_cast<int>(nodes_.size());
      nodes_.push_back(instr);
      if (DrawsCalleesAsClusters(instr->opcode())) {
        frame.in_callees = true;
        frame.attr = frame.callee = 0;
      } else {
        ++frame.instr;
      }
    }
  }

  // The node values of `instr` leave from: a fusion drawn as a cluster hands over its fused
  // root. -1 when that is not a node (a malformed module).
  int OutputNode(const HloInstruction* instr) const {
    while (instr != nullptr) {
      auto fused = fusion_clusters_.find(instr);
      if (fused == fusion_clusters_.end()) break;
      instr = fused->second->root_instruction();
    }
    auto node = node_index_.find(instr);
    return node == node_index_.end() ? -1 : node->second;
  }

  int NodeOf(const HloInstruction* instr) const {
    auto node = node_index_.find(instr);
    return node == node_index_.end() ? -1 : node->second;
  }

  void AddEdge(int from, int to, Edge::Style style, std::string label) {
    if (from < 0 || to < 0) return;
    edges_.push_back({from, to, style, std::move(label)});
  }

  void BuildEdges() {
    for (const HloInstruction* instr : walk_order_) {
      auto fused = fusion_clusters_.find(instr);
      bool numbered = OperandOrderMatters(*instr);
      for (int64_t i = 0; i < instr->operand_count(); ++i) {
        int to = NodeOf(instr);
        if (fused != fusion_clusters_.end()) {
          // Operand i of a fusion feeds parameter i of its fused computation.
          const HloComputation* computation = fused->second;
          to = i < computation->num_parameters() ? NodeOf(computation->parameter_instruction(i))
                                                 : -1;
        }
        AddEdge(OutputNode(instr->operand(i)), to, Edge::Style::kData,
                numbered ? std::to_string(i) : "");
      }
      for (const HloInstruction* predecessor : instr->control_predecessors()) {
        AddEdge(OutputNode(predecessor), OutputNode(instr), Edge::Style::kControl, "");
      }
    }
    for (const Call& call : calls_) {
      AddEdge(OutputNode(call.callee->root_instruction()), NodeOf(call.caller), Edge::Style::kCall,
              call.role);
    }
  }

  Status SelectNodes() {
    const HloInstruction* root = module_.entry_computation()->root_instruction();
    center_ = OutputNode(root);
    if (!options_.center.empty()) {
      const HloInstruction* named = nullptr;
      for (const HloComputation* computation : module_.computations()) {
        named = computation->GetInstructionWithName(options_.center);
        if (named != nullptr) break;
      }
      if (named == nullptr) {
        return Error(fmt::format("no instruction named '{}' in module {}",
                                 EscapeForTerminal(ElideMiddle(options_.center, 200)), module_.name()));
      }
      center_ = OutputNode(named);
      if (center_ < 0) {
        return Error(fmt::format(
            "instruction '{}' is in computation {}, which the graph does not draw (it is not "
            "called from ENTRY, or only named on the nodes that call it)",
            options_.center, named->parent() != nullptr ? named->parent()->name() : "?"));
      }
    }
    int64_t total = static_cast<int64_t>(nodes_.size());
    bool too_big = options_.max_nodes > 0 && total > options_.max_nodes;
    included_.assign(nodes_.size(), true);
    if (center_ < 0 || (options_.radius < 0 && !too_big)) return OkStatus();

    std::vector<std::vector<int>> inputs(nodes_.size());
    std::vector<std::vector<int>> outputs(nodes_.size());
    for (const Edge& edge : edges_) {
      inputs[edge.to].push_back(edge.from);
      outputs[edge.from].push_back(edge.to);
    }
    // Breadth first, so that a node limit keeps the nearest instructions.
    included_.assign(nodes_.size(), false);
    std::vector<int> distance(nodes_.size(), -1);
    std::deque<int> queue = {center_};
    distance[center_] = 0;
    included_[center_] = true;
    int64_t shown = 1;
    auto full = [&] { return options_.max_nodes > 0 && shown >= options_.max_nodes; };
    auto visit = [&](int from, const std::vector<int>& neighbours) {
      for (int next : neighbours) {
        if (full()) return;
        if (distance[next] >= 0) continue;
        distance[next] = distance[from] + 1;
        included_[next] = true;
        queue.push_back(next);
        ++shown;
      }
    };
    while (!queue.empty() && !full()) {
      int node = queue.front();
      queue.pop_front();
      if (options_.radius >= 0 && distance[node] >= options_.radius) continue;
      visit(node, inputs[node]);
      // As XLA's dumper does, a widely shared value (a parameter, a broadcast constant) does
      // not pull in all of its users: they would crowd out the neighbourhood around the center.
      if (node == center_ || outputs[node].size() <= kMaxUsersToExpand) {
        visit(node, outputs[node]);
      }
    }
    hidden_ = total - shown;
    return OkStatus();
  }

  // The clusters drawn inside `computation`: its fusions', then its callees' computations.
  std::vector<const HloComputation*> NestedClusters(const HloComputation* computation) {
    std::vector<const HloComputation*> nested;
    for (const HloInstruction* instr : order_[computation]) {
      auto fused = fusion_clusters_.find(instr);
      if (fused != fusion_clusters_.end()) nested.push_back(fused->second);
    }
    for (const CalleeCluster& cluster : callee_clusters_[computation]) {
      nested.push_back(cluster.computation);
    }
    return nested;
  }

  // Whether anything of `computation` (nested clusters included) is drawn. Memoized, and
  // computed in an iterative post order over the clusters (a tree: each is drawn once).
  bool HasIncludedNodes(const HloComputation* computation) {
    if (auto memo = has_included_.find(computation); memo != has_included_.end()) {
      return memo->second;
    }
    std::vector<std::pair<const HloComputation*, std::vector<const HloComputation*>>> stack;
    stack.emplace_back(computation, NestedClusters(computation));
    while (!stack.empty()) {
      std::vector<const HloComputation*>& pending = stack.back().second;
      if (!pending.empty()) {
        const HloComputation* next = pending.back();
        pending.pop_back();
        if (!has_included_.contains(next)) stack.emplace_back(next, NestedClusters(next));
        continue;
      }
      const HloComputation* done = stack.back().first;
      stack.pop_back();
      bool any = false;
      for (const HloInstruction* instr : order_[done]) {
        const int node = NodeOf(instr);
        any |= node >= 0 && included_[node];
      }
      for (const HloComputation* nested : NestedClusters(done)) any |= has_included_.at(nested);
      has_included_[done] = any;
    }
    return has_included_.at(computation);
  }

  std::string NodeLabel(const HloInstruction& instr) const {
    std::vector<std::string> lines;
    std::string head = instr.opcode() == HloOpcode::kParameter
                           ? fmt::format("parameter {}", instr.parameter_number())
                           : std::string(HloOpcodeString(instr.opcode()));
    lines.push_back("<b>" + Html(head) + "</b>");
    lines.push_back(Html(Shorten(instr.name(), 64)));
    lines.push_back(Small(Html(Shorten(instr.shape().ToString(false), 80))));
    if (instr.opcode() == HloOpcode::kConstant && instr.has_literal() &&
        instr.literal().shape().IsArray() && instr.literal().shape().is_static() &&
        instr.literal().element_count() <= 8) {
      lines.push_back(Html(Shorten(instr.literal().ToStringWithoutShape(), 48)));
    }
    std::string attributes = Attributes(instr);
    if (!attributes.empty()) lines.push_back(Small(Html(Shorten(attributes, 64))));
    for (const CalledComputationAttribute& attr : instr.called_computation_attributes()) {
      if (DrawsCalleesAsClusters(instr.opcode()) && instr.opcode() != HloOpcode::kFusion) {
        continue;
      }
      std::vector<std::string> names;
      for (const HloComputation* callee : attr.computations) {
        if (callee != nullptr) names.push_back(callee->name());
      }
      std::string note = fmt::format("{}={}", attr.key, fmt::join(names, ", "));
      if (attr.computations.size() == 1 && attr.computations[0] != nullptr) {
        note += " (" + Summary(*attr.computations[0]) + ")";
      }
      lines.push_back(Small(Html(Shorten(note, 64))));
    }
    if (!instr.metadata.op_name.empty()) {
      lines.push_back(Small(Html(ShortenFront(instr.metadata.op_name, 48))));
    }
    return fmt::format("<{}>", fmt::join(lines, "<br/>"));
  }

  static std::string Tooltip(const HloInstruction& instr) {
    std::vector<std::string> lines = {instr.name(), Shorten(instr.shape().ToString(), 400)};
    const OpMetadata& metadata = instr.metadata;
    if (!metadata.op_type.empty()) lines.push_back("op_type: " + metadata.op_type);
    if (!metadata.op_name.empty()) lines.push_back("op_name: " + metadata.op_name);
    // Through the stack-frame table when there is one (jaxlib, TensorFlow), else source_file.
    std::vector<SourceFrame> stack = InstructionStack(instr);
    constexpr size_t kMaxCallers = 8;
    for (size_t i = 0; i < stack.size() && i <= kMaxCallers; ++i) {
      lines.push_back(Shorten((i == 0 ? "source: " : "called from: ") + stack[i].ToString(), 400));
    }
    if (stack.size() > kMaxCallers + 1) {
      lines.push_back(fmt::format("... {} frames above", stack.size() - kMaxCallers - 1));
    }
    return QuoteLines(lines);
  }

  void EmitNode(const HloInstruction& instr, const std::string& indent) {
    int node = NodeOf(&instr);
    const KindStyle& style = StyleOf(Classify(instr.opcode()));
    std::string attrs = fmt::format(
        "label={}, fillcolor=\"{}\", fontcolor=\"{}\", class=\"{}\", tooltip={}",
        NodeLabel(instr), style.fill, style.font, style.css_class, Tooltip(instr));
    if (instr.IsRoot()) attrs += ", peripheries=2";
    if (node == center_) attrs += fmt::format(", penwidth=3, color=\"{}\"", kCenterColor);
    out_ += fmt::format("{}i{} [{}];\n", indent, node, attrs);
  }

  // Emits the nodes of `computation` and, nested in them, the clusters it draws. Iterative, like
  // Walk; the indentation stops growing past kMaxIndent so that deep nesting stays linear in size.
  void EmitComputation(const HloComputation* computation, const std::string& indent) {
    constexpr size_t kMaxIndent = 64;
    struct Frame {
      const HloComputation* computation;
      std::string indent;
      std::string closing;  // what ends its cluster
      size_t instr = 0;
      size_t callee = 0;
    };
    auto inner = [&](const std::string& outer) {
      return outer.size() < kMaxIndent ? outer + "  " : outer;
    };
    std::vector<Frame> stack;
    stack.push_back({computation, indent, ""});
    while (!stack.empty()) {
      Frame& frame = stack.back();
      const std::vector<HloInstruction*>& order = order_[frame.computation];
      if (frame.instr < order.size()) {
        const HloInstruction* instr = order[frame.instr++];
        auto fused = fusion_clusters_.find(instr);
        if (fused != fusion_clusters_.end()) {
          if (HasIncludedNodes(fused->second)) {
            std::string nested_indent = inner(frame.indent);
            std::string closing = frame.indent + "}\n";
            OpenFusionCluster(*instr, *fused->second, frame.indent, nested_indent);
            stack.push_back({fused->second, std::move(nested_indent), std::move(closing)});
          }
          continue;
        }
        const int node = NodeOf(instr);
        if (node >= 0 && included_[node]) EmitNode(*instr, frame.indent);
        continue;
      }
      const std::vector<CalleeCluster>& clusters = callee_clusters_[frame.computation];
      if (frame.callee < clusters.size()) {
        const CalleeCluster& cluster = clusters[frame.callee++];
        if (HasIncludedNodes(cluster.computation)) {
          std::string nested_indent = inner(frame.indent);
          std::string closing = frame.indent + "}\n";
          OpenCalleeCluster(cluster, frame.indent, nested_indent);
          stack.push_back({cluster.computation, std::move(nested_indent), std::move(closing)});
        }
        continue;
      }
      out_ += frame.closing;
      stack.pop_back();
    }
  }

  void OpenFusionCluster(const HloInstruction& fusion, const HloComputation& fused,
                         const std::string& indent, const std::string& inner) {
    std::string kind = fusion.fusion_kind ? std::string(FusionKindString(*fusion.fusion_kind))
                                          : std::string("fusion");
    std::vector<std::string> lines = {
        fmt::format("<b>fusion</b> {}", Html(kind)), Html(Shorten(fusion.name(), 64)),
        Small(Html(Shorten(fusion.shape().ToString(false), 80)))};
    if (!fusion.metadata.op_name.empty()) {
      lines.push_back(Small(Html(ShortenFront(fusion.metadata.op_name, 48))));
    }
    out_ += fmt::format("{}subgraph cluster_{} {{\n", indent, next_cluster_++);
    out_ += fmt::format("{}label=<{}>;\n", inner, fmt::join(lines, "<br/>"));
    out_ += fmt::format(
        "{}style=\"rounded,filled\"; fillcolor=\"{}\"; color=\"{}\"; class=\"fusion\"; "
        "tooltip={};\n",
        inner, kFusionFill, kFusionBorder,
        QuoteLines({fusion.name(), kind, "calls " + fused.name()}));
  }

  void OpenCalleeCluster(const CalleeCluster& cluster, const std::string& indent,
                         const std::string& inner) {
    std::string role = fmt::format("{} of {}", cluster.role, cluster.caller->name());
    out_ += fmt::format("{}subgraph cluster_{} {{\n", indent, next_cluster_++);
    out_ += fmt::format("{}label=<<b>{}</b><br/>{}>;\n", inner,
                        Html(Shorten(cluster.computation->name(), 64)),
                        Small(Html(Shorten(role, 80))));
    out_ += fmt::format(
        "{}style=\"rounded,dashed\"; fillcolor=\"white\"; color=\"{}\"; class=\"computation\"; "
        "tooltip={};\n",
        inner, kCalledBorder, QuoteLines({cluster.computation->name(), role}));
  }

  void EmitEdges() {
    for (const Edge& edge : edges_) {
      if (!included_[edge.from] || !included_[edge.to]) continue;
      std::string attrs;
      switch (edge.style) {
        case Edge::Style::kData:
          if (!edge.label.empty()) attrs = fmt::format("headlabel={}", Quote(edge.label));
          break;
        case Edge::Style::kControl:
          attrs = fmt::format("style=dotted, color=\"{}\", tooltip=\"control dependency\"",
                              kCutColor);
          break;
        case Edge::Style::kCall:
          attrs = fmt::format("style=dashed, color=\"{}\", fontcolor=\"{}\", label={}",
                              kCalledBorder, kCalledBorder, Quote(edge.label));
          break;
      }
      out_ += fmt::format("  i{} -> i{}{};\n", edge.from, edge.to,
                          attrs.empty() ? "" : " [" + attrs + "]");
    }
  }

  // One dashed cut edge per node and direction that lost edges to the cut.
  void EmitCutEdges() {
    struct Lost {
      std::vector<std::string> operands;
      std::vector<std::string> users;
    };
    std::vector<Lost> lost(nodes_.size());
    for (const Edge& edge : edges_) {
      if (included_[edge.from] == included_[edge.to]) continue;
      if (included_[edge.to]) {
        lost[edge.to].operands.push_back(nodes_[edge.from]->name());
      } else {
        lost[edge.from].users.push_back(nodes_[edge.to]->name());
      }
    }
    int cut_edge = 0;
    auto emit = [&](int node, const std::vector<std::string>& names, std::string_view noun,
                    bool into_node) {
      if (names.empty()) return;
      std::vector<std::string> shown(names.begin(),
                                     names.begin() + std::min<size_t>(names.size(), 12));
      if (shown.size() < names.size()) shown.push_back(std::string(kEllipsis));
      out_ += fmt::format(
          "  cut{} [label={}, shape=box, style=\"rounded,dashed\", color=\"{}\", "
          "fontcolor=\"#616161\", fontsize=9, class=\"cut\", tooltip={}];\n",
          cut_edge, Quote(fmt::format("{} more {}{}", names.size(), noun,
                                  names.size() == 1 ? "" : "s")),
          kCutColor, Quote(fmt::format("not shown: {}", fmt::join(shown, ", "))));
      out_ += into_node ? fmt::format("  cut{} -> i{} [style=dashed, color=\"{}\"];\n", cut_edge,
                                      node, kCutColor)
                        : fmt::format("  i{} -> cut{} [style=dashed, color=\"{}\"];\n", node,
                                      cut_edge, kCutColor);
      ++cut_edge;
    };
    for (size_t node = 0; node < nodes_.size(); ++node) {
      if (!included_[node]) continue;
      emit(static_cast<int>(node), lost[node].operands, "operand", true);
      emit(static_cast<int>(node), lost[node].users, "user", false);
    }
  }

  void EmitCutNote() {
    int64_t shown = static_cast<int64_t>(nodes_.size()) - hidden_;
    bool capped = options_.max_nodes > 0 && shown >= options_.max_nodes;
    const std::string center = Shorten(nodes_[center_]->name(), 64);
    std::string which =
        options_.radius >= 0
            ? fmt::format("showing the {} within {} edges of {}{}", shown, options_.radius,
                          center, capped ? fmt::format(", nearest first (at most {})", shown)
                                         : std::string())
            : fmt::format("showing the {} nearest to {} (at most {})", shown, center,
                          options_.max_nodes);
    out_ += fmt::format(
        "  cut_note [shape=note, style=filled, fillcolor=\"#fff9c4\", class=\"cut\", "
        "label=<<b>{} instructions not shown</b><br/>{}>];\n",
        hidden_, Small(Html(which)));
  }

  void EmitLegend() {
    std::string rows;
    for (const KindStyle& style : kKindStyles) {
      rows += fmt::format("<tr><td bgcolor=\"{}\"><font color=\"{}\">{}</font></td></tr>",
                          style.fill, style.font, Html(style.legend));
    }
    rows += fmt::format("<tr><td bgcolor=\"{}\">fusion (cluster)</td></tr>", kFusionFill);
    out_ += fmt::format(
        "  legend [shape=none, style=\"\", class=\"legend\", label=<<table border=\"0\" "
        "cellborder=\"1\" cellspacing=\"0\" cellpadding=\"3\">{}</table>>];\n",
        rows);
  }

  // Computations not reachable from the entry through any call.
  int64_t UncalledComputations() const {
    std::unordered_set<const HloComputation*> reached = {module_.entry_computation()};
    std::vector<const HloComputation*> stack = {module_.entry_computation()};
    while (!stack.empty()) {
      const HloComputation* computation = stack.back();
      stack.pop_back();
      for (const HloInstruction* instr : computation->instructions()) {
        for (const HloComputation* callee : instr->called_computations()) {
          if (callee != nullptr && reached.insert(callee).second) stack.push_back(callee);
        }
      }
    }
    return module_.computation_count() - static_cast<int64_t>(reached.size());
  }

  std::string Emit(const HloComputation& entry) {
    std::string title = fmt::format("<b>HloModule {}</b><br/>ENTRY {}",
                                    Html(Shorten(module_.name(), 128)),
                                    Html(Shorten(entry.name(), 128)));
    if (int64_t uncalled = UncalledComputations(); uncalled > 0) {
      title += "<br/>" + Small(Html(fmt::format("{} computation{} not called from ENTRY not drawn",
                                                uncalled, uncalled == 1 ? "" : "s")));
    }
    out_ = fmt::format("digraph {} {{\n", Quote(module_.name()));
    out_ += fmt::format(
        "  graph [label=<{}>, labelloc=t, rankdir=TB, fontname=\"Helvetica\", fontsize=14, "
        "tooltip=\" \"];\n",
        title);
    out_ += "  node [shape=rect, style=\"rounded,filled\", fontname=\"Helvetica\", "
            "fontsize=11, color=\"#616161\", margin=\"0.12,0.04\"];\n";
    out_ += "  edge [fontname=\"Helvetica\", fontsize=9, color=\"#616161\", arrowsize=0.7];\n";
    EmitComputation(&entry, "  ");
    EmitEdges();
    if (hidden_ > 0) {
      EmitCutEdges();
      EmitCutNote();
    }
    EmitLegend();
    out_ += "}\n";
    return std::move(out_);
  }

  const HloModule& module_;
  const DotOptions& options_;

  std::vector<const HloInstruction*> nodes_;  // indexed by node id
  std::unordered_map<const HloInstruction*, int> node_index_;
  std::vector<const HloInstruction*> walk_order_;  // nodes and fusion clusters
  std::unordered_map<const HloComputation*, std::vector<HloInstruction*>> order_;
  std::unordered_set<const HloComputation*> drawn_;
  std::unordered_map<const HloInstruction*, const HloComputation*> fusion_clusters_;
  std::unordered_map<const HloComputation*, std::vector<CalleeCluster>> callee_clusters_;
  std::vector<Call> calls_;
  std::vector<Edge> edges_;

  int center_ = -1;
  std::vector<bool> included_;
  int64_t hidden_ = 0;
  std::unordered_map<const HloComputation*, bool> has_included_;

  std::string out_;
  int next_cluster_ = 0;
};

}  // namespace

StatusOr<std::string> ModuleToDot(const HloModule& module, const DotOptions& options) {
  return DotDumper(module, options).Dump();
}

}  // namespace xlens
