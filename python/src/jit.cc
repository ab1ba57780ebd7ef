// HLO text compiled by xlens and called from Python: what `xlens.jit` runs a JAX function with.
// CompiledHlo holds one module compiled for a backend (the CPU, a CUDA GPU, the GPU simulator) as
// `xlens run` compiles it: XLA_FLAGS honoured, dumps and traces as the command line writes them.
// Calling it checks the arguments against the parameters with `xlens run`'s messages, hands
// C-contiguous NumPy arrays to the runtime where they lie (when the module may borrow them: no
// while, conditional or call), and returns NumPy arrays that own the results' storage.
#include <nanobind/nanobind.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "compiler/hlo/parser.h"
#include "compiler/hlo/printer.h"
#include "compiler/runtime/cpu_compiler.h"
#include "compiler/runtime/gpu_device.h"
#include "compiler/runtime/gpu_executable.h"
#include "compiler/runtime/gpu_sim_device.h"
#include "compiler/support/terminal_text.h"
#include "compiler/tools/flags_setup.h"
#include "compiler/tools/module_runner.h"
#include "profiler/chrome_trace_writer.h"
#include "profiler/cupti_records.h"
#include "profiler/host_tracer.h"
#include "python/src/bindings.h"
#include "python/src/jit_arrays.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace xlens::python {
namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch()).count();
}

class CompiledHlo {
 public:
  CompiledHlo(const std::string& text, const std::string& backend, const std::string& dump_to,
              const std::string& trace, const std::string& source);
  ~CompiledHlo();

  // Every result leaf, in order, as NumPy arrays.
  nb::list Run(nb::handle arguments);
  // The result shaped as the root: an array, or a (nested) tuple of them.
  nb::object Call(nb::args arguments);
  // The wall time of each of `count` calls of the executable from C++ on the same arguments
  // (converted once): what a call costs without Python.
  std::vector<int64_t> TimeCalls(nb::handle arguments, int64_t count);

  const HloModule& module() const { return *original_; }
  const std::string& backend() const { return backend_; }
  std::string OptimizedText() const;
  double compile_seconds() const { return compile_ns_ / 1e9; }
  bool borrows_arguments() const { return cpu_ != nullptr && cpu_->borrows_arguments(); }
  int64_t calls() const { return calls_; }
  const std::string& dump_summary() const { return dump_summary_; }
  const std::vector<std::string>& dump_warnings() const { return dump_warnings_; }
  std::vector<std::pair<std::string, std::string>> Parameters() const;

 private:
  std::vector<ArgumentArray> Arguments(nb::handle arguments) const;
  // The arguments checked and run: the result, or xlens.Error.
  Literal Invoke(nb::handle arguments);
  StatusOr<Literal> Execute(const std::vector<ArgumentArray>& arguments);
  // Execute, inside a tracer session with trace=.
  StatusOr<Literal> TracedExecute(const std::vector<ArgumentArray>& arguments);
  // With trace=, a tracer session around the compilation and around each call; a call writes
  // its timeline to trace_path_ (the compilation's before it, the first time). `failed` says
  // where the trace up to the failure is.
  Status StartTrace();
  profiler::Trace StopTrace();
  Status WriteTrace(profiler::Trace trace, const Status& failed);
  void DumpSummary();

  std::string backend_;
  std::unique_ptr<HloModule> original_;
  // Where the executable's dumps go; the pipeline's options point into it.
  std::unique_ptr<tools::FlagsSetup> setup_;
  std::unique_ptr<runtime::Executable> cpu_;
  // The device outlives the executable that frees its buffers on it (members go in reverse).
  std::unique_ptr<runtime::GpuDevice> device_;
  std::unique_ptr<runtime::GpuExecutable> gpu_;
  std::mutex mu_;  // one call at a time: the executable's arena is shared by its calls
  std::string trace_path_;
  bool tracing_ = false;
  // The compilation's timeline, written with the first call's.
  std::optional<profiler::Trace> compile_trace_;
  int64_t compile_ns_ = 0;
  int64_t calls_ = 0;
  std::string dump_summary_;
  std::vector<std::string> dump_warnings_;
};

