// The thunk that runs a oneDNN fusion (compiler/passes/onednn_rewriter.h): one oneDNN matmul or
// convolution primitive with its post-ops, built once with the executable. oneDNN picks its
// kernels for the CPU it runs on (AVX-512, AVX2, ... at run time), which the rest of the project,
// compiled for generic x86-64, cannot. Without oneDNN in the build, nothing here runs and the
// pipeline never makes such fusions.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "compiler/hlo/instruction.h"
#include "compiler/runtime/thunk.h"

namespace xlens::runtime {

// Whether this build runs oneDNN calls.
bool OneDnnAvailable();

// Whether `fusion` runs as a oneDNN call: a fusion MatchOneDnnCall reads, in a build with oneDNN.
bool IsOneDnnFusion(const HloInstruction& fusion);

// Matrix products of at most this many multiply-adds (all batch elements together) run in the
// thunk's own loops (small_product.h), their post-ops after them, instead of calling oneDNN,
// whose fixed cost per call is most of such a product. Read when a thunk is made; tests set 0 to
// hold small shapes to oneDNN's kernels.
int64_t SmallProductLimit();
void SetSmallProductLimit(int64_t multiply_adds);

class OneDnnThunk : public Thunk {
 public:
  // Builds the primitive for `fusion` (IsOneDnnFusion holds); `operand_slots` are the fusion's
  // operands in order.
  static StatusOr<std::unique_ptr<OneDnnThunk>> Create(std::string hlo_name,
                                                       const HloInstruction& fusion,
                                                       std::vector<int64_t> operand_slots,
                                                       int64_t output_slot);
  ~OneDnnThunk() override;
  Status Execute(char** frame, ExecuteContext& context) const override;
  std::string ToString(int indent) const override;
  // "matmul(lhs, rhs^T) + binary_add[bias] + gelu_tanh" and oneDNN's kernel ("brg:avx512_core").
  const std::string& description() const { return description_; }
  const std::string& implementation() const { return implementation_; }
  // How many parts a call runs as on the pool.
  int64_t Parts() const;
  // The share of the product's outputs a call computes: below 1 where a mask leaves the rest
  // unread (product_mask.h), so that the profile rates the kernel by the work it does.
  double ComputedShare() const;
  // Whether a convolution's weights are reordered into another layout for oneDNN (on every call,
  // or once where they are constants) rather than read where they lie.
  bool ReordersWeights() const;
  // The operand slot of weights that the parts read in blocks of columns (gemm:jit, a plain rhs)
  // with their rows a multiple of 4 KiB apart, for a product of at most 64 rows, or -1. The executable keeps that buffer on 4 KiB
  // pages (KeepOnSmallPages): on a 2 MiB page such a block's rows share a few cache sets.
  int64_t ColumnBlockWeightsSlot() const;
  // How many calls ran the product whole, as one call on the calling thread, instead of its
  // parts (a split product kept whole, where the pool would have run the parts inline).
  int64_t WholeRuns() const { return whole_runs_.load(std::memory_order_relaxed); }
  // Takes `kernel`, the loop kernel of `kernel_hlo` run right after this call (of `call`, its
  // operands in `operand_slots`, its result in `output_slot`) and reading its result, to run on
  // each part's images as the part's epilogue (part_epilogue.h): where the call is a convolution
  // or its input gradient in parts of images, or a product split in k (its rows as images, run
  // by the loop that sums the partial products), and the kernel reads in place. False, `kernel`
  // left as it was, otherwise.
  bool TakeEpilogue(const HloInstruction& call, const std::vector<int64_t>& operand_slots, int64_t output_slot,
                    const HloInstruction& kernel_hlo, std::unique_ptr<KernelThunk>& kernel);
  // The kernel taken by TakeEpilogue, or nullptr.
  const KernelThunk* EpilogueKernel() const;

 private:
  // Whether the call's parts are too small to be worth waking a thread for (a batched product
  // below two parts' worth of 2^18 multiply-adds): they run one after the other on the calling
  // thread. Set by Create.
  bool ComputeRunsInline() const;
  bool runs_inline_ = false;
  mutable std::atomic<int64_t> whole_runs_{0};

  struct Impl;
  explicit OneDnnThunk(std::string hlo_name);

  std::unique_ptr<Impl> impl_;
  std::string description_, implementation_;
};

}  // namespace xlens::runtime
