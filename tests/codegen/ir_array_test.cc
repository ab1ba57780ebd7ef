// IrArray's offsets: right for any layout, and summed so that an index delinearized from one
// counter folds back into it (the unit stride a vectorizer needs).
#include "compiler/codegen/ir_array.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>

#include "compiler/codegen/cpu/cpu_jit.h"

namespace xlens::codegen {
namespace {

int64_t ConstantOffset(llvm::Value* v) { return llvm::cast<llvm::ConstantInt>(v)->getSExtValue(); }

TEST(IrArrayTest, OffsetsFollowTheLayout) {
  llvm::LLVMContext context;
  llvm::IRBuilder<> b(context);
  Shape shape(PrimitiveType::F32, {4, 3, 6, 5});
  shape.set_layout(Layout{{1, 3, 2, 0}});  // dimension 1 minor, then 3, 2, 0
  IrArray array(nullptr, shape);
  auto at = [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return ConstantOffset(array.EmitLinearIndex(
        b, {b.getInt64(i0), b.getInt64(i1), b.getInt64(i2), b.getInt64(i3)}));
  };
  EXPECT_EQ(at(0, 0, 0, 0), 0);
  EXPECT_EQ(at(0, 1, 0, 0), 1);
  EXPECT_EQ(at(0, 0, 0, 1), 3);
  EXPECT_EQ(at(0, 0, 1, 0), 15);
  EXPECT_EQ(at(1, 0, 0, 0), 90);
  EXPECT_EQ(at(3, 2, 5, 4), 3 * 90 + 5 * 15 + 4 * 3 + 2);
  EXPECT_EQ(ConstantOffset(LinearizeRowMajor(b, {b.getInt64(2), b.getInt64(0), b.getInt64(3)},
                                             {4, 1, 7})),
            2 * 7 + 3);
}

TEST(IrArrayTest, ADelinearizedCounterFoldsBackIntoItsOffset) {
  // offset(i) for an NHWC [32,28,28,8] indexed by i's remainders and quotients, and the same
  // through a reshape to [32,6272] (LinearizeRowMajor then the operand's offset): after the
  // host's pipeline both are i itself, no division left.
  llvm::LLVMContext context;
  auto module = std::make_unique<llvm::Module>("m", context);
  llvm::IRBuilder<> b(context);
  auto* type = llvm::FunctionType::get(b.getInt64Ty(), {b.getInt64Ty()}, false);
  const std::vector<int64_t> dims = {32, 28, 28, 8};
  for (bool reshaped : {false, true}) {
    auto* f = llvm::Function::Create(type, llvm::Function::ExternalLinkage,
                                     reshaped ? "through_reshape" : "direct", module.get());
    b.SetInsertPoint(llvm::BasicBlock::Create(context, "entry", f));
    llvm::Value* rest = f->getArg(0);
    IrIndex index(4);
    for (int d = 3; d > 0; --d) {
      index[d] = b.CreateURem(rest, b.getInt64(dims[d]));
      rest = b.CreateUDiv(rest, b.getInt64(dims[d]));
    }
    index[0] = rest;
    llvm::Value* offset;
    if (reshaped) {
      llvm::Value* linear = LinearizeRowMajor(b, index, dims);
      IrIndex operand = DelinearizeRowMajor(b, linear, {32, 6272});
      offset = IrArray(nullptr, Shape(PrimitiveType::F32, {32, 6272})).EmitLinearIndex(b, operand);
    } else {
      offset = IrArray(nullptr, Shape(PrimitiveType::F32, dims)).EmitLinearIndex(b, index);
    }
    b.CreateRet(offset);
  }
  ASSERT_FALSE(llvm::verifyModule(*module, &llvm::errs()));
  ASSERT_TRUE(OptimizeModuleForHost(*module, 2).ok());
  for (const char* name : {"direct", "through_reshape"}) {
    std::string ir;
    llvm::raw_string_ostream os(ir);
    module->getFunction(name)->print(os);
    EXPECT_THAT(ir, ::testing::Not(::testing::HasSubstr("div"))) << ir;
    EXPECT_THAT(ir, ::testing::Not(::testing::HasSubstr("rem"))) << ir;
    EXPECT_THAT(ir, ::testing::HasSubstr("ret i64 %")) << ir;  // i (frozen), not a sum
  }
}

}  // namespace
}  // namespace xlens::codegen