StatusOr<std::unique_ptr<runtime::GpuDevice>> OpenDevice(tools::RunBackend backend, int opt_level) {
  if (backend == tools::RunBackend::kGpu) return runtime::OpenCudaDevice();
  runtime::GpuSimOptions options;
  options.opt_level = opt_level;
  ASSIGN_OR_RETURN(std::unique_ptr<runtime::GpuSimDevice> device, runtime::OpenSimulatedGpuDevice(options));
  return std::unique_ptr<runtime::GpuDevice>(std::move(device));
}

CompiledHlo::CompiledHlo(const std::string& text, const std::string& backend, const std::string& dump_to,
                         const std::string& trace, const std::string& source)
    : backend_(backend), setup_(std::make_unique<tools::FlagsSetup>()), trace_path_(trace) {
  const tools::RunBackend kind = ValueOrThrow(tools::ParseRunBackend(backend));
  std::vector<std::string> flags;
  if (!dump_to.empty()) flags.push_back("--xla_dump_to=" + dump_to);
  ThrowIfError(tools::SetUpFromFlags(flags, "jit", *setup_));
  if (setup_->dump) setup_->dump->SetBackend(backend);
  const ParseOptions parse{.verify = true, .filename = source.empty() ? "<hlo text>" : DisplayPath(source)};
  original_ = ValueOrThrow(ParseHloModule(text, parse));
  std::unique_ptr<HloModule> module = ValueOrThrow(ParseHloModule(text, parse));
  ThrowIfError(StartTrace());
  Status compiled = OkStatus();
  {
    nb::gil_scoped_release released;
    const int64_t start = NowNs();
    if (kind == tools::RunBackend::kCpu) {
      runtime::CompileOptions options;
      options.optimize = setup_->optimize;
      options.opt_level = setup_->opt_level;
      options.persistent_cache_dir = setup_->debug.xla_xlens_persistent_cache_dir;
      auto exe = runtime::CompileForCpu(std::move(module), options);
      if (exe.ok()) cpu_ = std::move(*exe);
      compiled = exe.status();
    } else {
      auto device = OpenDevice(kind, setup_->opt_level);
      compiled = device.status();
      if (device.ok()) {
        device_ = std::move(*device);
        runtime::GpuCompileOptions options;
        options.optimize = setup_->optimize;
        options.nvptx.opt_level = setup_->opt_level;
        auto exe = runtime::GpuExecutable::Create(std::move(module), options, *device_);
        if (exe.ok()) gpu_ = std::move(*exe);
        compiled = exe.status();
      }
    }
    compile_ns_ = NowNs() - start;
  }
  DumpSummary();
  if (tracing_) compile_trace_ = StopTrace();
  if (!compiled.ok()) {
    compiled = compiled.WithContext(parse.filename);
    if (compile_trace_) {
      // The timeline up to the failure, written now: no call follows.
      profiler::Trace trace = std::move(*compile_trace_);
      compile_trace_.reset();
      compiled = WriteTrace(std::move(trace), compiled);
    }
    ThrowIfError(compiled);
  }
}

CompiledHlo::~CompiledHlo() = default;

void CompiledHlo::DumpSummary() {
  if (!setup_->dump || !setup_->dump->enabled() || setup_->dump->dumping_to_stdout()) return;
  setup_->dump->FlushManifest();
  dump_summary_ = setup_->dump->Summary();
  dump_warnings_ = setup_->dump->warnings();
}

Status CompiledHlo::StartTrace() {
  if (trace_path_.empty()) return OkStatus();
  profiler::SetCurrentThreadName("python");
  if (!profiler::TracerSession::Start()) return xlens::Error("trace: another trace is being recorded");
  tracing_ = true;
  return OkStatus();
}

profiler::Trace CompiledHlo::StopTrace() {
  tracing_ = false;
  return profiler::TracerSession::Stop();
}

