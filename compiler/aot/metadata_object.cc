#include "compiler/aot/metadata_object.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/GlobalVariable.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Target/TargetMachine.h>
#include <nlohmann/json.hpp>

#include "compiler/aot/aot_target.h"

namespace xlens::aot {

namespace {

nlohmann::json Buffers(const std::vector<HeaderBuffer>& buffers) {
  nlohmann::json list = nlohmann::json::array();
  for (const HeaderBuffer& b : buffers) {
    list.push_back({{"name", b.name},
                    {"element_type", b.element_type},
                    {"shape", b.dimensions},
                    {"bytes", b.byte_size}});
  }
  return list;
}

}  // namespace

std::string MetadataJson(const HeaderSpec& spec) {
  nlohmann::json j;
  j["cpp_class"] = spec.cpp_class;
  j["entry_point"] = spec.entry_point;
  j["target_triple"] = spec.target_triple;
  j["arguments"] = Buffers(spec.args);
  j["results"] = Buffers(spec.results);
  j["variables"] = Buffers(spec.variables);
  for (size_t i = 0; i < spec.variables.size() && i < spec.variable_update_result.size(); ++i) {
    j["variables"][i]["updated"] = spec.variable_update_result[i] >= 0;
  }
  j["temp_bytes"] = spec.temp_bytes;
  j["weights_bytes"] = spec.weights_bytes;
  return j.dump();
}

StatusOr<std::string> MetadataObject(const HeaderSpec& spec, const std::string& target_triple) {
  TargetChoice choice;
  choice.triple = target_triple;
  ASSIGN_OR_RETURN(std::unique_ptr<llvm::TargetMachine> machine, CreateTargetMachine(choice));
  llvm::LLVMContext context;
  llvm::Module module(spec.entry_point + "_metadata", context);
  module.setTargetTriple(machine->getTargetTriple().str());
  module.setDataLayout(machine->createDataLayout());
  const std::string json = MetadataJson(spec);
  llvm::Constant* text = llvm::ConstantDataArray::getString(context, json, /*AddNull=*/true);
  new llvm::GlobalVariable(module, text->getType(), /*isConstant=*/true,
                           llvm::GlobalValue::ExternalLinkage, text, spec.entry_point + "_metadata");
  llvm::Type* size_type = llvm::Type::getIntNTy(context, module.getDataLayout().getPointerSizeInBits());
  new llvm::GlobalVariable(module, size_type, /*isConstant=*/true, llvm::GlobalValue::ExternalLinkage,
                           llvm::ConstantInt::get(size_type, json.size()),
                           spec.entry_point + "_metadata_size");
  return EmitObject(module, *machine);
}

}  // namespace xlens::aot
