#include "compiler/cli/distributed_run.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include <fmt/format.h>

#include "compiler/cli/cli_util.h"
#include "compiler/cli/distributed_trace.h"
#include "compiler/cli/multi_device_run.h"
#include "compiler/hlo/distributed_rendezvous.h"
#include "compiler/hlo/literal_comparison.h"
#include "compiler/hlo/literal_leaves.h"
#include "compiler/hlo/multi_device_evaluator.h"
#include "compiler/runtime/mpi_transport.h"
#include "compiler/runtime/multi_device_executable.h"
#include "compiler/support/file_io.h"
#include "compiler/support/terminal_text.h"
#include "compiler/support/watchdog.h"

namespace xlens::cli {
namespace {

// Writes (or prints) this rank's devices' results: no file is written by two ranks.
Status ReportRankResults(const RunArgs& args, const DeviceTopology& topology,
                         const std::vector<int64_t>& devices, const std::vector<Literal>& results) {
  for (int64_t d : devices) {
    std::vector<const Literal*> leaves;
    CollectLeaves(results[d], leaves);
    if (!args.outputs.empty()) {
      RETURN_IF_ERROR(WriteOutputs(DeviceDir(args.outputs, d), leaves));
      continue;
    }
    std::string text = fmt::format("device {} (replica {}, partition {}):\n", d,
                                   d / topology.num_partitions, d % topology.num_partitions);
    for (size_t i = 0; i < leaves.size(); ++i) {
      text += fmt::format("  out{}: {} {}\n", i, leaves[i]->shape().ToString(false),
                          Summarize(*leaves[i]));
    }
    // One write per device, so that mpirun does not interleave two ranks' devices.
    std::fputs(text.c_str(), stdout);
    std::fflush(stdout);
  }
  return OkStatus();
}

// The global outputs (--outputs DIR/outI.npy), as one process writes them: every rank's devices'
// results go to every rank in one all-gather, and rank 0 alone assembles them by the entry root's
// sharding and writes them. Called by every rank once the run succeeded on all of them.
Status WriteGlobalOutputsOnRankZero(const RunArgs& args, const HloModule& module,
                                    const DeviceTopology& topology,
                                    const std::vector<int64_t>& devices,
                                    const std::vector<Literal>& results,
                                    runtime::MpiTransport& mpi) {
  std::string mine;
  for (int64_t d : devices) {
    ForEachArrayLeaf(results[d], [&](const Literal& leaf) {
      mine.append(reinterpret_cast<const char*>(leaf.untyped_data()), leaf.size_bytes());
    });
  }
  const double timeout = args.collective_timeout_seconds > 0 ? args.collective_timeout_seconds * 1.5 + 2 : 0;
  std::vector<std::string> all = mpi.AllGather(mine, "the global outputs", timeout);
  if (mpi.rank() != 0) return OkStatus();
  const Shape& shape = module.entry_computation()->root_instruction()->shape();
  std::vector<Literal> every;
  for (int r = 0; r < mpi.num_ranks(); ++r) {
    std::string_view in = all[r];
    for (int64_t d : DevicesOfRank(topology.num_devices(), r, mpi.num_ranks())) {
      Literal value(shape);
      if (!ReadArrayLeaves(in, value)) {
        return Error(fmt::format("the global outputs: rank {} sent {} bytes, too few for its "
                                 "devices' results", r, all[r].size()));
      }
      every.push_back(std::move(value));
    }
  }
  return WriteGlobalOutputs(args, module, topology, every);
}

// Everything a rank does before the run; its failure is announced to every rank at the start.
struct Prepared {
  std::unique_ptr<HloModule> module;
  // Shared with the devices' threads for every run, never copied per run.
  std::shared_ptr<const runtime::MultiDeviceExecutable::Arguments> arguments;
  std::unique_ptr<runtime::MultiDeviceExecutable> executable;
};

Status Prepare(const RunArgs& args, bool compiled, const DeviceTopology& topology,
               const std::vector<int64_t>& devices, int num_ranks, Prepared& out) {
  if (devices.empty()) {
    return Error(fmt::format("{} processes for {} devices ({} replicas x {} partitions): each rank "
                             "needs at least one device (run fewer processes)", num_ranks,
                             topology.num_devices(), topology.num_replicas, topology.num_partitions));
  }
  FlagsSetup setup;
  if (compiled) RETURN_IF_ERROR(SetUpFromFlags(args.extra_flags, "run", setup));
  ASSIGN_OR_RETURN(out.module, LoadModule(args.file, /*verify=*/true));
  RETURN_IF_ERROR(PrepareModuleToRun(*out.module, args.file, compiled ? "run" : "eval",
                                     args.fill_elided_constants, args.seed, /*quiet=*/true));
  if (Status s = CheckModuleCollectives(*out.module, topology); !s.ok()) {
    return Error(fmt::format("{}: on {} replicas x {} partitions: {}", args.file,
                             topology.num_replicas, topology.num_partitions, s.message()));
  }
  RETURN_IF_ERROR(CheckEvaluationWork(*out.module, args.max_work).WithContext(args.file));
  ASSIGN_OR_RETURN(auto arguments, LoadDeviceInputs(*out.module, args, topology, devices));
  out.arguments = std::make_shared<const runtime::MultiDeviceExecutable::Arguments>(std::move(arguments));
  if (compiled) {
    runtime::CompileOptions options;
    options.optimize = setup.optimize;
    options.opt_level = setup.opt_level;
    auto executable = runtime::MultiDeviceExecutable::Compile(*out.module, topology, options, devices);
    if (!executable.ok()) return executable.status().WithContext(args.file);
    out.executable = std::move(*executable);
  }
  return OkStatus();
}

}  // namespace

int RunDistributed(const RunArgs& args, bool compiled) {
  if (args.distributed != "mpi") {
    return Fail(Error(fmt::format("--distributed={}: the one engine is mpi (under mpirun)",
                                  args.distributed)));
  }
  if (args.backend != "cpu") {
    return Fail(Error(fmt::format("--backend={}: --distributed=mpi runs on the CPU; leave --backend "
                                  "out", args.backend)));
  }
  if (!compiled && !args.trace.empty()) {
    return Fail(Error("--trace: xlens eval records no trace; xlens run does"));
  }
  if (!compiled && args.iterations > 1) return Fail(Error("--iterations: the evaluator is not timed"));
  const DeviceTopology topology{std::max<int64_t>(args.num_replicas, 1),
                                std::max<int64_t>(args.num_partitions, 1)};
  if (Status s = CheckTopology(topology); !s.ok()) {
    return Fail(Error(fmt::format("--num_replicas={} --num_partitions={}: {}", topology.num_replicas,
                                  topology.num_partitions, s.message())));
  }
  auto transport = runtime::MpiTransport::Create();
  if (!transport.ok()) return Fail(transport.status());
  runtime::MpiTransport& mpi = **transport;
  const std::string who = mpi.RankName();
  const auto fail = [&](const Status& s) {
    mpi.VerdictGiven();
    const int code = Fail(s.WithContext(who));
    mpi.Finalize();
    return code;
  };
  // One rendezvous per run: a run's meetings and finished devices are its own.
  auto rendezvous = std::make_unique<DistributedRendezvous>(topology, &mpi,
                                                            args.collective_timeout_seconds);
  const std::vector<int64_t> devices = rendezvous->local_devices();
  // --trace: each rank records its devices, rank 0 writes them merged (distributed_trace.h).
  DistributedTrace trace(args.trace);
  if (Status s = trace.Start(); !s.ok()) return fail(s);
  Prepared prepared;
  const auto compile_start = std::chrono::steady_clock::now();
  Status ready = Prepare(args, compiled, topology, devices, mpi.num_ranks(), prepared);
  const double compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - compile_start).count();
  if (Status s = rendezvous->Start(ready); !s.ok()) return fail(s);