Status CompiledHlo::WriteTrace(profiler::Trace trace, const Status& failed) {
  if (compile_trace_) {
    // The compilation's timeline first; the threads and processes both name, once.
    profiler::Trace merged = std::move(*compile_trace_);
    compile_trace_.reset();
    for (profiler::TraceProcess& process : trace.processes) {
      bool known = false;
      for (const profiler::TraceProcess& p : merged.processes) known = known || p.pid == process.pid;
      if (!known) merged.processes.push_back(std::move(process));
    }
    for (profiler::TraceThread& thread : trace.threads) {
      bool known = false;
      for (const profiler::TraceThread& t : merged.threads) {
        known = known || (t.pid == thread.pid && t.tid == thread.tid);
      }
      if (!known) merged.threads.push_back(std::move(thread));
    }
    for (profiler::TraceEvent& event : trace.events) merged.events.push_back(std::move(event));
    for (profiler::TraceArg& arg : trace.metadata) merged.metadata.push_back(std::move(arg));
    trace = std::move(merged);
  }
  profiler::LinkExternalIds(trace);
  // Written even when the run failed: the timeline up to the failure is what the user needs.
  Status written = profiler::WriteChromeTrace(trace, trace_path_);
  if (failed.ok()) return written;
  return xlens::Error(failed.message() + (written.ok() ? "; the trace up to here is in " + DisplayPath(trace_path_)
                                                       : "; the trace could not be written: " + written.message()));
}

std::string CompiledHlo::OptimizedText() const {
  return PrintModule(cpu_ != nullptr ? cpu_->module() : gpu_->module());
}

std::vector<std::pair<std::string, std::string>> CompiledHlo::Parameters() const {
  std::vector<std::pair<std::string, std::string>> parameters;
  for (const HloInstruction* p : original_->entry_computation()->parameter_instructions()) {
    parameters.emplace_back(p->name(), p->shape().ToString(false));
  }
  return parameters;
}

std::vector<ArgumentArray> CompiledHlo::Arguments(nb::handle arguments) const {
  if (!nb::isinstance<nb::sequence>(arguments) || nb::isinstance<nb::str>(arguments)) {
    nb::object type_name = arguments.type().attr("__name__");
    throw Error(fmt::format("{}: expected a sequence of arguments, found a {}", original_->name(),
                            nb::cast<std::string>(nb::str(nb::handle(type_name.ptr())))));
  }
  const HloComputation& entry = *original_->entry_computation();
  const size_t count = nb::len(arguments);
  const size_t expected = static_cast<size_t>(entry.num_parameters());
  // Fewer: the first one missing, as `xlens run` names a missing .npy file; more: how many.
  if (count < expected) throw Error(MissingArgumentMessage(count, *entry.parameter_instruction(count)));
  if (count > expected) {
    throw Error(fmt::format("{} takes {} arguments, {} given", original_->name(), expected, count));
  }
  std::vector<ArgumentArray> result;
  result.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    result.push_back(ValueOrThrow(ArgumentFor(arguments[i], i, *entry.parameter_instruction(i))));
  }
  return result;
}

StatusOr<Literal> CompiledHlo::Execute(const std::vector<ArgumentArray>& arguments) {
  const HloComputation& entry = *original_->entry_computation();
  // The arguments as literals: the GPU executable's inputs and the snapshots' record.
  auto literals = [&] {
    std::vector<Literal> copies;
    copies.reserve(arguments.size());
    for (size_t i = 0; i < arguments.size(); ++i) {
      copies.push_back(LiteralFromArgument(arguments[i], entry.parameter_instruction(i)->shape()));
    }
    return copies;
  };
  StatusOr<Literal> result = xlens::Error("not run");
  if (cpu_ != nullptr) {
    std::vector<const void*> arrays;
    arrays.reserve(arguments.size());
    for (const ArgumentArray& a : arguments) arrays.push_back(a.data);
    result = cpu_->ExecuteOnArrays(arrays);
  } else {
    result = gpu_->Execute(literals());
  }
  // --xla_dump_hlo_snapshots: the arguments and results of the first executions, as `xlens run`.
  const HloModule& compiled = cpu_ != nullptr ? cpu_->module() : gpu_->module();
  if (result.ok() && setup_->dump && setup_->dump->WantsExecution(compiled)) {
    setup_->dump->DumpExecution(compiled, literals(), *result);
    setup_->dump->FlushManifest();
  }
  return result;
}

StatusOr<Literal> CompiledHlo::TracedExecute(const std::vector<ArgumentArray>& arguments) {
  if (trace_path_.empty()) return Execute(arguments);
  RETURN_IF_ERROR(StartTrace());
  StatusOr<Literal> result = Execute(arguments);
  Status written = WriteTrace(StopTrace(), result.status());
  if (!written.ok()) return written;
  return result;
}

