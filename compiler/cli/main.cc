// xlens: an XLA-style compiler you can see through. See `xlens --help`.
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>
#include <stdexcept>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "compiler/cli/bug_report_commands.h"
#include "compiler/cli/commands.h"
#include "compiler/cli/multi_device_run.h"
#include "compiler/support/activity.h"
#include "compiler/support/file_io.h"
#include "compiler/support/standard_output.h"
#include "compiler/support/terminal_text.h"
#include "dump/dump_context.h"
#include "dump/flags.h"

namespace {

// A positive whole number, with a message that says so (CLI11's PositiveNumber prints the
// range of a double).
std::string PositiveWholeNumber(const std::string& text) {
  char* end = nullptr;
  errno = 0;
  long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE || value <= 0 || value > (1LL << 31) - 1) {
    return "expected a whole number from 1 to 2147483647, found '" + xlens::EscapeForTerminal(text) + "'";
  }
  return "";
}

// A seed: a whole number that fits in 64 bits (CLI11 would wrap a larger one silently).
std::string Seed(const std::string& text) {
  char* end = nullptr;
  errno = 0;
  std::strtoull(text.c_str(), &end, 10);
  if (text.empty() || text[0] == '-' || *end != '\0' || errno == ERANGE) {
    return "expected a whole number from 0 to 18446744073709551615, found '" +
           xlens::EscapeForTerminal(xlens::TruncateUtf8(text, 100)) + "'";
  }
  return "";
}

// A tolerance: finite and not negative (NaN would make every comparison pass).
std::string FiniteNonNegative(const std::string& text) {
  char* end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(value) || value < 0) {
    return "expected a finite number >= 0, found '" + xlens::EscapeForTerminal(text) + "'";
  }
  return "";
}

// --timeout and --max-work, the same for every command that runs a module.
void AddWorkLimits(CLI::App& command, double& timeout_seconds, double& max_work) {
  command.add_option("--timeout", timeout_seconds,
                     "Stop after this many seconds with exit 1, saying what was running (0: no limit)")
      ->check(CLI::Validator(FiniteNonNegative, "SECONDS"));
  command.add_option("--max-work", max_work,
                     "Refuse, before running, an instruction needing more scalar operations than this "
                     "(0: no limit)")
      ->check(CLI::Validator(FiniteNonNegative, "OPERATIONS"))
      ->capture_default_str();
}

