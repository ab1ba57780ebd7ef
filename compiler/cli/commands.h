// The `xlens` subcommands. Each Run* function returns the process exit code: 0 on success, 1 on a
// user error (bad input, bad flags), after printing one clear message to stderr.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "compiler/support/status.h"

namespace xlens::graph {
struct GraphDef;
struct SavedModel;
}  // namespace xlens::graph

namespace xlens::cli {

// The default of --max-work, the scalar operations one instruction may need before eval and run
// refuse it (kDefaultMaxEvaluatorWork; repeated here so this header stays light).
inline constexpr double kDefaultMaxWork = 1e12;

struct PrintArgs {
  std::string file;
  bool short_form = false;
  bool source = false;
  bool verify = true;
};
int RunPrint(const PrintArgs& args);

struct VerifyArgs {
  std::string file;
};
int RunVerify(const VerifyArgs& args);

struct DotArgs {
  std::string file;
  std::string node;
  int radius = -1;
  int max_nodes = 300;
  std::string output;  // empty: stdout
};
int RunDot(const DotArgs& args);

struct EvalArgs {
  std::string file;
  std::string inputs;   // directory of arg0.npy, arg1.npy, ...; empty: random
  std::string outputs;  // directory for out0.npy, ...; empty: print to stdout
  uint64_t seed = 42;
  double timeout_seconds = 0;           // --timeout; 0: none
  double max_work = kDefaultMaxWork;    // --max-work; 0: none
  std::string fill_elided_constants;    // zeros, random; empty: refuse elided constants
  // --num_replicas, --num_partitions (0: not given): as RunArgs's, on the evaluator alone.
  int64_t num_replicas = 0;
  int64_t num_partitions = 0;
  double collective_timeout_seconds = 60;  // --collective_timeout
  std::string distributed;  // --distributed=mpi: the devices spread over mpirun's processes
};
int RunEval(const EvalArgs& args);

struct OptArgs {
  std::string file;
  std::string backend = "cpu";
  std::string passes;  // comma list; empty: the backend's pipeline
  bool list_passes = false;
  bool explain_fusion = false;
  bool explain_spmd = false;  // --explain-spmd: partition and print each decision
  bool short_form = false;
  bool verify_each_pass = false;
  bool pass_timing = false;
  std::vector<std::string> extra_flags;  // --xla_* flags given on the command line
};
int RunOpt(const OptArgs& args);

// Lists every flag (XLA_FLAGS and TF_XLA_FLAGS) with its default and meaning.
int RunFlags();

struct DemoArgs {
  std::string out_dir = "out/demo";
  uint64_t seed = 42;
};
int RunDemo(const DemoArgs& args);



}  // namespace xlens::cli

