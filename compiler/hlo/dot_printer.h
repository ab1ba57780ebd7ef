// Graphviz DOT for an HloModule, in the spirit of XLA's hlo_graph_dumper: what
// `--xla_dump_hlo_as_dot` writes and the viewer shows.
//
// One node per instruction (opcode, name, shape; the value of small constants; the number of
// parameters), filled by the kind of work it does (legend included). Data flows from operand to
// user; where the operands of a user are not interchangeable the edge carries the operand index.
// A fusion is drawn as a cluster holding its fused computation, labelled with the fusion kind;
// the bodies of while, conditional, call, async and custom-call ops are clusters too, joined to
// their caller by a dashed edge from their root. Reducers and comparators (to_apply of reduce,
// sort, scatter, map, ...) are a note on their caller's node instead. Control dependencies are
// dotted edges.
//
// Large graphs are cut to the neighbourhood of one instruction: a note node says how many
// instructions are not shown, and a dashed cut edge on each node with hidden neighbours says how
// many operands or users it lost.
#pragma once

#include <string>

#include "compiler/hlo/module.h"
#include "compiler/support/status.h"

namespace xlens {

struct DotOptions {
  // The instruction the neighbourhood is centred on (and which is highlighted); empty means the
  // root of the entry computation. A fusion names its fused root.
  std::string center;
  // Only instructions at most this many edges away from `center` are drawn; -1 draws the whole
  // module unless it has more than `max_nodes` instructions.
  int radius = -1;
  // At most this many instruction nodes are drawn, the nearest to `center` first; <= 0 means no
  // limit.
  int max_nodes = 300;
};

// The module's entry computation and everything it calls as a DOT digraph. Computations nothing
// calls from the entry are left out (the graph label counts them). Fails when `center` names no
// instruction the graph draws.
StatusOr<std::string> ModuleToDot(const HloModule& module, const DotOptions& options = {});

}  // namespace xlens