void CollectLeaves(Literal& literal, nb::list& leaves) {
  if (literal.shape().IsTuple()) {
    for (Literal& element : literal.tuple_elements()) CollectLeaves(element, leaves);
    return;
  }
  leaves.append(ArrayFromLiteral(std::move(literal)));
}

nb::object Shaped(Literal& literal) {
  if (!literal.shape().IsTuple()) return ArrayFromLiteral(std::move(literal));
  nb::list elements;
  for (Literal& element : literal.tuple_elements()) elements.append(Shaped(element));
  return nb::tuple(elements);
}

Literal CompiledHlo::Invoke(nb::handle arguments) {
  std::vector<ArgumentArray> converted = Arguments(arguments);
  StatusOr<Literal> result = xlens::Error("not run");
  {
    nb::gil_scoped_release released;
    std::lock_guard<std::mutex> lock(mu_);
    result = TracedExecute(converted);
    ++calls_;
  }
  return ValueOrThrow(std::move(result));
}

nb::list CompiledHlo::Run(nb::handle arguments) {
  Literal literal = Invoke(arguments);
  nb::list leaves;
  CollectLeaves(literal, leaves);
  return leaves;
}

nb::object CompiledHlo::Call(nb::args arguments) {
  Literal literal = Invoke(arguments);
  return Shaped(literal);
}

std::vector<int64_t> CompiledHlo::TimeCalls(nb::handle arguments, int64_t count) {
  if (count < 1) throw Error(fmt::format("time_calls: expected at least 1 call, found {}", count));
  std::vector<ArgumentArray> converted = Arguments(arguments);
  std::vector<int64_t> ns;
  ns.reserve(count);
  Status failed = OkStatus();
  {
    nb::gil_scoped_release released;
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<const void*> arrays;
    for (const ArgumentArray& a : converted) arrays.push_back(a.data);
    for (int64_t i = 0; i < count && failed.ok(); ++i) {
      const int64_t start = NowNs();
      StatusOr<Literal> result = cpu_ != nullptr ? cpu_->ExecuteOnArrays(arrays) : Execute(converted);
      ns.push_back(NowNs() - start);
      failed = result.status();
    }
  }
  ThrowIfError(failed);
  return ns;
}

}  // namespace

void RegisterJit(nb::module_& m) {
  nb::class_<CompiledHlo>(m, "CompiledHlo",
                          "An HLO module compiled by xlens for one backend, called with NumPy arrays")
      .def(nb::init<const std::string&, const std::string&, const std::string&, const std::string&,
                    const std::string&>(),
           "text"_a, "backend"_a = "cpu", "dump_to"_a = "", "trace"_a = "", "source"_a = "",
           "Parses HLO text (XLA's text format) and compiles it; XLA_FLAGS is honoured as by `xlens run`.")
      .def("__call__", &CompiledHlo::Call, "The result shaped as the module's root: an array or a tuple.")
      .def("run", &CompiledHlo::Run, "arguments"_a, "Every result leaf, in order, as a list of arrays.")
      .def("time_calls", &CompiledHlo::TimeCalls, "arguments"_a, "count"_a,
           "Nanoseconds of each of `count` calls made from C++ on the same arguments.")
      .def_prop_ro("module_name", [](const CompiledHlo& c) { return c.module().name(); })
      .def_prop_ro("backend", &CompiledHlo::backend)
      .def_prop_ro("parameters", &CompiledHlo::Parameters, "(name, shape) of each parameter")
      .def_prop_ro("result_shape",
                   [](const CompiledHlo& c) {
                     return c.module().entry_computation()->root_instruction()->shape().ToString(false);
                   })
      .def_prop_ro("hlo_text", [](const CompiledHlo& c) { return PrintModule(c.module()); })
      .def_prop_ro("optimized_hlo_text", &CompiledHlo::OptimizedText)
      .def_prop_ro("compile_seconds", &CompiledHlo::compile_seconds)
      .def_prop_ro("borrows_arguments", &CompiledHlo::borrows_arguments,
                   "Whether C-contiguous arguments are read where they lie (CPU, no control flow)")
      .def_prop_ro("calls", &CompiledHlo::calls)
      .def_prop_ro("dump_summary", &CompiledHlo::dump_summary)
      .def_prop_ro("dump_warnings", &CompiledHlo::dump_warnings);
}

}  // namespace xlens::python
