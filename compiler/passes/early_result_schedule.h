// The order the entry computation's instructions run in on the CPU and GPU executors (buffer
// assignment's schedule): the post-order, except that an instruction whose only user is the
// root tuple (a result the module returns, such as a weight's update in a training step) runs as
// soon as its operands are ready instead of where the depth-first walk from the root reaches it.
//
// The post-order walks the root tuple's operands in turn, so a training step's last results
// wait behind the whole subtree of its first: the MLP step's w2 update x^T g (fusion.4) ran after
// the 784x128x256 w1 gradient, which had pushed g and the ReLU output it reads out of the core's
// L2, and the convolution step's dense-layer update after all three convolution gradients. Run
// early, each reads what was written just before it. Its buffer is an output's allocation either
// way, not the temporary heap's, and its operands die no later than they did.
// Measured (xlens run --trace of the benchmark's kept modules, the root tuple's operands
// reordered by hand to give this order, processes alternating with the original, 6 pairs each
// beside other work, load 8-9 on 2 CPUs): the MLP step's w2 update 10.9 -> 6.0 us and its bias
// gradient's g w^T 7.2 -> 4.8 (medians of the per-process medians), the convolution step's dense
// update 31.1 -> 25.2 us; no other kernel moved beyond the noise.
#pragma once

#include <vector>

#include "compiler/hlo/computation.h"

namespace xlens {

// Every instruction of `computation` once, operands (and control predecessors) before their
// users, as described above.
std::vector<HloInstruction*> EarlyResultSchedule(const HloComputation& computation);

}  // namespace xlens
