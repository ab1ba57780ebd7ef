// `xlens run --num_replicas=R --num_partitions=P`: a module compiled for the CPU once per device
// and run on R x P simulated devices in this process, each with its own buffers and arguments,
// the collectives between them (multi_device_executable.h); `--reference` checks every device's
// result against the reference evaluator over the same devices (multi_device_evaluator.h), and
// `xlens eval` with the same flags runs the evaluator alone. Device d = replica * P + partition,
// XLA's default assignment.
//
// Inputs: --inputs DIR holding device_0/, device_1/, ... (each with arg0.npy, ... as a single
// device reads them), or DIR's own arg0.npy, ... as global arrays, each split by its entry
// parameter's sharding over the partitions (every replica gets the same pieces); random values,
// the same on every device, without --inputs. Outputs: --outputs DIR gets device_0/out0.npy, ...
// and, assembled by the entry root's sharding where it can be, the global out0.npy, ...
#include "compiler/cli/multi_device_run.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

#include "compiler/cli/cli_util.h"
#include "compiler/cli/distributed_run.h"
#include "compiler/cli/gpu_multi_device_run.h"
#include "compiler/cli/multi_device_profile.h"
#include "compiler/hlo/literal_comparison.h"
#include "compiler/hlo/multi_device_evaluator.h"
#include "compiler/hlo/npy.h"
#include "compiler/hlo/sharded_literals.h"
#include "compiler/support/activity.h"
#include "compiler/support/file_io.h"
#include "compiler/support/terminal_text.h"
#include "compiler/runtime/multi_device_executable.h"
#include "compiler/support/watchdog.h"