  const std::string command = compiled ? "run" : "eval";
  Watchdog watchdog(args.timeout_seconds, command);
  MultiDeviceOptions multi{.collective_timeout_seconds = args.collective_timeout_seconds};
  multi.rendezvous = rendezvous.get();
  multi.local_devices = devices;
  int64_t left_behind = 0;
  StatusOr<std::vector<Literal>> results = Error("not run");
  std::vector<double> run_ms;
  if (compiled) {
    multi.abandon_after_seconds = 1;
    multi.left_behind = &left_behind;
    for (int i = 0; i < args.iterations + (args.iterations > 1 ? 1 : 0); ++i) {
      if (i > 0) {
        rendezvous = std::make_unique<DistributedRendezvous>(topology, &mpi,
                                                             args.collective_timeout_seconds);
        multi.rendezvous = rendezvous.get();
      }
      const auto start = std::chrono::steady_clock::now();
      // The results stay in the devices' buffers until the last run is done.
      results = prepared.executable->Execute(prepared.arguments, multi, watchdog.cancel_flag(),
                                             nullptr, /*read_results=*/false);
      if (!results.ok()) break;
      if (args.iterations > 1 && i == 0) continue;
      run_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    }
    if (results.ok()) results = prepared.executable->Results();
  } else {
    EvaluatorOptions options{.cancel = watchdog.cancel_flag(), .max_work = args.max_work};
    results = EvaluateModuleOnDevices(*prepared.module, *prepared.arguments, topology, options, multi);
  }
  Status outcome = results.status();
  if (!outcome.ok() && watchdog.fired()) outcome = Error(watchdog.StopMessage() + ": " + outcome.message());
  outcome = outcome.WithContext(args.file);
  if (outcome.ok()) outcome = ReportRankResults(args, topology, devices, *results);
  if (Status s = rendezvous->Finish(outcome); !s.ok()) {
    if (left_behind > 0) {
      // Compiled code that cannot be stopped still runs: end here, as RunOnDevices does.
      mpi.VerdictGiven();
      Fail(s.WithContext(who));
      std::fflush(stdout);
      std::_Exit(1);
    }
    return fail(s);
  }
  if (!args.outputs.empty()) {
    if (Status s = WriteGlobalOutputsOnRankZero(args, *prepared.module, topology, devices, *results, mpi);
        !s.ok()) {
      return fail(s);
    }
  }
  std::string trace_lines;
  if (Status s = trace.Finish(mpi, topology, args.collective_timeout_seconds, trace_lines); !s.ok()) {
    return fail(s);
  }
  if (mpi.rank() == 0) {
    std::sort(run_ms.begin(), run_ms.end());
    if (compiled) {
      std::printf("compiled in %.1f ms; run median %.3f ms over %d iteration%s on %lld devices "
                  "(%lld replicas x %lld partitions) over %d MPI ranks\n", compile_ms,
                  run_ms[run_ms.size() / 2], args.iterations, args.iterations == 1 ? "" : "s",
                  static_cast<long long>(topology.num_devices()),
                  static_cast<long long>(topology.num_replicas),
                  static_cast<long long>(topology.num_partitions), mpi.num_ranks());
    } else {
      std::printf("evaluated on %lld devices (%lld replicas x %lld partitions) over %d MPI ranks\n",
                  static_cast<long long>(topology.num_devices()),
                  static_cast<long long>(topology.num_replicas),
                  static_cast<long long>(topology.num_partitions), mpi.num_ranks());
    }
    std::fputs(trace_lines.c_str(), stdout);
    std::fflush(stdout);
  }
  if (!compiled || !args.reference) {
    mpi.Finalize();
    return 0;
  }
  // --reference: the evaluator over the same ranks, each rank checking its own devices.
  DistributedRendezvous reference_rendezvous(topology, &mpi, args.collective_timeout_seconds);
  multi.rendezvous = &reference_rendezvous;
  multi.abandon_after_seconds = 0;
  multi.left_behind = nullptr;
  if (Status s = reference_rendezvous.Start(OkStatus()); !s.ok()) return fail(s);
  EvaluatorOptions options{.cancel = watchdog.cancel_flag(), .max_work = args.max_work};
  auto expected = EvaluateModuleOnDevices(*prepared.module, *prepared.arguments, topology, options, multi);
  Status checked = expected.status().WithContext("reference evaluator");
  ErrorSpec spec = ReferenceTolerance(args.tolerance, args.tolerance_given);
  LiteralDifference worst;
  for (int64_t d : devices) {
    if (!checked.ok()) break;
    LiteralDifference difference;
    Status match = ExpectLiteralNear((*expected)[d], (*results)[d], spec, &difference);
    worst.Merge(difference);
    if (!match.ok()) {
      checked = Error(fmt::format("{}: device {}: the compiled result differs from the reference "
                                  "evaluator: {}", args.file, d, match.message()));
    }
  }
  if (Status s = reference_rendezvous.Finish(checked); !s.ok()) return fail(s);
  std::vector<const Literal*> leaves;
  CollectLeaves((*results)[devices.front()], leaves);
  std::string verdict = ReferenceVerdict(
      worst, fmt::format(" over devices {} to {}", devices.front(), devices.back()),
      ReferenceToleranceLabel(spec, leaves), /*match=*/true);
  std::printf("%s: %s", who.c_str(), verdict.c_str());
  mpi.Finalize();
  return 0;
}

}  // namespace xlens::cli