// `xlens frobnicate` names the command it did not know and the closest one it does.
int UnknownCommand(const CLI::App& app, std::string_view given) {
  std::string names, closest;
  int best = 1 << 30;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    const std::string& name = sub->get_name();
    names += (names.empty() ? "" : ", ") + name;
    int d = xlens::EditDistance(given, name);
    if (d < best) best = d, closest = name;
  }
  std::string hint = best <= 3 ? " (did you mean '" + closest + "'?)" : "";
  if (given.empty()) {
    std::fprintf(stderr, "xlens: no command given; the commands are %s (xlens --help)\n", names.c_str());
  } else {
    std::fprintf(stderr, "xlens: unknown command '%s'%s; the commands are %s\n",
                 xlens::EscapeForTerminal(xlens::TruncateUtf8(given, 100)).c_str(), hint.c_str(),
                 names.c_str());
  }
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace xlens::cli;
  xlens::RememberActivityOnAllocationFailure();
  // A file past the size limit (ulimit -f) is a write that fails with EFBIG, reported like a full
  // disk, instead of a signal that ends the process with the file half written.
  std::signal(SIGXFSZ, SIG_IGN);
  CLI::App app{"xlens: an XLA-style compiler you can see through"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "xlens 0.1");
  std::string max_input_size;
  app.add_option("--max-input-size", max_input_size,
                 "Largest input file read (default 2G; also XLENS_MAX_INPUT_SIZE): 512M, 4G, ...");

  PrintArgs print_args;
  auto* print = app.add_subcommand("print", "Parse an HLO module and print it (long form by default)");
  print->add_option("file", print_args.file, "HLO text file")->required();
  print->add_flag("--short", print_args.short_form, "Print XLA's short parsable form");
  print->add_flag("--source", print_args.source,
                  "After each instruction, the line of the program it came from and the frames "
                  "above it, as a // comment");
  print->add_flag("!--no-verify", print_args.verify, "Do not run the verifier");

  VerifyArgs verify_args;
  auto* verify = app.add_subcommand("verify", "Parse and verify an HLO module");
  verify->add_option("file", verify_args.file, "HLO text file")->required();

  DotArgs dot_args;
  auto* dot = app.add_subcommand("dot", "Draw an HLO module as a Graphviz DOT graph");
  dot->add_option("file", dot_args.file, "HLO text file")->required();
  dot->add_option("--node", dot_args.node, "Center the graph on this instruction");
  dot->add_option("--radius", dot_args.radius, "With --node: how many edges around it to show");
  dot->add_option("--max-nodes", dot_args.max_nodes, "Above this, show only the neighbourhood")
      ->check(CLI::Validator(PositiveWholeNumber, "POSITIVE"));
  dot->add_option("-o,--output", dot_args.output, "Write here instead of stdout");

  EvalArgs eval_args;
  auto* eval = app.add_subcommand("eval", "Run an HLO module on the reference evaluator");
  eval->add_option("file", eval_args.file, "HLO text file")->required();
  eval->add_option("--inputs", eval_args.inputs,
                   "Directory with arg0.npy, arg1.npy, ... in parameter order (default: random)");
  eval->add_option("--outputs", eval_args.outputs,
                   "Write out0.npy, out1.npy, ... (tuple leaves in order) here; bf16 and f8 are "
                   "written as float32 and s4/u4 as int8/uint8, exactly, since .npy has no dtype for them");
  eval->add_option("--seed", eval_args.seed, "Seed of the random inputs")
      ->check(CLI::Validator(Seed, "SEED"));
  eval->add_option("--fill_elided_constants", eval_args.fill_elided_constants,
                   "Give constants printed as {...} values (zeros, or random from --seed) instead "
                   "of refusing the module")
      ->check(CLI::IsMember({"zeros", "random"}));
  AddWorkLimits(*eval, eval_args.timeout_seconds, eval_args.max_work);
  eval->add_option("--num_replicas", eval_args.num_replicas,
                   "Evaluate on this many replicas, each with --num_partitions devices, the "
                   "collectives between them (as xlens run does, without compiling)")
      ->check(CLI::Validator(PositiveWholeNumber, "POSITIVE"));
  eval->add_option("--num_partitions", eval_args.num_partitions,
                   "Evaluate on this many partitions per replica; --inputs and --outputs as xlens run's")
      ->check(CLI::Validator(PositiveWholeNumber, "POSITIVE"));
  eval->add_option("--collective_timeout", eval_args.collective_timeout_seconds,
                   "With several devices: fail a collective that a device waits at this many seconds "
                   "(deadlocks are reported at once; 0: no limit)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  eval->add_option("--distributed", eval_args.distributed,
                   "Under mpirun: spread the devices over the processes, collectives as MPI calls")
      ->check(CLI::IsMember({"mpi"}));

  OptArgs opt_args;
  auto* opt = app.add_subcommand(
      "opt", "Run the HLO pass pipeline (or --passes) and print the result; XLA dump flags work here");
  opt->add_option("file", opt_args.file, "HLO text file");
  opt->add_option("--backend", opt_args.backend, "cpu, gpu or gpu-sim")->capture_default_str();
  opt->add_option("--passes", opt_args.passes, "Run these passes (comma-separated) instead of the pipeline");
  opt->add_flag("--list-passes", opt_args.list_passes, "List both pipelines and their passes");
  opt->add_flag("--explain-fusion", opt_args.explain_fusion,
                "Print every fusion decision (fused A into B / refused: why) instead of the module");
  opt->add_flag("--explain-spmd", opt_args.explain_spmd,
                "Partition the module for its num_partitions (spmd-partitioning) and print why each "
                "instruction got its collectives instead of the module");
  opt->add_flag("--short", opt_args.short_form, "Print XLA's short parsable form");
  opt->add_flag("--verify-each-pass", opt_args.verify_each_pass,
                "Verify after every pass and catch passes that change the module silently");
  opt->add_flag("--pass-timing", opt_args.pass_timing,
                "Print every pass that ran with its pipeline, wall time and whether it changed the module");
  opt->allow_extras();
  opt->footer("XLA flags (--xla_dump_to=DIR, --xla_dump_hlo_pass_re=.*, --xla_disable_hlo_passes=..., ...) "
              "are read from XLA_FLAGS and from this command line; 'xlens flags' lists them.");

  RunArgs run_args;
  auto* run = app.add_subcommand(
      "run", "Compile a module for the CPU, run it and time it; --reference checks it against the evaluator");
  run->add_option("file", run_args.file, "HLO text file")->required();
  run->add_option("--backend", run_args.backend,
                  "cpu, gpu (a CUDA GPU) or gpu-sim (the GPU backend's kernels on the GPU simulator, no GPU needed)")
      ->capture_default_str();
  run->add_flag("--gpu_sim_race_check", run_args.gpu_sim_race_check,
                "With --backend=gpu-sim: fail a kernel whose threads race on shared or global memory");
  run->add_option("--inputs", run_args.inputs,
                  "Directory with arg0.npy, arg1.npy, ... in parameter order (default: random)");
  run->add_option("--outputs", run_args.outputs,
                  "Write out0.npy, out1.npy, ... here; bf16 and f8 are written as float32 and "
                  "s4/u4 as int8/uint8, exactly, since .npy has no dtype for them");
  run->add_flag("--reference", run_args.reference,
                "Compare every output with the reference evaluator; exit 1 beyond the tolerance");
  CLI::Option* run_tolerance = run->add_option("--tolerance", run_args.tolerance,
                  "Absolute and relative tolerance of --reference; when not given, f16 and bf16 "
                  "outputs at least 0.01, f8 and f4 at least one unit in the last place")
      ->check(CLI::Validator(FiniteNonNegative, "TOLERANCE"))
      ->capture_default_str();
  run->add_option("--iterations", run_args.iterations, "Runs to time (the median is printed)")
      ->check(CLI::Validator(PositiveWholeNumber, "POSITIVE"))
      ->capture_default_str();
  run->add_option("--seed", run_args.seed, "Seed of the random inputs")
      ->check(CLI::Validator(Seed, "SEED"));
  run->add_option("--fill_elided_constants", run_args.fill_elided_constants,
                  "Give constants printed as {...} values (zeros, or random from --seed) instead "
                  "of refusing the module")
      ->check(CLI::IsMember({"zeros", "random"}));
  AddWorkLimits(*run, run_args.timeout_seconds, run_args.max_work);
  run->add_option("--trace", run_args.trace,
                  "Write a Chrome trace of the compilation and every run (timeline.ctf.json; a name "
                  "ending in .gz is compressed) for Perfetto UI or chrome://tracing");
  run->add_flag("--gpu_sim_analysis", run_args.gpu_sim_analysis,
                "With --backend=gpu-sim: count every kernel's memory requests, sectors, bank conflicts "
                "and DRAM bytes, and print its predicted time and bound on --gpu_target");
  run->add_option("--gpu_target", run_args.gpu_target, "The GPU the analysis predicts for: h100 or h200")
      ->capture_default_str();
  run->add_option("--gpu_sim_sample_blocks", run_args.gpu_sim_sample_blocks,
                  "Analyse at most this many blocks of a launch, evenly spread, and scale (0: all)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  run->add_option("--num_replicas", run_args.num_replicas,
                  "Run on this many replicas (XLA's name), each with --num_partitions devices: "
                  "simulated CPU devices in this process (with --backend=gpu-sim GPU simulators, "
                  "with --backend=gpu one GPU each through NCCL), the collectives between them")
      ->check(CLI::Validator(PositiveWholeNumber, "POSITIVE"));
  run->add_option("--num_partitions", run_args.num_partitions,
                  "Run on this many partitions per replica (an SPMD-partitioned module's count); "
                  "--inputs DIR then holds device_0/, device_1/, ... or global arrays split by the "
                  "parameters' shardings, and --outputs DIR gets device_0/, ...")
      ->check(CLI::Validator(PositiveWholeNumber, "POSITIVE"));
  run->add_option("--collective_timeout", run_args.collective_timeout_seconds,
                  "With several devices: fail a collective that a device waits at this many seconds "
                  "(deadlocks are reported at once; 0: no limit)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  run->add_option("--distributed", run_args.distributed,
                  "Under mpirun: spread the devices over the processes (each rank runs its block of "
                  "device ids and writes their outputs), collectives as MPI calls")
      ->check(CLI::IsMember({"mpi"}));
  run->allow_extras();
  run->footer("XLA flags (--xla_dump_to=DIR, --xla_disable_hlo_passes=fusion, "
              "--xla_backend_optimization_level=N, --xla_hlo_profile, ...) are read from XLA_FLAGS and from this "
              "command line. --xla_hlo_profile prints where the time went, kernel by kernel.");

  CompileArgs compile_args;
  auto* compile = app.add_subcommand("compile", "Compile a module and write its LLVM IR");
  compile->add_option("file", compile_args.file, "HLO text file")->required();
  compile->add_option("--emit", compile_args.emit,
                      "llvm (before LLVM's optimization), llvm-opt (after), obj (an object file for this CPU) "
                      "or ptx (implies --backend=gpu)")
      ->capture_default_str();
  compile->add_option("--gpu_arch", compile_args.gpu_arch, "The GPU to compile for: sm_80, sm_90, ...")
      ->capture_default_str();
  compile->add_option("--backend", compile_args.backend, "cpu, gpu or gpu-sim (as gpu)")->capture_default_str();
  compile->add_option("-o,--output", compile_args.output, "Write here instead of stdout");
  compile->allow_extras();

  AotArgs aot_args;
  auto* aot = app.add_subcommand(
      "aot", "Compile ahead of time, as tfcompile: a graph and its tf2xla.Config (or HLO) to an object "
             "file and a C++ header whose class runs it; the program needs no xlens");
  aot->add_option("--graph", aot_args.graph, "GraphDef (.pb or .pbtxt) or SavedModel directory");
  aot->add_option("--signature", aot_args.signature, "A SavedModel's signature (default: serving_default)");
  aot->add_option("--config", aot_args.config,
                  "tfcompile's tf2xla.Config (text or binary): feeds, fetches, variables");
  aot->add_option("--hlo", aot_args.hlo, "An HLO module instead of a graph");
  aot->add_option("--cpp_class", aot_args.cpp_class, "The generated class: Name or ns1::ns2::Name")->required();
  aot->add_option("--out_header", aot_args.out_header, "The C++ header to write")->capture_default_str();
  aot->add_option("--out_function_object", aot_args.out_function_object, "The object file to write")
      ->capture_default_str();
  aot->add_option("--out_metadata_object", aot_args.out_metadata_object,
                  "Also write an object holding the function's names, shapes and sizes as data");
  aot->add_option("--target_triple", aot_args.target_triple,
                  "LLVM target triple (default: this machine's), e.g. aarch64-unknown-linux-gnu");
  aot->add_option("--target_cpu", aot_args.target_cpu, "LLVM CPU name (default: generic)");
  aot->add_option("--target_features", aot_args.target_features, "LLVM features, e.g. +avx2,+fma");
  aot->add_option("--entry_point", aot_args.entry_point, "The entry function's C name")->capture_default_str();
  aot->add_flag("--print-memory,--print_memory", aot_args.print_memory,
                "Print the bytes of weights, temporaries, arguments and results");
  // tfcompile's switches for what the header holds: ours always has the names and the shapes.
  bool aot_ignored = false;
  aot->add_flag("--gen_name_to_index,--gen_program_shape", aot_ignored,
                "Accepted for tfcompile's command lines: the header always has the names and shapes");
  aot->allow_extras();
  aot->footer("XLA flags (--xla_dump_to=DIR, --xla_disable_hlo_passes=..., ...) are read from XLA_FLAGS and "
              "from this command line, as for the JIT.");

  BisectArgs bisect_args;
  auto* bisect = app.add_subcommand(
      "bisect", "Find the pass, or the kernel's code, that makes a module compute something else");
  bisect->add_option("file", bisect_args.file, "HLO text file")->required();
  bisect->add_option("--inputs", bisect_args.inputs,
                     "Directory with arg0.npy, ... (or a snapshot's NAME.arg0.npy, ...); default: random");
  bisect->add_option("--backend", bisect_args.backend, "cpu, gpu or gpu-sim")->capture_default_str();
  bisect->add_option("--pipeline", bisect_args.pipeline,
                     "Comma-separated passes to run instead of the backend's pipeline");
  bisect->add_option("-o,--output", bisect_args.output_dir,
                     "Directory for the modules before and after the culprit, their diff and the inputs")
      ->capture_default_str();
  CLI::Option* bisect_tolerance = bisect->add_option("--tolerance", bisect_args.tolerance,
                     "Absolute and relative tolerance; when not given, f16 and bf16 outputs at "
                     "least 0.01, f8 and f4 at least one unit in the last place")
      ->check(CLI::Validator(FiniteNonNegative, "TOLERANCE"))
      ->capture_default_str();
  bisect->add_option("--seed", bisect_args.seed, "Seed of the random inputs")->check(CLI::Validator(Seed, "SEED"));
  bisect->add_flag("--passes-only", bisect_args.passes_only,
                   "Check every pass with the evaluator, but do not compile");
  AddWorkLimits(*bisect, bisect_args.timeout_seconds, bisect_args.max_work);
  bisect->get_option("--timeout")
      ->description("Stop after this many seconds with exit 1, saying what was running (default half an "
                    "hour, so a module that never ends cannot hang it; 0: no limit)")
      ->capture_default_str();
  bisect->allow_extras();

  ReduceArgs reduce_args;
  auto* reduce = app.add_subcommand("reduce", "Shrink a module while a test keeps failing on it");
  reduce->add_option("file", reduce_args.file, "HLO text file")->required();
  reduce->add_option("--test", reduce_args.test,
                     "crash, miscompare, bisect, or a shell command that gets the candidate's path "
                     "({} in it, else appended) and exits non-zero while the bug is there")
      ->required();
  reduce->add_option("--timeout", reduce_args.timeout_seconds,
                     "Seconds one run of the test may take, built-in or command: a candidate past it "
                     "does not fail the test; past it on the module as given, reduce stops with exit 1")
      ->check(CLI::Validator(FiniteNonNegative, "SECONDS"))
      ->capture_default_str();
  reduce->add_option("--time-limit", reduce_args.time_limit_seconds,
                     "Seconds the whole reduction may take (the smallest module so far is the result)")
      ->check(CLI::Validator(FiniteNonNegative, "SECONDS"))
      ->capture_default_str();
  reduce->add_option("-o,--output", reduce_args.output, "Where to write the reduced module (default NAME.reduced.hlo)");
  reduce->add_option("--backend", reduce_args.backend, "cpu, gpu or gpu-sim, for the built-in tests")->capture_default_str();
  CLI::Option* reduce_tolerance = reduce->add_option("--tolerance", reduce_args.tolerance,
                     "Tolerance of --test=miscompare and bisect; when not given, f16 and bf16 "
                     "outputs at least 0.01, f8 and f4 at least one unit in the last place")
      ->check(CLI::Validator(FiniteNonNegative, "TOLERANCE"))
      ->capture_default_str();
  reduce->add_option("--seed", reduce_args.seed, "Seed of the random inputs")->check(CLI::Validator(Seed, "SEED"));
  reduce->add_option("--max-work", reduce_args.max_work,
                     "Built-in tests: refuse to evaluate an instruction needing more scalar operations than "
                     "this (0: no limit)")
      ->check(CLI::Validator(FiniteNonNegative, "OPERATIONS"))
      ->capture_default_str();
  reduce->allow_extras();

  TraceSummaryArgs trace_summary_args;
  auto* trace = app.add_subcommand(
      "trace", "Read a profile: a Chrome trace (ours, jax.profiler's, TensorFlow's, PyTorch's) or an XSpace (*.xplane.pb)");
  trace->require_subcommand(1);
  auto* trace_summary = trace->add_subcommand(
      "summary", "Print the kernels that took the most time, the totals per category and per HLO module");
  trace_summary->add_option("file", trace_summary_args.file,
                            "timeline.ctf.json, *.trace.json.gz, perfetto_trace.json.gz or *.xplane.pb")
      ->required();
  trace_summary->add_option("--top", trace_summary_args.top, "Kernels to list")->capture_default_str();

  InspectArgs inspect_args;
  auto* inspect = app.add_subcommand(
      "inspect", "A dump directory (xlens's, or XLA's without a manifest): modules, stages, kernels and their source lines");
  inspect->add_option("directory", inspect_args.directory, "The dump directory (--xla_dump_to)")->required();
  inspect->add_option("--trace", inspect_args.trace, "A Chrome trace whose kernel events are linked to the kernels");
  inspect->add_option("--json", inspect_args.json, "Write the model as JSON to this file ('-': standard output)");

  CompareArgs compare_args;
  auto* compare = app.add_subcommand(
      "compare", "XLA's pipeline beside xlens's: each dumped before_optimizations module compiled by xlens, its kernels "
                 "matched to those of XLA's after_optimizations module by op_name and source line");
  compare->add_option("directory", compare_args.directory, "The dump directory (--xla_dump_to)")->required();
  compare->add_option("--backend", compare_args.backend, "xlens's pipeline: cpu, gpu, or auto (as XLA's dump)")
      ->capture_default_str();
  compare->add_option("--module", compare_args.module, "Only modules whose name contains this");
  compare->add_option("--trace", compare_args.trace, "XLA's profile: per-kernel times of XLA's kernels");
  compare->add_option("--xlens-trace", compare_args.xlens_trace,
                      "xlens's profile of the module (xlens run --trace): per-kernel times of xlens's kernels");
  compare->add_option("--json", compare_args.json, "Write the comparison as JSON to this file ('-': standard output)");
  compare->add_flag("--run", compare_args.run, "Time xlens's kernels by running each module (xlens run --trace; elided constants run as zeros)");
  compare->add_option("--iterations", compare_args.iterations, "Runs of each module with --run")->capture_default_str();

  // xlens graph: TensorFlow GraphDefs, op by op.
  auto* graph_cmd = app.add_subcommand("graph", "TensorFlow GraphDefs (.pb, .pbtxt): print, dot, verify, run op by op");
  graph_cmd->require_subcommand(1);
  GraphFileArgs graph_print_args;
  auto* graph_print = graph_cmd->add_subcommand(
      "print", "Every node in order (op, inputs, device, attrs, inferred output types and shapes) and the op counts");
  graph_print->add_option("file", graph_print_args.file, "GraphDef (.pb or .pbtxt) or SavedModel directory")->required();
  graph_print->add_option("--signature", graph_print_args.signature, "A SavedModel directory's signature (default: serving_default, else its only one)");
  GraphFileArgs graph_verify_args;
  auto* graph_verify = graph_cmd->add_subcommand(
      "verify", "Load the graph, check every node and edge, infer shapes; exit 1 with the first error");
  graph_verify->add_option("file", graph_verify_args.file, "GraphDef (.pb or .pbtxt) or SavedModel directory")->required();
  graph_verify->add_option("--signature", graph_verify_args.signature, "A SavedModel directory's signature (default: serving_default, else its only one)");
  GraphDotArgs graph_dot_args;
  auto* graph_dot = graph_cmd->add_subcommand("dot", "Draw the graph as Graphviz DOT, in TensorBoard's node styles");
  graph_dot->add_option("file", graph_dot_args.file, "GraphDef (.pb or .pbtxt) or SavedModel directory")->required();
  graph_dot->add_option("--signature", graph_dot_args.signature, "A SavedModel directory's signature (default: serving_default, else its only one)");
  graph_dot->add_option("--node", graph_dot_args.node, "Center the drawing on this node");
  graph_dot->add_option("--radius", graph_dot_args.radius, "With --node: how many edges around it to show");
  graph_dot->add_option("--max-nodes", graph_dot_args.max_nodes, "Above this, show only the neighbourhood")
      ->check(CLI::Validator(PositiveWholeNumber, "POSITIVE"))
      ->capture_default_str();
  graph_dot->add_option("-o,--output", graph_dot_args.output, "Write here instead of stdout");
  GraphRunArgs graph_run_args;
  auto* graph_run = graph_cmd->add_subcommand(
      "run", "Run the graph op by op (TensorFlow without XLA) through a Session");
  graph_run->add_option("file", graph_run_args.file, "GraphDef (.pb or .pbtxt) or SavedModel directory")->required();
  graph_run->add_option("--signature", graph_run_args.signature,
                        "A SavedModel's signature (default: serving_default, else its only one): --feed and --fetch name its inputs and outputs, all outputs are fetched by default, and its variables are read from variables/");
  graph_run->add_option("--feed", graph_run_args.feeds, "NAME=FILE.npy: the value of a placeholder (repeat)")
      ->allow_extra_args(false);
  graph_run->add_option("--fetch", graph_run_args.fetches, "NAME or NAME:INDEX to compute (repeat; in order)")
      ->allow_extra_args(false);
  graph_run->add_option("--target", graph_run_args.targets, "A node run for its effect every step (repeat)")
      ->allow_extra_args(false);
  graph_run->add_option("--init", graph_run_args.init,
                        "A node run once before the steps, such as TF1's 'init' (repeat)")
      ->allow_extra_args(false);
  graph_run->add_option("--assign", graph_run_args.assigns,
                        "VAR=FILE.npy: the value of a variable (its VarHandleOp/VariableV2 node, or a TF2 function's "
                        "captured resource Placeholder) after --init, before the steps (repeat)")
      ->allow_extra_args(false);
  graph_run->add_option("--steps", graph_run_args.steps,
                        "Run the fetches and targets this many times, variables carried over; scalar fetches "
                        "are printed per step")
      ->check(CLI::Validator(PositiveWholeNumber, "POSITIVE"))
      ->capture_default_str();
  graph_run->add_option("--outputs", graph_run_args.outputs,
                        "Write the last step's fetches as out0.npy, out1.npy, ... (fetch order) here");
  graph_run->add_option("--trace", graph_run_args.trace,
                        "Write a Chrome trace with one span per op (category tf_op) for Perfetto UI");
  graph_run->add_option("--timeout", graph_run_args.timeout_seconds,
                        "Stop after this many seconds with exit 1, saying what was running (0: no limit)")
      ->check(CLI::Validator(FiniteNonNegative, "SECONDS"));
  graph_run->add_option("--jit", graph_run_args.jit,
                        "off: op by op; auto: TensorFlow's JIT, clusters compiled and launched as the "
                        "jit level and TF_XLA_FLAGS say; compile: the whole graph as one must-compile "
                        "function (tf.function(jit_compile=True)): its variables are arguments and their "
                        "updates results, written back after each step; --init runs op by op")
      ->check(CLI::IsMember({"off", "auto", "compile"}))
      ->capture_default_str();
  graph_run->add_option("--jit-level", graph_run_args.jit_level,
                        "With --jit=auto: the session's global_jit_level (DEFAULT, OFF, ON_1, ON_2); "
                        "--tf_xla_auto_jit overrides it, as in TensorFlow")
      ->capture_default_str();
  graph_run->add_option("--function", graph_run_args.function_name,
                        "With --jit=compile: the function's name (default: the file's name)");
  graph_run->allow_extras();
  GraphOpsArgs graph_ops_args;
  auto* graph_ops = graph_cmd->add_subcommand(
      "ops", "What xlens has for each op (default: every op it knows): executor kernel, XLA lowering, gradient; and whether TensorFlow compiles it");
  graph_ops->add_option("op", graph_ops_args.ops, "Op names (such as a model's ops) to look up");
  graph_ops->add_option("--json", graph_ops_args.json, "Write the table as JSON here");

  ClusterArgs cluster_args;
  auto* cluster_cmd = app.add_subcommand(
      "cluster",
      "TensorFlow's auto-clustering of a GraphDef (TF_XLA_FLAGS and --tf_xla_* flags): the clusters, "
      "then every node left out with the reason");
  cluster_cmd->add_option("file", cluster_args.file, "GraphDef (.pb or .pbtxt) or SavedModel directory")->required();
  cluster_cmd->add_option("--signature", cluster_args.signature, "A SavedModel directory's signature (default: serving_default, else its only one)");
  cluster_cmd->add_option("--jit-level", cluster_args.jit_level,
                          "The session's global_jit_level: DEFAULT (OFF), OFF, ON_1 or ON_2; "
                          "--tf_xla_auto_jit overrides it, as in TensorFlow")
      ->capture_default_str();
  cluster_cmd->add_option("--json", cluster_args.json,
                          "Write {\"clusters\": {...}, \"unclustered\": {node: reason}, "
                          "\"declustered\": {node: reason}} here");
  cluster_cmd->add_flag("-v,--verbose", cluster_args.verbose, "List every node of every cluster");
  cluster_cmd->allow_extras();

  app.add_subcommand("flags", "List every XLA/TF flag xlens understands, with its default");

  BundleArgs bundle_args;
  auto* bundle = app.add_subcommand(
      "bundle", "Pack a dump directory (--xla_dump_to) into one .tar.gz for a bug report");
  bundle->add_option("dump_dir", bundle_args.dump_dir, "The dump directory (it has manifest.json)")
      ->required();
  bundle->add_option("-o,--output", bundle_args.output, "The bundle to write (default: DIR.bundle.tar.gz)");
  bundle->add_option("--trace", bundle_args.trace, "A Chrome trace to include (xlens run --trace)");
  bundle->add_option("--graphs", bundle_args.graphs,
                     "The clustering graph dumps to include ($TF_DUMP_GRAPH_PREFIX)");
  bundle->add_option("--max-size", bundle_args.max_size,
                     "Largest bundle (64K, 10M, ...): the per-pass dumps, then the trace, are left out to fit");
  bundle->add_flag("--strip-constants", bundle_args.strip_constants,
                   "Elide large constants as {...} and leave out LLVM IR, PTX, .dot and .html, so private "
                   "weights are not attached (such a bundle cannot be replayed)");

  ReplayArgs replay_args;
  auto* replay = app.add_subcommand(
      "replay", "Recompile and rerun a bundle's module on its recorded arguments; say whether the "
                "failure is reproduced (exit 0), not reproduced (exit 2)");
  replay->add_option("bundle", replay_args.bundle, "The bundle (.tar.gz from xlens bundle)")->required();
  replay->add_option("--backend", replay_args.backend, "cpu, gpu or gpu-sim (default: the recorded backend)");
  replay->add_option("--iterations", replay_args.iterations, "Runs to compare (a flaky failure shows in some)")
      ->check(CLI::Validator(PositiveWholeNumber, "POSITIVE"))
      ->capture_default_str();
  CLI::Option* replay_tolerance = replay->add_option("--tolerance", replay_args.tolerance,
                     "Absolute and relative tolerance of the comparisons; when not given, f16 and "
                     "bf16 outputs at least 0.01, f8 and f4 at least one unit in the last place")
      ->check(CLI::Validator(FiniteNonNegative, "TOLERANCE"))
      ->capture_default_str();
  AddWorkLimits(*replay, replay_args.timeout_seconds, replay_args.max_work);
  replay->get_option("--timeout")
      ->description("Stop after this many seconds with exit 1, saying what was running (default 10 minutes, "
                    "so a recorded module that never ends cannot hang it; 0: no limit)")
      ->capture_default_str();

  DemoArgs demo_args;
  auto* demo = app.add_subcommand(
      "demo", "Parse, verify, evaluate and draw a built-in module: reduce_sum(x + y*z)");
  demo->add_option("--out", demo_args.out_dir, "Directory for the files the demo writes");
  demo->add_option("--seed", demo_args.seed, "Seed of the random inputs")
      ->check(CLI::Validator(Seed, "SEED"));

  // Recorded with every dumped module, so a bug bundle says how its modules were compiled.
  xlens::SetDumpCommandLine(std::vector<std::string>(argv, argv + argc));

  // --max-input-size applies to every command, before or after its name: taken out here so each
  // command's own parser (some keep unknown --xla_* flags as extras) never sees it.
  std::vector<char*> args(argv, argv + argc);
  for (size_t i = 1; i < args.size();) {
    std::string_view arg = args[i];
    if (arg.rfind("--max-input-size=", 0) == 0) {
      max_input_size = std::string(arg.substr(std::strlen("--max-input-size=")));
      args.erase(args.begin() + static_cast<std::ptrdiff_t>(i));
    } else if (arg == "--max-input-size" && i + 1 < args.size()) {
      max_input_size = args[i + 1];
      args.erase(args.begin() + static_cast<std::ptrdiff_t>(i), args.begin() + static_cast<std::ptrdiff_t>(i) + 2);
    } else {
      ++i;
    }
  }
  argc = static_cast<int>(args.size());
  argv = args.data();
  // `--gpu_arch=` with nothing after '=' would make CLI11 take the next word as the value and
  // then complain about something else. XLA flags may be empty (--xla_disable_hlo_passes=).
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--") break;
    if (arg.size() > 3 && arg.starts_with("--") && arg.ends_with("=") && !arg.starts_with("--xla_") &&
        !arg.starts_with("--tf_")) {
      std::fprintf(stderr, "xlens: %s: expected a value after '='\n",
                   xlens::EscapeForTerminal(xlens::TruncateUtf8(arg.substr(0, arg.size() - 1), 100)).c_str());
      return 1;
    }
  }
  // The first word that is not an option must be a command.
  bool asked_for_help = false, found_command = false;
  for (int i = 1; i < argc && !found_command; ++i) {
    std::string_view arg = argv[i];
    if (arg == "-h" || arg == "--help" || arg == "--version") asked_for_help = true;
    if (!arg.empty() && arg[0] == '-') continue;
    bool known = false;
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
      known = known || sub->check_name(std::string(arg));
    }
    if (!known) return UnknownCommand(app, arg);
    found_command = true;
  }
  if (!found_command && !asked_for_help) return UnknownCommand(app, "");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; a bad flag is a user error: one line and exit 1.
    if (e.get_exit_code() == 0) {
      const int exit_code = app.exit(e);
      xlens::Status output = xlens::FlushStandardOutput();
      if (output.ok()) return exit_code;
      std::fprintf(stderr, "xlens: %s\n", output.message().c_str());
      return 1;
    }
    if (std::string_view(e.what()) == "A subcommand is required" && *graph_cmd) {
      std::fprintf(stderr, "xlens: 'xlens graph' needs a subcommand: print, dot, verify, run or ops (xlens graph --help)\n");
      return 1;
    }
    if (std::string_view(e.what()) == "A subcommand is required" && *trace) {
      std::fprintf(stderr, "xlens: 'xlens trace' needs a subcommand: summary (xlens trace --help)\n");
      return 1;
    }
    std::fprintf(stderr, "xlens: %s (run 'xlens --help' for usage)\n",
                 xlens::EscapeForTerminal(xlens::TruncateUtf8(e.what(), 2000)).c_str());
    return 1;
  }
  // A --tolerance given is held to as given; the default one widens for narrow floats.
  run_args.tolerance_given = run_tolerance->count() > 0;
  bisect_args.tolerance_given = bisect_tolerance->count() > 0;
  reduce_args.tolerance_given = reduce_tolerance->count() > 0;
  replay_args.tolerance_given = replay_tolerance->count() > 0;
  if (!max_input_size.empty() || std::getenv("XLENS_MAX_INPUT_SIZE") != nullptr) {
    std::string_view source = max_input_size.empty() ? "XLENS_MAX_INPUT_SIZE" : "--max-input-size";
    auto bytes = xlens::ParseByteSize(max_input_size.empty() ? std::getenv("XLENS_MAX_INPUT_SIZE") : max_input_size);
    if (!bytes.ok()) {
      std::fprintf(stderr, "xlens: %.*s: %s\n", static_cast<int>(source.size()), source.data(),
                   bytes.status().message().c_str());
      return 1;
    }
    xlens::SetMaxInputBytes(*bytes);
  }

  // A module can ask for more memory than the machine has (f32[1000000000000] is valid HLO):
  // that is the user's input being too big, so it gets a message, not an abort.
  try {
    const int exit_code = [&]() -> int {
      if (*print) return RunPrint(print_args);
      if (*verify) return RunVerify(verify_args);
      if (*dot) return RunDot(dot_args);
      if (*eval && (eval_args.num_replicas > 0 || eval_args.num_partitions > 0 ||
                    !eval_args.distributed.empty())) {
        RunArgs on_devices;
        on_devices.file = eval_args.file;
        on_devices.inputs = eval_args.inputs;
        on_devices.outputs = eval_args.outputs;
        on_devices.seed = eval_args.seed;
        on_devices.timeout_seconds = eval_args.timeout_seconds;
        on_devices.max_work = eval_args.max_work;
        on_devices.fill_elided_constants = eval_args.fill_elided_constants;
        on_devices.num_replicas = eval_args.num_replicas;
        on_devices.num_partitions = eval_args.num_partitions;
        on_devices.collective_timeout_seconds = eval_args.collective_timeout_seconds;
        on_devices.distributed = eval_args.distributed;
        return RunOnDevices(on_devices, /*compiled=*/false);
      }
      if (*eval) return RunEval(eval_args);
      if (*demo) return RunDemo(demo_args);
      if (*opt) {
        opt_args.extra_flags = opt->remaining();
        return RunOpt(opt_args);
      }
      if (*run) {
        run_args.extra_flags = run->remaining();
        // Several devices: one executable each, in one process.
        if (run_args.num_replicas > 0 || run_args.num_partitions > 0 || !run_args.distributed.empty()) {
          return RunOnDevices(run_args, /*compiled=*/true);
        }
        return RunRun(run_args);
      }
      if (*compile) {
        compile_args.extra_flags = compile->remaining();
        return RunCompile(compile_args);
      }
      if (*aot) {
        aot_args.extra_flags = aot->remaining();
        return RunAot(aot_args);
      }
      if (*bisect) {
        bisect_args.extra_flags = bisect->remaining();
        return RunBisect(bisect_args);
      }
      if (*reduce) {
        reduce_args.extra_flags = reduce->remaining();
        return RunReduce(reduce_args);
      }
      if (*bundle) return RunBundle(bundle_args, std::vector<std::string>(argv, argv + argc));
      if (*replay) return RunReplay(replay_args);
      if (*trace_summary) return RunTraceSummary(trace_summary_args);
      if (*inspect) return RunInspect(inspect_args);
      if (*compare) return RunCompare(compare_args);
      if (*graph_print) return RunGraphPrint(graph_print_args);
      if (*graph_verify) return RunGraphVerify(graph_verify_args);
      if (*graph_dot) return RunGraphDot(graph_dot_args);
      if (*graph_ops) return RunGraphOps(graph_ops_args);
      if (*graph_run) {
        graph_run_args.extra_flags = graph_run->remaining();
        return RunGraphRun(graph_run_args);
      }
      if (*cluster_cmd) {
        cluster_args.extra_flags = cluster_cmd->remaining();
        return RunCluster(cluster_args);
      }
      if (app.got_subcommand("flags")) return RunFlags();
      return 1;
    }();
    // What the command printed may still be in a buffer, and a write that failed only set the
    // stream's flag: the output is checked here, for every command at once.
    xlens::Status output = xlens::FlushStandardOutput();
    if (output.ok() || exit_code == 1) return exit_code;  // a failed command has said why already
    std::fprintf(stderr, "xlens: %s\n", output.message().c_str());
    return 1;
  } catch (const std::bad_alloc&) {
    // What was being read or built (activity.h): a GraphDef, a bundle, a cache entry, a module.
    std::fprintf(stderr, "xlens: %s\n",
                 xlens::OutOfMemoryMessage(xlens::ActivityAtFailure(), "what was asked for does not fit in this machine")
                     .c_str());
  } catch (const std::length_error&) {
    std::fprintf(stderr, "xlens: %s\n",
                 xlens::OutOfMemoryMessage(xlens::ActivityAtFailure(), "an array is too large to allocate").c_str());
  } catch (const std::exception& e) {
    // Every reader turns its failures into messages; this is the last line of defence, so a
    // library's exception still ends in one line and exit 1, never an abort.
    std::fprintf(stderr, "xlens: internal error: %s\n",
                 xlens::EscapeForTerminal(xlens::TruncateUtf8(e.what(), 2000)).c_str());
  }
  return 1;
}
