// A loop kernel run as the epilogue of the library call before it: on each of the call's parts,
// on the thread that ran the part, over the images the part just wrote. A product split in k
// (onednn_thunks.cc) has no part that writes a row whole: there the images are the output's
// rows, and the loop that adds the partial products runs the kernel on the rows it summed.
//
// A training step's convolution feeds its ReLU, and JAX's ReLU gradient reads the pre-activation
// (compare(x, max(x, 0)) to tell x = 0 from x < 0: 0.5 at 0, 0 below), so the forward keeps both
// the pre-activation and its ReLU: the call writes one, a loop kernel the other. Likewise the
// backward's input gradient dx is multiplied by that mask in a loop kernel right after the
// backward-data call. oneDNN has no post-op with two outputs, and the mask (selects over x, its
// divide folded: algebraic_simplifier.h) is no binary post-op of dx alone. Run per part, such a kernel needs no launch
// of its own nor a wait for the pool's workers between it and the call, and reads the images the
// part wrote while they are in its core's L2. The kernel is the very code that would have run
// after the call, so the results are the same bit for bit; only when it runs changes.
// Measured in the convolution step (traces of 300 runs each, load 7): the ReLU takes as long
// inside the part as it took as a kernel (a part of 16 images of 28x28x8 62.6 -> 73.6 us at the
// 10th percentile, against 12.6 for the kernel over both parts). Its cost is in writing the
// second output, not in reading the first: the mask after the input gradient, which also reads x
// from the last-level cache, adds 12.4 us to its part. What goes is the three launches and the
// pool's spinning around them: the step's CPU time 3% lower in 7 of 8 process pairs, its wall
// time unchanged within the noise.
//
// The kernel may run on a part's images before the other parts are done only where it reads
// and writes nothing but those images' elements: a loop fusion of elementwise operations (and
// reshapes, scalar broadcasts, constants) over arrays of the call's result's size, all in
// row-major layout, so that each task reads its operands at the elements it writes, and whose
// tasks fall on image boundaries (as its phase publishes them: KernelPhase::elements_per_task).
// Which buffers alias is known only in the frame: each
// execution checks that the kernel writes no buffer the call reads and shares no buffer with
// the call but element for element (else the kernel runs whole after the call).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "compiler/hlo/instruction.h"
#include "compiler/runtime/thunk.h"

namespace xlens::runtime {

class PartEpilogue {
 public:
  // The epilogue for `kernel_hlo` (whose thunk is `kernel`) after the library call `call`, whose
  // result is `images` images, each `image_elements` elements, one after the other, and whose
  // operands are in `call_operand_slots`, its result in `call_output_slot`; nullptr where the
  // kernel cannot run per part (above). `kernel` is taken only when an epilogue is made.
  static std::shared_ptr<const PartEpilogue> Make(const HloInstruction& call,
                                                  const std::vector<int64_t>& call_operand_slots,
                                                  int64_t call_output_slot, int64_t images,
                                                  int64_t image_elements, const HloInstruction& kernel_hlo,
                                                  std::unique_ptr<KernelThunk>& kernel);

  // Whether the buffers of `frame` let the kernel run per part (the aliasing above).
  bool Applies(char** frame) const;
  // The kernel's tasks over images [first, first + count) of the call's result.
  void RunImages(char** frame, char* scratch, int64_t first, int64_t count) const;
  // The kernel whole, where it does not apply per part.
  Status RunWhole(char** frame, ExecuteContext& context) const { return kernel_->Execute(frame, context); }
  const KernelThunk& kernel() const { return *kernel_; }
  // "then fusion.14 on each part's images", for the call's thunk listing.
  std::string Description() const;

 private:
  struct Extent {
    int64_t slot = -1, bytes = 0;
  };
  std::unique_ptr<KernelThunk> kernel_;
  int64_t tasks_per_image_ = 0;
  std::vector<Extent> call_reads_;    // the call's operands
  Extent call_result_;
  std::vector<Extent> kernel_reads_;  // the kernel's operands but the call's result
  std::vector<Extent> kernel_writes_;
};

}  // namespace xlens::runtime
