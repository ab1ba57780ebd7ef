// GraphDefs of function calls that nest, written as text: a function that calls itself, chains of
// calls n deep, and trees of Ifs whose every branch calls the next level (the inputs that made the
// call depth, inlining and expansion limits necessary).
#pragma once

#include <string>

#include "compiler/graph/graph_def.h"
#include "compiler/graph/graph_def_io.h"

namespace xlens::graph::testing {

inline std::string FuncAttr(const std::string& key, const std::string& name) {
  return "attr { key: \"" + key + "\" value { func { name: \"" + name + "\" } } } ";
}

inline std::string BoolAttrText(const std::string& key, bool b) {
  return "attr { key: \"" + key + "\" value { b: " + (b ? "true" : "false") + " } } ";
}

inline const char* kOneFloat = "list { type: DT_FLOAT }";

// A call of `function` on `input`, as a graph node ("node") or a body node ("node_def").
inline std::string CallText(const std::string& kind, const std::string& name, const std::string& input,
                            const std::string& function, bool noinline) {
  return kind + " { name: \"" + name + "\" op: \"PartitionedCall\" input: \"" + input + "\" " +
         "attr { key: \"Tin\" value { " + kOneFloat + " } } attr { key: \"Tout\" value { " +
         kOneFloat + " } } " + FuncAttr("f", function) +
         (noinline ? BoolAttrText("_noinline", true) : "") + "}\n";
}

inline std::string IfText(const std::string& kind, const std::string& name, const std::string& pred,
                          const std::string& input, const std::string& then_fn,
                          const std::string& else_fn, bool lower) {
  return kind + " { name: \"" + name + "\" op: \"If\" input: \"" + pred + "\" input: \"" + input +
         "\" attr { key: \"Tcond\" value { type: DT_BOOL } } attr { key: \"Tin\" value { " +
         kOneFloat + " } } attr { key: \"Tout\" value { " + kOneFloat + " } } " +
         FuncAttr("then_branch", then_fn) + FuncAttr("else_branch", else_fn) +
         (lower ? BoolAttrText("_lower_using_switch_merge", true) : "") + "}\n";
}

inline std::string TrueConstText(const std::string& kind, const std::string& name) {
  return kind + " { name: \"" + name + "\" op: \"Const\" attr { key: \"dtype\" value { type: DT_BOOL } } " +
         "attr { key: \"value\" value { tensor { dtype: DT_BOOL tensor_shape { } bool_val: true } } } }\n";
}

// f(x: float) -> y: float with `body`, returning `ret`.
inline std::string FunctionText(const std::string& name, const std::string& body, const std::string& ret) {
  return "function { signature { name: \"" + name +
         "\" input_arg { name: \"x\" type: DT_FLOAT } output_arg { name: \"y\" type: DT_FLOAT } }\n" +
         body + "ret { key: \"y\" value: \"" + ret + "\" } }\n";
}

inline std::string SquareText(const std::string& kind) {
  return kind + " { name: \"s\" op: \"Square\" input: \"x\" attr { key: \"T\" value { type: DT_FLOAT } } }\n";
}

inline const char* kPlaceholderX =
    "node { name: \"x\" op: \"Placeholder\" attr { key: \"dtype\" value { type: DT_FLOAT } } }\n";

inline GraphDef ParseText(const std::string& text) {
  auto def = ParseGraphDef(text, GraphDefFormat::kText, "test.pbtxt");
  return def.ok() ? *def : GraphDef{};
}

// y = f(x) where f calls itself (or, with `mutual`, f calls g calls f).
inline GraphDef SelfCallGraph(bool noinline, bool mutual = false) {
  std::string lib = FunctionText("f", CallText("node_def", "c", "x", mutual ? "g" : "f", noinline),
                                 "c:output:0");
  if (mutual) lib += FunctionText("g", CallText("node_def", "c", "x", "f", noinline), "c:output:0");
  return ParseText(std::string(kPlaceholderX) + CallText("node", "y", "x", "f", noinline) +
                   "library {\n" + lib + "}\n");
}

// y = f0(x); f_k calls f_{k+1}; the last squares x.
inline GraphDef CallChainGraph(int depth, bool noinline) {
  std::string lib;
  for (int i = 0; i + 1 < depth; ++i) {
    lib += FunctionText("f" + std::to_string(i),
                        CallText("node_def", "c", "x", "f" + std::to_string(i + 1), noinline),
                        "c:output:0");
  }
  lib += FunctionText("f" + std::to_string(depth - 1), SquareText("node_def"), "s:y:0");
  return ParseText(std::string(kPlaceholderX) + CallText("node", "y", "x", "f0", noinline) +
                   "library {\n" + lib + "}\n");
}

// y = t_depth(x): t_k(x) = If(true, t_{k-1}, t_{k-1})(x), t_0(x) = x * x.
inline GraphDef IfTreeGraph(int depth, bool lower) {
  std::string lib = FunctionText("t0", SquareText("node_def"), "s:y:0");
  for (int k = 1; k <= depth; ++k) {
    std::string prev = "t" + std::to_string(k - 1);
    lib += FunctionText("t" + std::to_string(k),
                        TrueConstText("node_def", "p") +
                            IfText("node_def", "i", "p:output:0", "x", prev, prev, lower),
                        "i:output:0");
  }
  std::string top = "t" + std::to_string(depth);
  return ParseText(std::string(kPlaceholderX) + TrueConstText("node", "p") +
                   IfText("node", "y", "p", "x", top, top, lower) + "library {\n" + lib + "}\n");
}

}  // namespace xlens::graph::testing
