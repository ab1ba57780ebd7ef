// The command line every sample shares, and the Session it runs in:
//
//   SAMPLE [--jit=off|default|auto|on] [--trace FILE] [--write-graph DIR] [--xla_*] [--tf_xla_*]
//
// XLA and TF_XLA flags come from XLA_FLAGS, TF_XLA_FLAGS and TF_DUMP_GRAPH_PREFIX, then the
// command line, exactly as `xlens` reads them (dump/flags.h). --jit chooses how TensorFlow would
// have been asked to compile: not at all, its default session (only jit_scope'd nodes, or what
// TF_XLA_FLAGS turns on), auto-clustering as tf.config.optimizer.set_jit(True) does, or the
// whole graph as one must-compile function (tf.function(jit_compile=True)).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compiler/cluster/xla_jit.h"
#include "compiler/graph/graph_def.h"
#include "compiler/graph/session.h"
#include "compiler/support/status.h"
#include "dump/flags.h"
#include "profiler/trace.h"

namespace xlens::samples {

enum class JitMode {
  kOff,      // op by op; no clustering at all (TensorFlow without XLA)
  kDefault,  // TensorFlow's default session: jit_scope'd nodes, and what TF_XLA_FLAGS asks
  kAuto,     // global_jit_level ON_1 (with cpu_global_jit, which the CPU needs)
  kOn,       // the whole graph as one must-compile function
};
std::string_view JitModeName(JitMode mode);  // "off", "default", "auto", "on"

// An option a single sample adds to the common ones: --NAME VALUE or --NAME=VALUE.
struct SampleFlag {
  std::string name;  // without the dashes
  std::string help;
  std::string* value;
};

struct SampleOptions {
  std::string program;  // the sample's name, the prefix of its messages
  JitMode jit = JitMode::kOn;
  std::string trace;        // --trace FILE: a Chrome trace of the run
  std::string write_graph;  // --write-graph DIR: DIR/graph.pbtxt, the sample's GraphDef
  std::vector<std::string> debug_flags;  // the --xla_* and --tf_xla_* arguments
  DebugOptions flags;                    // the environment, then debug_flags
};

// Parses the command line. On --help prints the usage (with `description` and `extra`) and
// exits 0; on a bad argument prints one line "PROGRAM: ..." and exits 1. `default_jit` is the
// mode without --jit.
SampleOptions ParseSampleOptions(int argc, char** argv, const std::string& program,
                                 const std::string& description, JitMode default_jit,
                                 const std::vector<SampleFlag>& extra = {});

// Prints "PROGRAM: MESSAGE" (one line) to stderr and returns 1.
int Fail(const SampleOptions& options, const Status& status);

// Writes DIR/graph.pbtxt when --write-graph was given and says so on stderr.
Status MaybeWriteGraph(const SampleOptions& options, const graph::GraphDef& def);

// A Session with the JIT installed as --jit says, recording what the JIT logs.
class SampleSession {
 public:
  // `jit` overrides options.jit (a sample that runs the same graph several ways);
  // `function_name` names the must-compile function with JitMode::kOn.
  static StatusOr<std::unique_ptr<SampleSession>> Create(const SampleOptions& options,
                                                         const graph::GraphDef& def, JitMode jit,
                                                         const std::string& function_name);
  ~SampleSession();

  graph::Session& session() { return *session_; }
  // Null with JitMode::kOff.
  cluster::XlaJit* jit() { return jit_.get(); }
  // Every line the JIT logged (recompiles, lazy fallbacks), also echoed to stderr.
  const std::vector<std::string>& log() const { return *log_; }
  // Compilations so far (0 without a JIT or before the first launch).
  int64_t compilations() const;

 private:
  SampleSession() = default;
  std::shared_ptr<std::vector<std::string>> log_;
  std::unique_ptr<cluster::XlaJit> jit_;
  std::unique_ptr<graph::Session> session_;
};

// Prints what the JIT's clustering decided, graph by graph: "compiled: cluster_0 = {a, b}" per
// cluster, then "left out: {c, d}: REASON" for the op nodes left out for the same reason (the
// feeds and fetches, _Arg and _Retval, are never compiled and not listed).
void PrintClustering(const cluster::XlaJitRecord& record);

// Host tracing around a sample's run. Start fails when another trace is recording.
Status StartTrace();
// Stops recording and returns the trace, so the sample can count what it holds.
profiler::Trace StopTrace();
// Writes `trace` to options.trace when --trace was given, saying so on stderr.
Status MaybeWriteTrace(const SampleOptions& options, const profiler::Trace& trace);

// The kernels of a trace: generated and library kernels of compiled clusters, and the op-by-op
// kernels of TensorFlow's executor that compute something (not _Arg, _Retval, Const, NoOp,
// Identity, nor the launch ops of clusters).
struct KernelCount {
  int compiled = 0;
  int op_by_op = 0;
  std::vector<std::string> names;  // "fusion (cpu_kernel)", "mul (Mul)", in trace order
  int total() const { return compiled + op_by_op; }
};
KernelCount CountKernels(const profiler::Trace& trace);

}  // namespace xlens::samples
