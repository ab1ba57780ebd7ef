#include "viewer/graph_style.h"

#include <set>

namespace xlens::viewer {
namespace {

const std::set<std::string, std::less<>>& ElementwiseOpcodes() {
  static const std::set<std::string, std::less<>> opcodes = {
      "abs", "add", "and", "atan2", "bitcast-convert", "cbrt", "ceil", "clamp", "clz", "compare",
      "complex", "convert", "cosine", "divide", "erf", "exponential", "exponential-minus-one",
      "floor", "imag", "iota", "is-finite", "log", "log-plus-one", "logistic", "maximum", "minimum",
      "multiply", "negate", "not", "or", "popcnt", "power", "real", "remainder", "rng",
      "rng-bit-generator", "rng-get-and-update-state", "round-nearest-afz", "round-nearest-even",
      "rsqrt", "select", "shift-left", "shift-right-arithmetic", "shift-right-logical", "sign",
      "sine", "slice", "sort", "sqrt", "stochastic-convert", "subtract", "tan", "tanh", "xor"};
  return opcodes;
}

// Data movement that is nearly free inside a fusion, so XLA draws it white there.
const std::set<std::string, std::less<>>& DataMovementOpcodes() {
  static const std::set<std::string, std::less<>> opcodes = {
      "concatenate", "dynamic-slice", "gather", "pad", "reshape", "dynamic-reshape", "reverse",
      "transpose"};
  return opcodes;
}

const std::set<std::string, std::less<>>& CollectiveOpcodes() {
  static const std::set<std::string, std::less<>> opcodes = {
      "all-gather", "all-gather-start", "all-gather-done", "all-reduce", "all-reduce-start",
      "all-reduce-done", "all-to-all", "reduce-scatter", "collective-permute",
      "collective-permute-start", "collective-permute-done", "infeed", "outfeed", "partition-id",
      "recv", "recv-done", "send", "send-done", "replica-id"};
  return opcodes;
}

bool IsEffectiveScalar(const HloOutlineInstruction& instruction) {
  return !instruction.shape.empty() && instruction.shape.front() != '(' &&
         ShapeElementCount(instruction.shape) == 1;
}

// The shape of the first operand as the instruction's line writes it ("broadcast(f32[] %c)"), or
// empty when the line does not say.
std::string FirstOperandShape(const HloOutlineInstruction& instruction) {
  size_t open = instruction.text.find(instruction.opcode + "(");
  if (open == std::string::npos) return "";
  size_t start = open + instruction.opcode.size() + 1;
  size_t end = instruction.text.find_first_of(" ,)", start);
  if (end == std::string::npos || end == start) return "";
  return instruction.text.substr(start, end - start);
}

}  // namespace

NodeColors ColorsForScheme(ColorScheme scheme) {
  switch (scheme) {
    case ColorScheme::kBlue: return {QColor("#bbdefb"), QColor("#8aacc8"), Qt::black};
    case ColorScheme::kBrown: return {QColor("#bcaaa4"), QColor("#8c7b75"), Qt::black};
    case ColorScheme::kDarkBlue: return {QColor("#1565c0"), QColor("#003c8f"), Qt::white};
    case ColorScheme::kDarkGreen: return {QColor("#2e7d32"), QColor("#005005"), Qt::white};
    case ColorScheme::kDarkOrange: return {QColor("#ffb74d"), QColor("#c88719"), Qt::black};
    case ColorScheme::kDarkRed: return {QColor("#b71c1c"), QColor("#7f0000"), Qt::white};
    case ColorScheme::kGray: return {QColor("#cfd8dc"), QColor("#9ea7aa"), Qt::black};
    case ColorScheme::kGreen: return {QColor("#c8e6c9"), QColor("#97b498"), Qt::black};
    case ColorScheme::kOrange: return {QColor("#ffe0b2"), QColor("#cbae82"), Qt::black};
    case ColorScheme::kPurple: return {QColor("#e1bee7"), QColor("#af8eb5"), Qt::black};
    case ColorScheme::kRed: return {QColor("#ffcdd2"), QColor("#cb9ca1"), Qt::black};
    case ColorScheme::kWhite: return {Qt::white, Qt::black, Qt::black};
    case ColorScheme::kYellow: return {QColor("#fff9c4"), QColor("#cbc693"), Qt::black};
    case ColorScheme::kDashedBorder: return {Qt::white, QColor("#757575"), QColor("#757575")};
  }
  return {Qt::white, Qt::black, Qt::black};
}

ColorScheme SchemeForInstruction(const HloOutlineInstruction& instruction, bool fused) {
  const std::string& op = instruction.opcode;
  if (ElementwiseOpcodes().count(op)) {
    return IsEffectiveScalar(instruction) ? ColorScheme::kWhite : ColorScheme::kYellow;
  }
  if (op == "bitcast" || op == "get-tuple-element" || op == "after-all" || op == "add-dependency" ||
      op == "tuple" || op == "opt-barrier") {
    return ColorScheme::kWhite;
  }
  // XLA folds constants into their users' labels; drawn as nodes here, they stay quiet grey.
  if (op == "constant") return ColorScheme::kGray;
  if (op == "broadcast") {
    // Broadcasting a scalar inside a fusion is free, so XLA leaves it white.
    std::string operand = FirstOperandShape(instruction);
    bool scalar_operand = !operand.empty() && operand.front() != '(' && ShapeElementCount(operand) == 1;
    return fused && scalar_operand ? ColorScheme::kWhite : ColorScheme::kGreen;
  }
  if (DataMovementOpcodes().count(op)) {
    return IsEffectiveScalar(instruction) || fused ? ColorScheme::kWhite : ColorScheme::kGreen;
  }
  if (op == "dynamic-update-slice") return IsEffectiveScalar(instruction) ? ColorScheme::kWhite : ColorScheme::kGreen;
  if (op == "copy" || op == "copy-start" || op == "copy-done") return ColorScheme::kGreen;
  if (op == "convolution" || op == "dot" || op == "fft" || op == "triangular-solve" || op == "cholesky") {
    return ColorScheme::kDarkBlue;
  }
  if (op == "reduce-precision") return ColorScheme::kRed;
  if (op == "parameter") {
    int64_t elements = ShapeElementCount(instruction.shape);
    return elements >= 0 && elements < 4096 ? ColorScheme::kOrange : ColorScheme::kDarkOrange;
  }
  if (op == "batch-norm-grad" || op == "batch-norm-inference" || op == "batch-norm-training" ||
      op == "reduce" || op == "reduce-window" || op == "scatter" || op == "select-and-scatter") {
    return ColorScheme::kPurple;
  }
  if (op == "domain" || op == "fusion" || op == "map" || op == "get-dimension-size" || op == "set-dimension-size") {
    return ColorScheme::kGray;
  }
  if (CollectiveOpcodes().count(op)) return ColorScheme::kBrown;
  if (op == "call" || op == "conditional" || op == "custom-call" || op == "while") return ColorScheme::kDarkGreen;
  return ColorScheme::kWhite;
}

NodeShape ShapeForInstruction(const HloOutlineInstruction& instruction) {
  return instruction.opcode == "while" ? NodeShape::kEllipse : NodeShape::kBox;
}

std::vector<std::string> LabelForInstruction(const HloOutlineInstruction& instruction) {
  std::vector<std::string> lines;
  if (instruction.opcode == "parameter") {
    size_t open = instruction.text.find("parameter(");
    std::string number;
    if (open != std::string::npos) {
      size_t close = instruction.text.find(')', open);
      if (close != std::string::npos) number = instruction.text.substr(open + 10, close - open - 10);
    }
    lines.push_back("Parameter " + number);
    lines.push_back(instruction.name);
  } else if (instruction.name.rfind(instruction.opcode, 0) == 0) {
    lines.push_back(instruction.name);
  } else {
    std::string extended = instruction.opcode;
    if (!instruction.fusion_kind.empty()) extended += ":" + instruction.fusion_kind;
    lines.push_back(extended);
    lines.push_back(instruction.name);
  }
  std::string shape = instruction.shape;
  constexpr size_t kMaxShape = 48;  // XLA truncates giant tuple shapes too
  if (shape.size() > kMaxShape) shape = shape.substr(0, kMaxShape - 3) + "...";
  lines.push_back(shape);
  return lines;
}

NodeColors FusionClusterColors(bool highlighted) {
  if (highlighted) return {QColor("#ffcdd2"), QColor("#b71c1c"), Qt::black};
  return {QColor("#f5f5f5"), QColor("#c2c2c2"), Qt::black};
}

QColor BorderColor(BorderRole role) {
  switch (role) {
    case BorderRole::kNone: return {};
    case BorderRole::kRemoved: return QColor("#e53935");
    case BorderRole::kAdded: return QColor("#43a047");
    case BorderRole::kModified: return QColor("#ffb300");
    case BorderRole::kFusedInto: return QColor("#1e88e5");
  }
  return {};
}

const char* GraphvizShapeName(NodeShape shape) {
  switch (shape) {
    case NodeShape::kBox: return "box";
    case NodeShape::kRoundedBox: return "box";
    case NodeShape::kEllipse: return "ellipse";
    case NodeShape::kCircle: return "circle";
    case NodeShape::kDiamond: return "diamond";
  }
  return "box";
}

NodeShape ShapeFromGraphvizName(std::string_view name) {
  if (name == "ellipse" || name == "oval") return NodeShape::kEllipse;
  if (name == "circle" || name == "doublecircle" || name == "point") return NodeShape::kCircle;
  if (name == "diamond") return NodeShape::kDiamond;
  return NodeShape::kBox;
}

}  // namespace xlens::viewer