namespace xlens::cli {

struct RunArgs {
  std::string file;
  std::string backend = "cpu";
  std::string inputs;   // directory of arg0.npy, ...; empty: random
  std::string outputs;  // directory for out0.npy, ...; empty: print a summary
  bool reference = false;
  int iterations = 1;
  uint64_t seed = 42;
  double tolerance = 1e-3;
  bool tolerance_given = false;  // --tolerance on the command line: no type widens it
  std::string trace;  // Chrome trace to write (.json or .json.gz); empty: none
  double timeout_seconds = 0;         // --timeout; 0: none
  double max_work = kDefaultMaxWork;  // --max-work; 0: none
  bool gpu_sim_race_check = false;    // --gpu_sim_race_check (with --backend=gpu-sim)
  std::vector<std::string> extra_flags;  // --xla_* flags given on the command line
  // The GPU simulator's memory analysis and timing model (--backend=gpu-sim).
  bool gpu_sim_analysis = false;
  std::string gpu_target = "h100";
  int64_t gpu_sim_sample_blocks = 256;
  std::string fill_elided_constants;  // zeros, random; empty: refuse elided constants
  // --num_replicas, --num_partitions (0: not given). Either given: the module runs on that many
  // simulated devices on the reference evaluator (multi_device_run.h).
  int64_t num_replicas = 0;
  int64_t num_partitions = 0;
  double collective_timeout_seconds = 60;  // --collective_timeout
  // --distributed=mpi: under mpirun, the devices spread over the processes (distributed_run.h).
  std::string distributed;
};
// Compiles and runs a module (xlens run); with --reference checks it against the evaluator.
int RunRun(const RunArgs& args);

// xlens aot: tfcompile's flags (ahead-of-time compilation to an object and a C++ header).
struct AotArgs {
  std::string graph;      // GraphDef (.pb, .pbtxt) or SavedModel directory
  std::string signature;  // with a SavedModel
  std::string config;     // tf2xla.Config (.pbtxt or .pb)
  std::string hlo;        // or an HLO module
  std::string cpp_class;
  std::string out_header = "out.h";
  std::string out_function_object = "out_model.o";
  std::string out_metadata_object;  // "" : none
  std::string target_triple;
  std::string target_cpu;
  std::string target_features;
  std::string entry_point = "entry";
  bool print_memory = false;
  std::vector<std::string> extra_flags;
};
int RunAot(const AotArgs& args);

struct CompileArgs {
  std::string file;
  std::string backend = "cpu";
  std::string emit = "llvm";  // llvm, llvm-opt, ptx, obj
  std::string gpu_arch = "sm_90";  // the GPU to compile for without a device
  std::string output;         // empty: stdout
  std::vector<std::string> extra_flags;
};
// Compiles a module and writes its LLVM IR (xlens compile).
int RunCompile(const CompileArgs& args);

struct TraceSummaryArgs {
  std::string file;
  int top = 15;
};
// Prints the top kernels and the totals per category of a trace (xlens trace summary).
int RunTraceSummary(const TraceSummaryArgs& args);

struct InspectArgs {
  std::string directory;
  std::string trace;  // a Chrome trace whose kernel events are linked to the dump's kernels
  std::string json;   // write the model as JSON here ("-": standard output, instead of the text)
};
// Prints the model of a dump directory, xlens's or XLA's (xlens inspect).
int RunInspect(const InspectArgs& args);

struct CompareArgs {
  std::string directory;
  std::string backend = "auto";  // xlens's pipeline: cpu, gpu, or auto (that of XLA's optimized module)
  std::string module;            // only modules whose name contains this
  std::string trace;             // XLA's profile (jax.profiler, TensorFlow, XSpace)
  std::string xlens_trace;       // xlens's profile of the same module (xlens run --trace)
  std::string json;              // write the comparison as JSON here ("-": standard output, instead of the text)
  bool run = false;              // time xlens's kernels by running each module (xlens run --trace)
  int iterations = 3;            // with --run
};
// XLA's pipeline (the dump) beside xlens's on each before_optimizations module (xlens compare).
int RunCompare(const CompareArgs& args);



}  // namespace xlens::cli

