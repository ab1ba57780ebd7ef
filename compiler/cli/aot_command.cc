// xlens aot: tfcompile's job. A GraphDef (or a SavedModel's signature) and a tf2xla.Config, or an
// HLO module, become a relocatable object for a target triple and the C++ header that calls it,
// with tfcompile's flags. Nothing is written unless everything succeeded: the object, the header
// and the metadata object are made in memory first, then written atomically, so a broken config
// or a graph that cannot compile leaves the output paths as they were.
#include <chrono>
#include <cstdio>
#include <map>
#include <set>

#include <fmt/format.h>

#include "compiler/aot/aot_compiler.h"
#include "compiler/aot/graph_lowering.h"
#include "compiler/aot/header_writer.h"
#include "compiler/aot/metadata_object.h"
#include "compiler/aot/tf2xla_config.h"
#include "compiler/cli/cli_util.h"
#include "compiler/cli/commands.h"
#include "compiler/cluster/graph_run.h"
#include "compiler/graph/graph.h"
#include "compiler/graph/graph_def.h"
#include "compiler/graph/lower_functional_ops.h"
#include "compiler/graph/resource_mgr.h"
#include "compiler/graph/saved_model.h"
#include "compiler/hlo/computation.h"
#include "compiler/support/file_io.h"
#include "compiler/support/terminal_text.h"

