// Shardings of a module, and values split and assembled by them, for
// tests/hlo/sharded_programs_test.py to hold against what jax itself did:
//
//   hlo_shard_tool shardings MODULE
//       one line per sharding in the module: `%name<TAB>hlo<TAB>as written<TAB>read and printed`,
//       and for a Shardy annotation `%name<TAB>sdy<TAB>the HLO sharding beside it or -<TAB>converted`
//   hlo_shard_tool split MODULE INPUTS N OUT
//       INPUTS/argI.npy split by the entry parameters' shardings into OUT/D/inputs/argI.npy
//       (exact tiles)
//   hlo_shard_tool assemble MODULE PER_DEVICE N OUT
//       PER_DEVICE/D/outputs/outI.npy (one per leaf of the entry root) assembled by the root's
//       sharding into OUT/outI.npy
// (the per-device folders make_sharded_programs.py writes)
//
// Exit 0, or 1 with one message on stderr.
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "compiler/hlo/computation.h"
#include "compiler/hlo/instruction.h"
#include "compiler/hlo/npy.h"
#include "compiler/hlo/parser.h"
#include "compiler/hlo/sharded_literals.h"
#include "compiler/hlo/shardy_shardings.h"
#include "compiler/support/file_io.h"

namespace xlens {
namespace {

StatusOr<std::unique_ptr<HloModule>> Load(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  ParseOptions options;
  options.filename = path;
  return ParseHloModule(text, options);
}

Status Shardings(const HloModule& module) {
  ASSIGN_OR_RETURN(ShardyMeshes meshes, ModuleShardyMeshes(module));
  for (const HloComputation* computation : module.computations()) {
    for (const HloInstruction* instr : computation->instructions()) {
      const std::string* written = instr->raw_attribute("sharding");
      if (written != nullptr) {
        ASSIGN_OR_RETURN(HloSharding s, HloSharding::Parse(*written, "sharding of %" + instr->name()));
        RETURN_IF_ERROR(s.Validate(instr->shape(), std::nullopt)
                            .WithContext("sharding of %" + instr->name()));
        std::printf("%%%s\thlo\t%s\t%s\n", instr->name().c_str(), written->c_str(),
                    s.ToString().c_str());
      }
      ASSIGN_OR_RETURN(std::vector<HloSharding> sdy, InstructionShardySharding(*instr, meshes));
      if (sdy.empty()) continue;
      HloSharding converted = sdy.size() == 1 ? sdy[0] : HloSharding::Tuple(sdy);
      std::printf("%%%s\tsdy\t%s\t%s\n", instr->name().c_str(), written ? written->c_str() : "-",
                  converted.ToString().c_str());
    }
  }
  return OkStatus();
}

Status Split(const HloModule& module, const std::string& inputs, int64_t n, const std::string& out) {
  ASSIGN_OR_RETURN(std::vector<HloSharding> shardings, EntryParameterShardings(module));
  for (size_t i = 0; i < shardings.size(); ++i) {
    ASSIGN_OR_RETURN(Literal global, ReadNpy(fmt::format("{}/arg{}.npy", inputs, i)));
    auto pieces = SplitLiteral(global, shardings[i], n, TilePadding::kExact);
    if (!pieces.ok()) return pieces.status().WithContext(fmt::format("parameter {}", i));
    for (int64_t d = 0; d < n; ++d) {
      const std::string dir = fmt::format("{}/{}/inputs", out, d);
      std::filesystem::create_directories(dir);
      RETURN_IF_ERROR(WriteNpy(fmt::format("{}/arg{}.npy", dir, i), (*pieces)[static_cast<size_t>(d)]));
    }
  }
  return OkStatus();
}

Status Assemble(const HloModule& module, const std::string& per_device, int64_t n,
                const std::string& out) {
  ASSIGN_OR_RETURN(HloSharding sharding, EntryRootSharding(module));
  const Shape& shape = module.entry_computation()->root_instruction()->shape();
  const int64_t leaves = shape.IsTuple() ? shape.tuple_shapes_size() : 1;
  std::vector<Literal> values;
  for (int64_t d = 0; d < n; ++d) {
    std::vector<Literal> outs;
    for (int64_t i = 0; i < leaves; ++i) {
      ASSIGN_OR_RETURN(Literal v, ReadNpy(fmt::format("{}/{}/outputs/out{}.npy", per_device, d, i)));
      outs.push_back(std::move(v));
    }
    values.push_back(shape.IsTuple() ? Literal::MakeTuple(std::move(outs)) : std::move(outs[0]));
  }
  ASSIGN_OR_RETURN(Literal global, AssembleLiteral(values, sharding, shape));
  std::filesystem::create_directories(out);
  for (int64_t i = 0; i < leaves; ++i) {
    const Literal& leaf = shape.IsTuple() ? global.tuple_element(i) : global;
    RETURN_IF_ERROR(WriteNpy(fmt::format("{}/out{}.npy", out, i), leaf));
  }
  return OkStatus();
}

Status Run(int argc, char** argv) {
  const std::string usage = "usage: hlo_shard_tool shardings MODULE | split MODULE INPUTS N OUT | "
                            "assemble MODULE PER_DEVICE N OUT";
  if (argc < 3) return Error(usage);
  const std::string command = argv[1];
  ASSIGN_OR_RETURN(std::unique_ptr<HloModule> module, Load(argv[2]));
  if (command == "shardings" && argc == 3) return Shardings(*module);
  if ((command == "split" || command == "assemble") && argc == 6) {
    const int64_t n = std::stoll(argv[4]);
    return command == "split" ? Split(*module, argv[3], n, argv[5])
                              : Assemble(*module, argv[3], n, argv[5]);
  }
  return Error(usage);
}

}  // namespace
}  // namespace xlens

int main(int argc, char** argv) {
  xlens::Status status = xlens::Run(argc, argv);
  if (status.ok()) return 0;
  std::fprintf(stderr, "hlo_shard_tool: %s\n", status.message().c_str());
  return 1;
}
