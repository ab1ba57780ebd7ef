// Graphviz runs in a child process: a graph that makes dot run for hours, allocate without end
// or crash (a chain whose every node also reads the parameter: 10 s at 100 nodes, a hang at 200,
// a segmentation fault at 990), or an input that names a FIFO, costs the viewer nothing. The child
// is the viewer's own binary run as `xlens-viewer --layout-child ENGINE`: DOT on stdin, the
// GraphLayout on stdout. It runs under a time limit and an address-space limit (RLIMIT_AS) and is
// killed with its process group, never waited on, when it passes either, when the layout is
// cancelled or when the viewer quits. What dot could not lay out is drawn by the layered layout
// (layered_layout.h), in a second child, with a note saying why.
#pragma once

#include <QByteArray>
#include <functional>
#include <string>

#include "compiler/support/status.h"
#include "viewer/graph_layout.h"

namespace xlens::viewer {

struct LayoutLimits {
  double graphviz_seconds = 10;               // dot's time; past it, the layered layout
  double layered_seconds = 30;                // the layered layout's (linear: seconds for 50k nodes)
  uint64_t memory_bytes = uint64_t{1536} << 20;  // the child's address space
  uint64_t max_result_bytes = uint64_t{512} << 20;
};

// The argument that makes xlens-viewer a layout child (main.cc); the engine follows it.
inline constexpr char kLayoutChildFlag[] = "--layout-child";

// The program run as the child: set by SetLayoutProgram, else this program when it is
// xlens-viewer, else the xlens-viewer of the build tree when it exists, else empty (then
// LayOutInChild draws every graph with the layered layout, in this process).
std::string LayoutProgram();
void SetLayoutProgram(std::string program);

// Lays `dot` out in a child. kAuto: dot unless too big for it; dot past its time or memory, or
// crashing, is followed by the layered layout with a note. An error for bad DOT (the child's own
// message) and when even the layered layout fails. `cancelled` is polled every 50 ms; when it
// says so the child is killed and the result is an error "cancelled".
StatusOr<GraphLayout> LayOutInChild(const std::string& dot, const LayoutLimits& limits,
                                    const std::function<bool()>& cancelled = nullptr);

// The child's side: reads DOT from stdin, lays it out with `engine` ("auto", "dot", "layered";
// a note for layered may follow as the next argument) and writes the layout to stdout. Exit 0,
// 1 with a message on stderr for bad DOT, 3 when Graphviz failed to lay it out.
int RunLayoutChild(int argc, char** argv);

// The layout as bytes and back (QDataStream), for the pipe between the two.
QByteArray SerializeLayout(const GraphLayout& layout);
StatusOr<GraphLayout> DeserializeLayout(const QByteArray& bytes);

}  // namespace xlens::viewer