namespace xlens::cli {

// xlens graph print|verify FILE: a TensorFlow GraphDef (.pb or .pbtxt).
struct GraphFileArgs {
  std::string file;
  std::string signature;  // of a SavedModel directory; empty: serving_default, else the only one
};
// Every node in order (name, op, attrs, inputs, device, inferred output types and shapes) and a
// summary line of node and op counts.
int RunGraphPrint(const GraphFileArgs& args);
// Loads, builds and shape-infers the graph: "OK: N nodes, shapes inferred for M of N".
int RunGraphVerify(const GraphFileArgs& args);

struct GraphDotArgs {
  std::string file;
  std::string signature;
  std::string node;
  int radius = -1;
  int max_nodes = 300;
  std::string output;  // empty: stdout
};
// The graph as DOT in TensorBoard's node styles (graph_dot.h).
int RunGraphDot(const GraphDotArgs& args);

struct GraphRunArgs {
  std::string file;
  // A SavedModel directory's signature: --feed and --fetch then name its inputs and outputs, every
  // output is fetched when none is named, and the variables are read from its checkpoint.
  std::string signature;
  std::vector<std::string> feeds;    // NAME=FILE.npy
  std::vector<std::string> fetches;  // NAME or NAME:i
  std::vector<std::string> targets;  // nodes run for their effect each step
  std::vector<std::string> init;     // targets run once before the steps (TF1's `init`)
  std::vector<std::string> assigns;  // VAR=FILE.npy: a variable's value before the steps
  int steps = 1;
  std::string outputs;  // directory for out0.npy, ...; empty: print the fetches
  std::string trace;    // Chrome trace of every op (category tf_op); empty: none
  double timeout_seconds = 0;
  // off: op by op; auto: TensorFlow's JIT (the jit level and TF_XLA_FLAGS decide what is
  // clustered); compile: the whole graph as one must-compile function (jit_compile=True).
  std::string jit = "off";
  std::string jit_level = "DEFAULT";     // the session's global_jit_level, with --jit=auto
  std::string function_name;             // with --jit=compile; default from the file name
  std::vector<std::string> extra_flags;  // --tf_xla_* and --xla_* flags
};
// Runs the graph through a Session, `steps` times with the variables carried over: op by op, or
// with TensorFlow's JIT.
int RunGraphRun(const GraphRunArgs& args);

// A graph named on the command line: a GraphDef file, or a SavedModel directory (the part of its
// meta graph that `signature` needs; saved_model.h). `saved_model` receives the model when it is
// one. Errors name the file.
StatusOr<graph::GraphDef> ReadGraphInput(const std::string& path, const std::string& signature,
                                         std::shared_ptr<graph::SavedModel>* saved_model = nullptr);

// xlens graph ops [OP...]: for each op (default: every op xlens knows) whether xlens has its
// executor kernel, its XLA lowering and its gradient, and whether TensorFlow compiles it.
struct GraphOpsArgs {
  std::vector<std::string> ops;
  std::string json;  // write the table as JSON here instead of printing it
};
int RunGraphOps(const GraphOpsArgs& args);

struct ClusterArgs {
  std::string file;
  std::string signature;
  std::string jit_level = "DEFAULT";  // the session's global_jit_level: DEFAULT, OFF, ON_1, ON_2
  std::string json;                   // write {"clusters", "unclustered", "declustered"} here
  bool verbose = false;               // list every clustered node
  std::vector<std::string> extra_flags;  // --tf_xla_* (and --xla_*) flags
};
// TensorFlow's auto-clustering of a GraphDef: clusters, then every node left out with its reason.
int RunCluster(const ClusterArgs& args);

}  // namespace xlens::cli

namespace xlens::cli {

struct BisectArgs {
  std::string file;
  std::string inputs;   // DIR of arg0.npy, ... or of a snapshot's NAME.arg0.npy, ...; empty: random
  std::string backend = "cpu";
  std::string pipeline;  // comma list of passes to run instead of the backend's pipeline
  std::string output_dir = "xlens-bisect";
  double tolerance = 1e-3;
  bool tolerance_given = false;  // --tolerance on the command line: no type widens it
  uint64_t seed = 42;
  bool passes_only = false;  // check the passes with the evaluator only; do not compile
  double timeout_seconds = 1800;      // --timeout (default: half an hour); 0: none
  double max_work = kDefaultMaxWork;  // --max-work; 0: none
  std::vector<std::string> extra_flags;
};
// Finds the pass, or the kernel's code, that makes a module compute something else (xlens bisect):
// exit 0 with the culprit, 2 when nothing departs, 1 on a user error.
int RunBisect(const BisectArgs& args);

struct ReduceArgs {
  std::string file;
  std::string test;  // crash, miscompare, bisect, or a shell command given the candidate's path
  double timeout_seconds = 60;      // per run of the test, built-in or command
  double time_limit_seconds = 300;  // the whole reduction
  double max_work = kDefaultMaxWork;  // built-in tests: the evaluator's largest instruction
  std::string output;               // empty: NAME.reduced.hlo here
  std::string backend = "cpu";
  double tolerance = 1e-3;
  bool tolerance_given = false;  // --tolerance on the command line: no type widens it
  uint64_t seed = 42;
  std::vector<std::string> extra_flags;
};
// Shrinks a module while the test keeps failing (xlens reduce).
int RunReduce(const ReduceArgs& args);

}  // namespace xlens::cli