namespace xlens::cli {

namespace {

Status AotError(const std::string& message) { return Error("aot: " + message); }

// The HLO module's name: the class's, so dumps (module_0001.NAME.*) say which model they are.
std::string ModuleNameFor(const std::string& cpp_class) {
  size_t at = cpp_class.rfind("::");
  return at == std::string::npos ? cpp_class : cpp_class.substr(at + 2);
}

Status CheckArgs(const AotArgs& args) {
  if (args.graph.empty() == args.hlo.empty()) {
    return AotError("give either --graph GRAPH --config CONFIG or --hlo FILE");
  }
  if (!args.graph.empty() && args.config.empty()) {
    return AotError("--graph " + DisplayPath(args.graph) +
                    " needs --config: tfcompile's tf2xla.Config naming its feeds and fetches");
  }
  if (!args.hlo.empty() && !args.config.empty()) {
    return AotError("--config names a graph's tensors: it goes with --graph, not --hlo");
  }
  if (!args.signature.empty() && args.graph.empty()) {
    return AotError("--signature chooses a SavedModel's signature: it goes with --graph DIR");
  }
  if (Status s = aot::CheckCppClassName(args.cpp_class); !s.ok()) return s;
  if (!aot::IsValidCppIdentifier(args.entry_point)) {
    return AotError("--entry_point '" + DisplayText(args.entry_point) + "' is not a C identifier");
  }
  for (const auto& [flag, path] : {std::pair{"--out_function_object", args.out_function_object},
                                   std::pair{"--out_header", args.out_header}}) {
    if (path.empty()) return AotError(std::string(flag) + " is empty");
  }
  return OkStatus();
}

// Writes every output or none: each is written to its temporary first, and only when all are
// written are they committed, so a failed write leaves the old files as they were. Special
// files (/dev/null, a FIFO) are written through and never removed.
Status WriteOutputsAtomically(const std::vector<std::pair<std::string, std::string>>& files) {
  std::vector<OutputFile> outputs;
  outputs.reserve(files.size());
  for (const auto& [path, bytes] : files) {
    ASSIGN_OR_RETURN(OutputFile out, OutputFile::Create(path));
    RETURN_IF_ERROR(out.Write(bytes));
    outputs.push_back(std::move(out));
  }
  for (OutputFile& out : outputs) RETURN_IF_ERROR(out.Commit());
  return OkStatus();
}

// A SavedModel's signature is a call of its function: inlined, as `xlens graph run` and
// TensorFlow's session inline it, so that its variables' reads are in sight; every variable the
// config does not list is frozen at its checkpoint value (the weights become the object's
// read-only data, as saved_model_cli freezes them for tfcompile).
Status FreezeSavedModel(graph::SavedModel& model, const aot::Tf2XlaConfig& config,
                        const std::string& shown, graph::GraphDef* def,
                        std::map<std::string, graph::Tensor>* frozen) {
  ASSIGN_OR_RETURN(std::unique_ptr<graph::Graph> g,
                   cluster::BuildGraphToRun(*def, shown, /*allow_unknown_ops=*/false,
                                            /*infer_shapes=*/false));
  RETURN_IF_ERROR(cluster::InGraphFile(graph::LowerFunctionalOps(g.get()), shown));
  *def = g->ToGraphDef();
  graph::ResourceMgr resources;
  RETURN_IF_ERROR(cluster::InGraphFile(graph::LoadSavedModelVariables(model, resources), shown));
  std::set<std::string> listed;
  for (const aot::ConfigVariable& v : config.variable) listed.insert(v.node_name);
  for (const graph::SavedModelVariable& v : model.variables) {
    if (listed.count(v.node)) continue;
    std::shared_ptr<graph::Var> var = resources.Lookup(v.container, v.shared_name);
    if (var != nullptr && var->is_initialized()) (*frozen)[v.node] = var->value;
  }
  return OkStatus();
}

aot::HeaderBuffer FromAot(const aot::AotBuffer& b, const std::string& name) {
  return aot::HeaderBuffer{name, b.element_type, b.dimensions, b.byte_size};
}

}  // namespace

int RunAot(const AotArgs& args) {
  if (Status s = CheckArgs(args); !s.ok()) return Fail(s);
  FlagsSetup setup;
  if (Status s = SetUpFromFlags(args.extra_flags, "aot", setup); !s.ok()) return Fail(s);
  const auto start = std::chrono::steady_clock::now();

  aot::HeaderSpec spec;
  spec.cpp_class = args.cpp_class;
  spec.entry_point = args.entry_point;
  std::unique_ptr<HloModule> module;
  if (!args.graph.empty()) {
    auto config = aot::ReadTf2XlaConfig(args.config);
    if (!config.ok()) return Fail(config.status());
    std::shared_ptr<graph::SavedModel> saved_model;
    auto def = ReadGraphInput(args.graph, args.signature, &saved_model);
    const std::string shown = DisplayPath(args.graph);
    if (!def.ok()) return Fail(cluster::InGraphFile(def.status(), shown));
    std::map<std::string, graph::Tensor> frozen;
    if (saved_model != nullptr) {
      auto prepared = FreezeSavedModel(*saved_model, *config, shown, &*def, &frozen);
      if (!prepared.ok()) return Fail(prepared);
    }
    auto lowered = aot::LowerGraphForAot(*def, *config, shown, ModuleNameFor(args.cpp_class), frozen);
    if (!lowered.ok()) return Fail(lowered.status());
    module = std::move(lowered->module);
    spec.args = std::move(lowered->args);
    spec.results = std::move(lowered->results);
    spec.variables = std::move(lowered->variables);
    spec.variable_update_result = std::move(lowered->variable_update_result);
    spec.variable_readonly = std::move(lowered->variable_readonly);
    spec.source = DisplayPath(args.graph) + " and " + DisplayPath(args.config);
  } else {
    auto loaded = LoadModule(args.hlo, /*verify=*/true);
    if (!loaded.ok()) return Fail(loaded.status());
    module = std::move(*loaded);
    spec.source = DisplayPath(args.hlo);
  }

  aot::AotOptions options;
  options.target_triple = args.target_triple;
  options.target_cpu = args.target_cpu;
  options.target_features = args.target_features;
  options.entry_point = args.entry_point;
  options.opt_level = setup.opt_level;
  options.optimize = setup.optimize;
  auto compiled = aot::CompileAheadOfTime(*module, options);
  if (!compiled.ok()) {
    return Fail(cluster::InGraphFile(compiled.status(),
                                     DisplayPath(args.graph.empty() ? args.hlo : args.graph)));
  }
  if (args.hlo.empty()) {
    // The entry's buffers are the lowering's: the same count, the same sizes.
    size_t updates = 0;
    for (int r : spec.variable_update_result) updates += r >= 0 ? 1 : 0;
    if (compiled->arguments.size() != spec.args.size() + spec.variables.size() ||
        compiled->results.size() != spec.results.size() + updates) {
      return Fail(AotError(fmt::format(
          "internal: the compiled entry has {} arguments and {} results, the config {} and {}",
          compiled->arguments.size(), compiled->results.size(),
          spec.args.size() + spec.variables.size(), spec.results.size() + updates)));
    }
  } else {
    // From HLO, the parameters keep their names where those are identifiers.
    const HloComputation* entry = module->entry_computation();
    for (size_t i = 0; i < compiled->arguments.size(); ++i) {
      std::string name;
      if (i < static_cast<size_t>(entry->num_parameters())) {
        name = entry->parameter_instruction(static_cast<int64_t>(i))->name();
        for (char& c : name) {
          if (c == '.' || c == '-') c = '_';
        }
        if (!aot::IsValidCppIdentifier(name)) name.clear();
      }
      spec.args.push_back(FromAot(compiled->arguments[i], name));
    }
    for (const aot::AotBuffer& r : compiled->results) spec.results.push_back(FromAot(r, ""));
  }
  spec.temp_bytes = compiled->temp_bytes;
  spec.temp_alignment = compiled->temp_alignment;
  spec.weights_bytes = compiled->weights_bytes;
  spec.target_triple = compiled->target_triple;
  auto header = aot::WriteHeader(spec);
  if (!header.ok()) return Fail(header.status());

  std::vector<std::pair<std::string, std::string>> outputs = {
      {args.out_function_object, compiled->object}, {args.out_header, *header}};
  if (!args.out_metadata_object.empty()) {
    auto metadata = aot::MetadataObject(spec, options.target_triple.empty() ? compiled->target_triple
                                                                            : options.target_triple);
    if (!metadata.ok()) return Fail(metadata.status());
    outputs.emplace_back(args.out_metadata_object, std::move(*metadata));
  }
  if (Status s = WriteOutputsAtomically(outputs); !s.ok()) return Fail(s);

  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (args.print_memory) {
    int64_t arg_bytes = 0, result_bytes = 0;
    for (const aot::AotBuffer& b : compiled->arguments) arg_bytes += b.byte_size;
    for (const aot::AotBuffer& b : compiled->results) result_bytes += b.byte_size;
    std::printf("weights      %12lld bytes  (read-only data of the object)\n",
                static_cast<long long>(compiled->weights_bytes));
    std::printf("temporaries  %12lld bytes\n", static_cast<long long>(compiled->temp_bytes));
    std::printf("arguments    %12lld bytes  (%zu buffers)\n", static_cast<long long>(arg_bytes),
                compiled->arguments.size());
    std::printf("results      %12lld bytes  (%zu buffers)\n", static_cast<long long>(result_bytes),
                compiled->results.size());
    std::printf("object       %12zu bytes  (%d kernels, %s, compiled in %.2f s)\n",
                compiled->object.size(), compiled->kernel_count, compiled->target_triple.c_str(),
                seconds);
  }
  return 0;
}

}  // namespace xlens::cli
