// The Details pane: what the selection is. For an HLO instruction: its text, shape, metadata with
// every op_name; for a fusion also its provenance (the pass that created it, the instructions it
// absorbed, a button to draw its fused computation); for a kernel its LLVM IR and PTX with
// syntax colouring, and from the trace its time per run, bytes, flops, GB/s and % of peak. For a
// clustering-stage node: its op, its cluster or why it was left out, the kernels that carry its
// name. For a stage: what it changed and the fusion decisions it made. For an instruction or
// kernel whose metadata says where it came from: the source line and its callers, each a link
// that opens the file at that line.
#pragma once

#include <QLabel>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QTabWidget>
#include <QWidget>
#include <optional>

#include "viewer/dump_model.h"
#include "viewer/syntax_highlighter.h"
#include "viewer/timeline_ruler.h"

namespace xlens::viewer {

// What the trace says of one HLO instruction's kernel spans.
struct KernelTiming {
  int64_t count = 0;
  int64_t total_ns = 0;
  int64_t bytes_accessed = 0;  // per run, from the span's args
  int64_t flops = 0;
  double mean_ns() const { return count > 0 ? static_cast<double>(total_ns) / count : 0; }
};

// One instruction as the Details pane shows it (filled by the window from the stage's HLO).
struct InstructionDetails {
  QString name, opcode, shape, text, op_type, fusion_kind, computation;
  QStringList op_names;
  QString fused_computation;       // for a fusion: the computation it calls
  QString fused_computation_text;  // its HLO text
  QString created_by;              // the pass (and step) that created it, when known
  QStringList absorbed;            // instructions fused into it, over the whole pipeline
  // Where it came from in the user's program (the outline's stack-frame table or source_file);
  // a kernel's own source stands in when the instruction has none.
  std::optional<ManifestSourceFrame> source;
  std::vector<ManifestSourceFrame> stack;  // the callers, outermost last
};

// "file:line:col" (":col" only when known).
QString SourceFrameText(const ManifestSourceFrame& frame);

class DetailsPane : public QWidget {
  Q_OBJECT
 public:
  explicit DetailsPane(QWidget* parent = nullptr);

  void Clear();
  // An HLO instruction of `module`; `kernel` and `timing` when it launches one.
  void ShowInstruction(const DumpModel& model, const ManifestModule& module, const InstructionDetails& details,
                       const ManifestKernel* kernel, const std::optional<KernelTiming>& timing,
                       double peak_gbps);
  // A node of a clustering-stage graph.
  void ShowGraphNode(const DumpModel& model, const ManifestGraph* graph, const QString& node, const QString& label,
                     const std::vector<std::pair<int64_t, std::string>>& kernels);
  // A module as compiled: its pipeline in numbers, and its kernels with their time per run from
  // the trace (`timings` parallel to module.kernels; empty without a trace), slowest first.
  void ShowModule(const ManifestModule& module, const std::vector<KernelTiming>& timings);
  // A pass: what it changed and the fusion decisions it made.
  void ShowStage(const ManifestModule& module, int stage_index);
  // A span of the timeline that names no HLO instruction.
  void ShowSpan(const QString& name, const QString& category, int64_t start_ns, int64_t duration_ns,
                const QStringList& args);

  // The summary text (for tests and the status bar).
  QString SummaryText() const { return summary_->text(); }
  // The open code tabs' titles.
  QStringList TabTitles() const;
  // Acts on a link of the summary as a click does: a source line asks for its file to be opened
  // (sourceRequested), anything else is passed on (linkActivated).
  void ActivateLink(const QString& link);

 signals:
  // The user asked to draw a fused computation.
  void drawComputationRequested(const QString& computation);
  // The user clicked a link to an instruction ("module:instruction") or a pass ("pass:module:index").
  void linkActivated(const QString& link);
  // The user clicked a source line: open `file` at `line` (column as written; 0 when unknown).
  void sourceRequested(const QString& file, qint64 line, qint64 column);

 private:
  void AddCodeTab(const QString& title, const QString& text, SourceLanguage language);
  void AddFileTab(const DumpModel& model, const std::string& file);

  QLabel* summary_;
  QPushButton* draw_fused_;
  QTabWidget* tabs_;
  QString fused_computation_;
  std::vector<ManifestSourceFrame> source_links_;  // "source:N" links index this
};

// "1.5 MiB".
QString FormatByteCount(int64_t bytes);

}  // namespace xlens::viewer
