#include "compiler/codegen/sort_comparator.h"

#include <vector>

#include "compiler/codegen/kernel_emitter.h"

namespace xlens::codegen {

StatusOr<std::string> EmitSortComparator(const HloInstruction& sort, std::set<std::string>& taken,
                                         llvm::Module& module) {
  std::vector<PrimitiveType> types;
  for (const HloInstruction* operand : sort.operands()) {
    types.push_back(operand->shape().element_type());
  }
  const std::string name = UniqueKernelName(sort.name() + "_comparator", taken);
  RETURN_IF_ERROR(EmitComparator(*sort.to_apply(), types, name, module).WithContext(sort.name()));
  return name;
}

}  // namespace xlens::codegen
