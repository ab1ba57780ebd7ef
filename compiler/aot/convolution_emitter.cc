#include "compiler/aot/convolution_emitter.h"

#include <llvm/IR/IRBuilder.h>

#include "compiler/aot/dot_emitter.h"

namespace xlens::aot {

codegen::KernelSpec EmitCanonicalConvolution(const HloInstruction& convolution,
                                             const std::string& name, llvm::Module& module) {
  const Shape& in = convolution.operand(0)->shape();
  const Shape& out = convolution.shape();
  const int64_t spatial = in.rank() - 2;
  const int64_t batch = in.dimensions(0);
  const int64_t features_in = in.dimensions(in.rank() - 1);
  const int64_t features_out = out.dimensions(out.rank() - 1);
  int64_t out_pixels = 1, in_pixels = 1, window_positions = 1;
  for (int64_t s = 0; s < spatial; ++s) {
    out_pixels *= out.dimensions(s + 1);
    in_pixels *= in.dimensions(s + 1);
    window_positions *= convolution.window->dimensions[s].size;
  }

  llvm::LLVMContext& c = module.getContext();
  llvm::Type* ptr = llvm::PointerType::get(c, 0);
  llvm::Function* f = CreateLoopNestKernel(name, module);
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(c, "entry", f));
  llvm::Type* t = out.element_type() == PrimitiveType::F64 ? b.getDoubleTy() : b.getFloatTy();
  auto buffer = [&](int i) {
    return b.CreateLoad(ptr, b.CreateConstInBoundsGEP1_64(ptr, f->getArg(0), i));
  };
  llvm::Value* input = buffer(0);
  llvm::Value* kernel = buffer(1);
  llvm::Value* output = buffer(2);
  // Coordinates of a row-major linear index over `sizes`.
  auto coordinates = [&](llvm::Value* linear, const std::vector<int64_t>& sizes) {
    std::vector<llvm::Value*> result(sizes.size());
    for (int64_t s = static_cast<int64_t>(sizes.size()) - 1; s >= 0; --s) {
      result[s] = b.CreateURem(linear, b.getInt64(sizes[s]));
      linear = b.CreateUDiv(linear, b.getInt64(sizes[s]));
    }
    return result;
  };
  std::vector<int64_t> out_sizes, window_sizes;
  for (int64_t s = 0; s < spatial; ++s) {
    out_sizes.push_back(out.dimensions(s + 1));
    window_sizes.push_back(convolution.window->dimensions[s].size);
  }

  EmitCountedLoop(b, "pixel", batch * out_pixels, [&](llvm::Value* pixel) {
    llvm::Value* out_row = b.CreateInBoundsGEP(t, output, b.CreateNUWMul(pixel, b.getInt64(features_out)));
    EmitCountedLoop(b, "zero", features_out, [&](llvm::Value* o) {
      b.CreateStore(llvm::ConstantFP::get(t, 0.0), b.CreateInBoundsGEP(t, out_row, o));
    });
    llvm::Value* image = b.CreateUDiv(pixel, b.getInt64(out_pixels));
    const std::vector<llvm::Value*> at = coordinates(b.CreateURem(pixel, b.getInt64(out_pixels)), out_sizes);
    EmitCountedLoop(b, "window", window_positions, [&](llvm::Value* position) {
      const std::vector<llvm::Value*> w = coordinates(position, window_sizes);
      // The input element under this window position, in the base dilated and padded.
      llvm::Value* inside = b.getTrue();
      llvm::Value* in_linear = b.getInt64(0);
      for (int64_t s = 0; s < spatial; ++s) {
        const WindowDimension& d = convolution.window->dimensions[s];
        llvm::Value* p = b.CreateSub(
            b.CreateAdd(b.CreateMul(at[s], b.getInt64(d.stride)), b.CreateMul(w[s], b.getInt64(d.window_dilation))),
            b.getInt64(d.padding_low));
        llvm::Value* index = b.CreateSDiv(p, b.getInt64(d.base_dilation));
        inside = b.CreateAnd(inside, b.CreateICmpSGE(p, b.getInt64(0)));
        inside = b.CreateAnd(inside, b.CreateICmpEQ(b.CreateSRem(p, b.getInt64(d.base_dilation)), b.getInt64(0)));
        inside = b.CreateAnd(inside, b.CreateICmpSLT(index, b.getInt64(in.dimensions(s + 1))));
        in_linear = b.CreateAdd(b.CreateMul(in_linear, b.getInt64(in.dimensions(s + 1))), index);
      }
      llvm::Function* fn = b.GetInsertBlock()->getParent();
      auto* accumulate = llvm::BasicBlock::Create(c, "accumulate", fn);
      auto* next = llvm::BasicBlock::Create(c, "next_position", fn);
      b.CreateCondBr(inside, accumulate, next);
      b.SetInsertPoint(accumulate);
      llvm::Value* in_pixel = b.CreateInBoundsGEP(
          t, input, b.CreateMul(b.CreateAdd(b.CreateMul(image, b.getInt64(in_pixels)), in_linear),
                                b.getInt64(features_in)));
      llvm::Value* kernel_block = b.CreateInBoundsGEP(
          t, kernel, b.CreateMul(position, b.getInt64(features_in * features_out)));
      EmitCountedLoop(b, "i", features_in, [&](llvm::Value* i) {
        llvm::Value* scale = b.CreateLoad(t, b.CreateInBoundsGEP(t, in_pixel, i));
        llvm::Value* kernel_row = b.CreateInBoundsGEP(t, kernel_block, b.CreateMul(i, b.getInt64(features_out)));
        EmitScaledRowAdd(b, "o", features_out, t, scale, kernel_row, out_row);
      });
      b.CreateBr(next);
      b.SetInsertPoint(next);
    });
  });
  b.CreateRetVoid();
  return OnePhaseKernelSpec(name, batch * out_pixels * window_positions * features_in * features_out);
}

}  // namespace xlens::aot
