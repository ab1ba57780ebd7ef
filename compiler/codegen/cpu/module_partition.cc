#include "compiler/codegen/cpu/module_partition.h"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>
#include <llvm/Bitcode/BitcodeWriter.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Transforms/Utils/Cloning.h>
#include <llvm/Transforms/Utils/ValueMapper.h>

namespace xlens::codegen {

StatusOr<std::vector<ModulePartition>> PartitionModule(
    llvm::Module& module, const std::function<int(const llvm::Function&)>& level_of,
    int partitions_per_level) {
  // Internal globals get names of their own that every partition can refer to.
  int global_index = 0;
  for (llvm::GlobalVariable& gv : module.globals()) {
    if (!gv.hasLocalLinkage()) continue;
    gv.setName(fmt::format("xlens_global_{}", global_index++));
    gv.setLinkage(llvm::GlobalValue::ExternalLinkage);
  }
  // Exported functions by level, largest first.
  std::map<int, std::vector<std::pair<size_t, const llvm::Function*>>> by_level;
  for (const llvm::Function& f : module) {
    if (f.isDeclaration() || f.hasLocalLinkage()) continue;
    by_level[level_of(f)].push_back({f.getInstructionCount(), &f});
  }
  struct Bin {
    int level;
    size_t size = 0;
    std::set<const llvm::GlobalValue*> owned;
    std::vector<std::string> names;
  };
  std::vector<Bin> bins;
  for (auto& [level, functions] : by_level) {
    std::stable_sort(functions.begin(), functions.end(),
                     [](const auto& a, const auto& b) { return a.first > b.first; });
    const size_t first = bins.size();
    const size_t count = std::min<size_t>(std::max(1, partitions_per_level), functions.size());
    for (size_t i = 0; i < count; ++i) bins.push_back(Bin{level});
    for (const auto& [size, f] : functions) {
      Bin& bin = *std::min_element(bins.begin() + first, bins.end(),
                                   [](const Bin& a, const Bin& b) { return a.size < b.size; });
      bin.size += size;
      bin.owned.insert(f);
      bin.names.push_back(f->getName().str());
    }
  }
  if (bins.empty()) bins.push_back(Bin{3});
  // Exported global variables are defined in the first partition.
  for (const llvm::GlobalVariable& gv : module.globals()) {
    if (!gv.isDeclaration()) bins.front().owned.insert(&gv);
  }
  std::vector<ModulePartition> partitions;
  for (const Bin& bin : bins) {
    llvm::ValueToValueMapTy map;
    std::unique_ptr<llvm::Module> part =
        llvm::CloneModule(module, map, [&](const llvm::GlobalValue* gv) {
          return gv->hasLocalLinkage() || bin.owned.count(gv) > 0;
        });
    ModulePartition partition;
    partition.opt_level = bin.level;
    partition.functions = bin.names;
    llvm::raw_string_ostream os(partition.bitcode);
    llvm::WriteBitcodeToFile(*part, os);
    os.flush();
    partitions.push_back(std::move(partition));
  }
  return partitions;
}

}  // namespace xlens::codegen