namespace xlens::cli {
namespace {

std::string DeviceName(const DeviceTopology& topology, int64_t device) {
  return fmt::format("device {} (replica {}, partition {})", device,
                     device / topology.num_partitions, device % topology.num_partitions);
}

// The arguments of `devices` from DIR/device_D/ (the others' lists stay empty): only their
// folders are read, so under MPI a folder missing for another rank's device is that rank's error.
StatusOr<std::vector<std::vector<Literal>>> LoadPerDeviceInputs(const HloComputation& entry,
                                                                const std::string& dir,
                                                                const DeviceTopology& topology,
                                                                const std::vector<int64_t>& devices,
                                                                uint64_t seed) {
  const int64_t count = topology.num_devices();
  std::vector<std::vector<Literal>> arguments(static_cast<size_t>(count));
  for (int64_t d : devices) {
    const std::string device_dir = DeviceDir(dir, d);
    if (GetPathKind(device_dir) != PathKind::kDirectory) {
      return Error(fmt::format("--inputs {}: device_{}/ is missing: {} devices ({} replicas x {} "
                               "partitions) need device_0/ to device_{}/", DisplayPath(dir), d,
                               count, topology.num_replicas, topology.num_partitions, count - 1));
    }
    ASSIGN_OR_RETURN(arguments[d], LoadInputs(entry, device_dir, seed));
  }
  // A folder for a device that does not run says the inputs were made for another device count.
  if (GetPathKind(DeviceDir(dir, count)) == PathKind::kDirectory) {
    return Error(fmt::format("--inputs {}: holds device_{}/, but only {} devices run ({} replicas "
                             "x {} partitions): the inputs are for another device count",
                             DisplayPath(dir), count, count, topology.num_replicas,
                             topology.num_partitions));
  }
  return arguments;
}

// DIR/argI.npy as global values, each split by its parameter's sharding over the partitions.
StatusOr<std::vector<std::vector<Literal>>> LoadGlobalInputs(const HloModule& module,
                                                             const std::string& dir,
                                                             const DeviceTopology& topology,
                                                             const std::vector<bool>& wanted) {
  const HloComputation& entry = *module.entry_computation();
  ASSIGN_OR_RETURN(std::vector<HloSharding> shardings, EntryParameterShardings(module));
  std::vector<std::vector<Literal>> arguments(topology.num_devices());
  for (int64_t i = 0; i < entry.num_parameters(); ++i) {
    const HloInstruction* parameter = entry.parameter_instruction(i);
    const std::string path = fmt::format("{}/arg{}.npy", dir, i);
    if (GetPathKind(path) == PathKind::kMissing) {
      return Error(fmt::format("{}: missing: parameter {} (%{}) needs its global value (or give "
                               "one folder per device, device_0/, ...)", DisplayPath(path), i,
                               parameter->name()));
    }
    ASSIGN_OR_RETURN(Literal global, ReadNpy(path));
    auto pieces = SplitLiteral(global, shardings[i], topology.num_partitions);
    if (!pieces.ok()) {
      return Error(fmt::format("{}: cannot split {} by the sharding of parameter {} (%{}) over {} "
                               "partitions: {}", DisplayPath(path), global.shape().ToString(false),
                               i, parameter->name(), topology.num_partitions,
                               pieces.status().message()));
    }
    for (int64_t p = 0; p < topology.num_partitions; ++p) {
      const Literal& piece = (*pieces)[p];
      if (!shape_util::Compatible(piece.shape(), parameter->shape())) {
        // A module that takes the whole value was never partitioned (jax's before_optimizations).
        const bool global_module = shape_util::Compatible(global.shape(), parameter->shape());
        return Error(fmt::format("{}: holds {}, whose piece for partition {} by the parameter's "
                                 "sharding is {}, but parameter {} (%{}) expects {}{}",
                                 DisplayPath(path), global.shape().ToString(false), p,
                                 piece.shape().ToString(false), i, parameter->name(),
                                 parameter->shape().ToString(false),
                                 global_module ? ": the module is not partitioned yet; partition it "
                                                 "first with xlens opt MODULE --passes=spmd-partitioning"
                                               : ""));
      }
    }
    for (int64_t r = 0; r < topology.num_replicas; ++r) {
      for (int64_t p = 0; p < topology.num_partitions; ++p) {
        const int64_t d = topology.DeviceId(r, p);
        if (wanted[d]) arguments[d].push_back((*pieces)[p]);
      }
    }
  }
  return arguments;
}

}  // namespace

std::string DeviceDir(const std::string& dir, int64_t device) {
  return fmt::format("{}/device_{}", dir, device);
}

StatusOr<std::vector<std::vector<Literal>>> LoadDeviceInputs(const HloModule& module,
                                                             const RunArgs& args,
                                                             const DeviceTopology& topology,
                                                             const std::vector<int64_t>& devices) {
  std::vector<int64_t> all;
  if (devices.empty()) {
    for (int64_t d = 0; d < topology.num_devices(); ++d) all.push_back(d);
  }
  const std::vector<int64_t>& loaded = devices.empty() ? all : devices;
  std::vector<bool> wanted(static_cast<size_t>(topology.num_devices()), false);
  for (int64_t d : loaded) {
    if (d < 0 || d >= topology.num_devices()) {
      return Error(fmt::format("device {} is not one of the {} devices", d, topology.num_devices()));
    }
    wanted[d] = true;
  }
  const HloComputation& entry = *module.entry_computation();
  const bool random = args.inputs.empty() || args.inputs == "random";
  if (random || GetPathKind(args.inputs) != PathKind::kDirectory) {
    // LoadInputs says what is wrong with a path that is not a directory.
    ASSIGN_OR_RETURN(std::vector<Literal> same, LoadInputs(entry, args.inputs, args.seed));
    std::vector<std::vector<Literal>> arguments(static_cast<size_t>(topology.num_devices()));
    for (int64_t d : loaded) arguments[d] = same;
    return arguments;
  }
  if (GetPathKind(DeviceDir(args.inputs, 0)) == PathKind::kDirectory) {
    return LoadPerDeviceInputs(entry, args.inputs, topology, loaded, args.seed);
  }
  return LoadGlobalInputs(module, args.inputs, topology, wanted);
}

namespace {

// The global value of every result leaf, assembled from the partitions' pieces by the entry
// root's sharding, or why it cannot be. A partitioned program holds only the tile shape, so the
// global shape is the tile shape times the tiles on each dim: exact for even tiles, the only kind
// jax and XLA let a program's results have (a last tile short of the others, padded, is not
// told apart by its shape).
StatusOr<std::vector<Literal>> AssembleGlobalOutputs(const HloModule& module,
                                                     const DeviceTopology& topology,
                                                     const std::vector<Literal>& results) {
  if (topology.num_replicas > 1) {
    return Error(fmt::format("each of the {} replicas holds results of its own",
                             topology.num_replicas));
  }
  ASSIGN_OR_RETURN(HloSharding root, EntryRootSharding(module));
  // XLA's partitioned modules drop the root's sharding= (jax keeps it outside the module): a
  // result every device holds alike is still the global value; one that differs cannot be placed.
  const HloInstruction* root_instruction = module.entry_computation()->root_instruction();
  const bool root_sharded = root_instruction->raw_attribute("sharding") != nullptr;
  std::vector<std::vector<const Literal*>> per_device(results.size());
  for (size_t d = 0; d < results.size(); ++d) CollectLeaves(results[d], per_device[d]);
  std::vector<Literal> global;
  for (size_t i = 0; i < per_device[0].size(); ++i) {
    const HloSharding& sharding = root.LeafSharding(static_cast<int64_t>(i));
    if (sharding.IsManual()) {
      return Error(fmt::format("out{}'s sharding is {{manual}}: each device's value is its own", i));
    }
    Shape shape = per_device[0][i]->shape();
    std::vector<Literal> pieces;
    for (const auto& leaves : per_device) pieces.push_back(*leaves[i]);
    if (sharding.IsTiled() && shape.IsArray()) {
      const std::vector<int64_t>& tiles = sharding.tile_assignment().dims();
      const int64_t rank = std::min<int64_t>(sharding.TiledDataRank(), shape.rank());
      for (int64_t k = 0; k < rank; ++k) {
        shape.set_dimensions(k, shape.dimensions()[k] * tiles[static_cast<size_t>(k)]);
      }
    }
    auto value = AssembleLiteral(pieces, sharding, shape);
    if (!value.ok() && !root_sharded) {
      return Error(fmt::format("out{} differs between the devices, and the entry root %{} has no "
                               "sharding= to assemble it by", i, root_instruction->name()));
    }
    if (!value.ok()) {
      return Error(fmt::format("out{} by {}: {}", i, sharding.ToString(), value.status().message()));
    }
    global.push_back(std::move(*value));
  }
  return global;
}

}  // namespace

Status WriteGlobalOutputs(const RunArgs& args, const HloModule& module,
                          const DeviceTopology& topology, const std::vector<Literal>& results) {
  auto global = AssembleGlobalOutputs(module, topology, results);
  if (global.ok()) {
    std::vector<const Literal*> leaves;
    for (const Literal& value : *global) leaves.push_back(&value);
    return WriteOutputs(args.outputs, leaves);
  }
  std::printf("global outputs not assembled, only %s/device_D/ written: %s\n",
              DisplayPath(args.outputs).c_str(), global.status().message().c_str());
  return OkStatus();
}

namespace {

// Prints (or writes under DIR/device_D/) every device's result; with --outputs, also the global
// results as DIR/outI.npy, the names a single device's run gives them, where they can be assembled.
Status ReportResults(const RunArgs& args, const HloModule& module, const DeviceTopology& topology,
                     const std::vector<Literal>& results) {
  if (!args.outputs.empty()) RETURN_IF_ERROR(WriteGlobalOutputs(args, module, topology, results));
  for (int64_t d = 0; d < topology.num_devices(); ++d) {
    std::vector<const Literal*> leaves;
    CollectLeaves(results[d], leaves);
    if (!args.outputs.empty()) {
      RETURN_IF_ERROR(WriteOutputs(DeviceDir(args.outputs, d), leaves));
      continue;
    }
    std::printf("%s:\n", DeviceName(topology, d).c_str());
    for (size_t i = 0; i < leaves.size(); ++i) {
      std::printf("  out%zu: %s %s\n", i, leaves[i]->shape().ToString(false).c_str(),
                  Summarize(*leaves[i]).c_str());
    }
  }
  return OkStatus();
}

// Compiled code cannot be interrupted: a device that will not stop after another failed is left
// running, and the process ends here, before anything could tear down what that device still uses.
[[noreturn]] void ExitLeavingDevicesBehind(const Status& failure) {
  Fail(failure);
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(1);
}

}  // namespace

int RunOnDevices(const RunArgs& args, bool compiled) {
  if (!args.distributed.empty()) return RunDistributed(args, compiled);
  const DeviceTopology topology{std::max<int64_t>(args.num_replicas, 1),
                                std::max<int64_t>(args.num_partitions, 1)};
  // xlens run also runs the devices on the GPU backend (gpu_multi_device_run.h).
  const bool on_gpu = compiled && (args.backend == "gpu" || args.backend == "gpu-sim");
  if (args.backend != "cpu" && !on_gpu) {
    return Fail(Error(fmt::format("--backend={}: --num_replicas and --num_partitions run on the "
                                  "CPU (simulated devices in this process){}", args.backend,
                                  compiled ? ", the GPU simulator (gpu-sim) or GPUs (gpu)"
                                           : "; leave --backend out")));
  }
  if (Status s = on_gpu ? CheckGpuDevices(args, topology) : OkStatus(); !s.ok()) return Fail(s);
  if (!compiled && !args.trace.empty()) {
    return Fail(Error("--trace: xlens eval on several devices records no trace; xlens run does"));
  }
  if (!compiled && args.iterations > 1) {
    return Fail(Error("--iterations: the evaluator is not timed"));
  }
  if (Status s = CheckTopology(topology); !s.ok()) {
    return Fail(Error(fmt::format("--num_replicas={} --num_partitions={}: {}", topology.num_replicas,
                                  topology.num_partitions, s.message())));
  }
  FlagsSetup setup;
  if (compiled) {
    if (Status s = SetUpFromFlags(args.extra_flags, "run", setup); !s.ok()) return Fail(s);
  }
  auto module = LoadModule(args.file, /*verify=*/true);
  if (!module.ok()) return Fail(module.status());
  const char* command = compiled ? "run" : "eval";
  if (Status s = PrepareModuleToRun(**module, args.file, command, args.fill_elided_constants, args.seed);
      !s.ok()) {
    return Fail(s);
  }
  // Groups that do not fit the devices are refused before any input is read.
  if (Status s = CheckModuleCollectives(**module, topology); !s.ok()) {
    return Fail(Error(fmt::format("{}: on {} replicas x {} partitions: {}", args.file,
                                  topology.num_replicas, topology.num_partitions, s.message())));
  }
  if (Status s = CheckEvaluationWork(**module, args.max_work); !s.ok()) {
    return Fail(s.WithContext(args.file));
  }
  auto loaded = LoadDeviceInputs(**module, args, topology);
  if (!loaded.ok()) return Fail(loaded.status());
  // Shared with the devices' threads for every run, never copied per run.
  const auto arguments =
      std::make_shared<const runtime::MultiDeviceExecutable::Arguments>(std::move(*loaded));

  ActivityScope activity(fmt::format("running module {} of {} on {} devices", (*module)->name(),
                                     args.file, topology.num_devices()));
  Watchdog watchdog(args.timeout_seconds, command);
  const auto stopped = [&](const Status& failure) {
    if (watchdog.fired()) return Error(watchdog.StopMessage() + ": " + failure.message()).WithContext(args.file);
    return failure.WithContext(args.file);
  };
  MultiDeviceOptions multi{.collective_timeout_seconds = args.collective_timeout_seconds};
  std::string report;
  StatusOr<std::vector<Literal>> results = Error("not run");
  // --trace and --xla_hlo_profile: every device's timeline and profile (multi_device_profile.h).
  DeviceRunProfile profile(args, setup, topology);
  if (on_gpu) {
    if (Status s = profile.Start(watchdog); !s.ok()) return Fail(s);
    // A simulated device in an endless loop cannot be stopped either: left behind as on the CPU.
    int64_t left_behind = 0;
    multi.abandon_after_seconds = 1;
    multi.left_behind = &left_behind;
    results = RunOnGpuDevices(args, setup, **module, topology, *arguments, multi, watchdog, report);
    if (!results.ok() && left_behind > 0) ExitLeavingDevicesBehind(stopped(results.status()));
    if (!results.ok()) return Fail(profile.Failed(stopped(results.status()), watchdog));
  } else if (compiled) {
    if (Status s = profile.Start(watchdog); !s.ok()) return Fail(s);
    watchdog.SetActivity(fmt::format("compiling module {} for {} CPU devices", (*module)->name(),
                                     topology.num_devices()));
    runtime::CompileOptions options;
    options.optimize = setup.optimize;
    options.opt_level = setup.opt_level;
    auto executable = runtime::MultiDeviceExecutable::Compile(**module, topology, options);
    if (!executable.ok() && topology.num_devices() > runtime::kMaxCompiledDevices) {
      return Fail(Error(fmt::format("--num_replicas={} --num_partitions={}: {}", topology.num_replicas,
                                    topology.num_partitions, executable.status().message())));
    }
    if (!executable.ok()) return Fail(profile.Failed(executable.status().WithContext(args.file), watchdog));
    watchdog.SetActivity(fmt::format("running module {} on {} CPU devices", (*module)->name(),
                                     topology.num_devices()));
    int64_t left_behind = 0;
    multi.abandon_after_seconds = 1;
    multi.left_behind = &left_behind;
    // With --iterations, one untimed run first (it pays for the first touch of every buffer),
    // then the median of the timed ones: every device's step, from the first start to the last end.
    std::vector<double> run_ms;
    for (int i = 0; i < args.iterations + (args.iterations > 1 ? 1 : 0); ++i) {
      const bool timed = args.iterations == 1 || i > 0;
      profile.Prepare(timed);
      const auto start = std::chrono::steady_clock::now();
      // The results stay in the devices' buffers until the last run is done.
      results = (*executable)->Execute(arguments, multi, watchdog.cancel_flag(), profile.thunk_ns(timed),
                                       /*read_results=*/false);
      if (!results.ok() && left_behind > 0) ExitLeavingDevicesBehind(stopped(results.status()));
      if (!results.ok()) return Fail(profile.Failed(stopped(results.status()), watchdog));
      if (args.iterations > 1 && i == 0) continue;
      run_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    }
    results = (*executable)->Results();
    if (!results.ok()) return Fail(profile.Failed(results.status().WithContext(args.file), watchdog));
    std::sort(run_ms.begin(), run_ms.end());
    report = fmt::format("compiled {} executables in {:.1f} ms; run median {:.3f} ms over {} "
                         "iteration{} on {} devices ({} replicas x {} partitions)\n",
                         topology.num_devices(), (*executable)->compile_ns() / 1e6,
                         run_ms[run_ms.size() / 2], args.iterations, args.iterations == 1 ? "" : "s",
                         topology.num_devices(), topology.num_replicas, topology.num_partitions);
    if (Status s = profile.Finish(**executable, watchdog, report); !s.ok()) return Fail(s);
  } else {
    watchdog.SetActivity(fmt::format("evaluating module {} on {} devices", (*module)->name(),
                                     topology.num_devices()));
    EvaluatorOptions options{.cancel = watchdog.cancel_flag(), .max_work = args.max_work};
    results = EvaluateModuleOnDevices(**module, *arguments, topology, options, multi);
    if (!results.ok()) return Fail(stopped(results.status()));
  }
  if (Status s = ReportResults(args, **module, topology, *results); !s.ok()) return Fail(s);
  std::fputs(report.c_str(), stdout);
  if (!compiled || !args.reference) return 0;

  watchdog.SetActivity(fmt::format("evaluating module {} on {} devices for --reference",
                                   (*module)->name(), topology.num_devices()));
  EvaluatorOptions options{.cancel = watchdog.cancel_flag(), .max_work = args.max_work};
  auto expected = EvaluateModuleOnDevices(**module, *arguments, topology, options, multi);
  if (!expected.ok()) return Fail(stopped(expected.status()).WithContext("reference evaluator"));
  int exit_code = 0;
  ErrorSpec spec = ReferenceTolerance(args.tolerance, args.tolerance_given);
  LiteralDifference worst;
  for (int64_t d = 0; d < topology.num_devices(); ++d) {
    LiteralDifference difference;
    Status match = ExpectLiteralNear((*expected)[d], (*results)[d], spec, &difference);
    worst.Merge(difference);
    if (!match.ok() && exit_code == 0) {
      std::fprintf(stderr, "xlens: %s: %s: the compiled result differs from the reference evaluator: %s\n",
                   args.file.c_str(), DeviceName(topology, d).c_str(), match.message().c_str());
      exit_code = 1;
    }
  }
  std::vector<const Literal*> leaves;
  if (!results->empty()) CollectLeaves((*results)[0], leaves);
  std::fputs(ReferenceVerdict(worst, fmt::format(" over {} devices", topology.num_devices()),
                              ReferenceToleranceLabel(spec, leaves), exit_code == 0)
                 .c_str(),
             stdout);
  return exit_code;
}

}  // namespace xlens::cli
