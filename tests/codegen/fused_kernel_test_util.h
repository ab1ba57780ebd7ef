// What the CPU kernel tests share: a fused computation written alone and called from an entry as
// a kInput fusion, and the kernel spec and the IR the emitter writes for a module's root.
#pragma once

#include <string>

#include <gtest/gtest.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>

#include "compiler/codegen/kernel_emitter.h"
#include "compiler/hlo/parser.h"

namespace xlens::testing {

// A module of `computations` (the reducers) and `body` (a fused computation's lines, parameters
// first, its root last) called from the entry as one kInput fusion of the entry's parameters,
// declared as `body` declares them.
inline std::string InInputFusion(const std::string& computations, const std::string& body) {
  std::string parameters, operands, root_shape;
  size_t start = 0;
  while (start < body.size()) {
    size_t end = body.find('\n', start);
    if (end == std::string::npos) end = body.size();
    const std::string line = body.substr(start, end - start);
    start = end + 1;
    if (line.find(" parameter(") != std::string::npos) {
      parameters += line + "\n";
      const size_t name = line.find_first_not_of(' ');
      operands += (operands.empty() ? "" : ", ") + line.substr(name, line.find(' ', name) - name);
    } else if (line.starts_with("  ROOT ")) {
      // The shape after "= ": a tuple's up to its closing parenthesis, an array's up to a space.
      const size_t shape = line.find("= ") + 2;
      const size_t shape_end = line[shape] == '(' ? line.find(')', shape) + 1 : line.find(' ', shape);
      root_shape = line.substr(shape, shape_end - shape);
    }
  }
  return "HloModule m\n" + computations + "fused {\n" + body + "}\nENTRY e {\n" + parameters +
         "  ROOT f = " + root_shape + " fusion(" + operands + "), kind=kInput, calls=fused\n}\n";
}

// The kernel spec the emitter plans for the entry's root, its IR verified.
inline codegen::KernelSpec SpecOfRoot(const std::string& text) {
  auto module = ParseHloModule(text);
  EXPECT_TRUE(module.ok()) << module.status().message();
  if (!module.ok()) return {};
  llvm::LLVMContext context;
  llvm::Module llvm_module("test", context);
  auto spec =
      codegen::EmitKernel(*(*module)->entry_computation()->root_instruction(), "k", llvm_module);
  EXPECT_TRUE(spec.ok()) << spec.status().message();
  std::string errors;
  llvm::raw_string_ostream os(errors);
  EXPECT_FALSE(llvm::verifyModule(llvm_module, &os)) << errors;
  return spec.ok() ? *spec : codegen::KernelSpec{};
}

// The unoptimized IR of the kernel of the entry's root, verified (with outputs of `streamed` bytes
// or more written with streaming stores, none where 0). With `triple`, for that target (a CPU's:
// the transcendental functions inline, fast_math.h).
inline std::string IrOfRoot(const std::string& text, int64_t streamed = 0, const std::string& triple = "") {
  auto module = ParseHloModule(text);
  EXPECT_TRUE(module.ok()) << module.status().message();
  if (!module.ok()) return "";
  llvm::LLVMContext context;
  llvm::Module llvm_module("test", context);
  if (!triple.empty()) llvm_module.setTargetTriple(triple);
  codegen::KernelOptions options;
  options.cpu_streaming_store_bytes = streamed;
  auto spec = codegen::EmitKernel(*(*module)->entry_computation()->root_instruction(), "k", llvm_module,
                                  codegen::KernelTarget::kCpu, options);
  EXPECT_TRUE(spec.ok()) << spec.status().message();
  std::string errors;
  llvm::raw_string_ostream es(errors);
  EXPECT_FALSE(llvm::verifyModule(llvm_module, &es)) << errors;
  std::string ir;
  llvm::raw_string_ostream os(ir);
  llvm_module.print(os, nullptr);
  return ir;
}

// How many times `what` occurs in `text`.
inline int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace xlens::testing
