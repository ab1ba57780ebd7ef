// batched-chain-split: a chain of two batched products with only row-wise work between them,
// attention's softmax(q k^T) v, whose intermediate is too large to stay in the caches, is split
// into one chain per element of the leading batch dimension:
//   s = dot(a, b) [B, m, n]; p = f(s) (elementwise, broadcasts, reductions that keep dimension
//   0, reshapes that keep it); r = dot(p, c)   ->   r = concatenate(r_0, ..., r_{B-1})
// where r_i computes the same on slice i of a, b, c (and of any other batched operand of f).
// Run one after the other, each chain's scores ([m, n]: 4 MiB of attention over 1024 positions,
// in two row parts of 2 MiB, twice a core's 1 MiB L2 here: they stay in the shared LLC) are
// written, normalised and read again while they are in the caches, instead of all B of them
// passing through memory three times. The slices of a, b and c cost no copy: the oneDNN calls
// read them in place at their offsets (onednn_rewriter.h, OneDnnCall::lhs_offset). On
// 8x1024x64 attention, two threads: 12.8 -> 12.4 ms a run with the arena on huge pages, 13.8 ->
// 12.2 ms on 4 KiB pages; chains of one batch element are 1.15x faster than the whole, chains of
// two 1.07x.
// The split stays at batch elements: chains over blocks of rows of one batch element as well
// (q's rows; k and v read whole by each), so that a part's scores would fit a core's L2, are no
// faster on that attention. Blocks of 512 rows (2 MiB of scores, 1 MiB a core) are within the
// noise of whole elements, and blocks of 256 slower: their [256,64]x[64,1024] products q k^T take
// 21-29 ms against 17-21 summed over a run.
// Each chain's kernels are compiled apart (that attention's compile 45 -> 210 ms). Chains whose
// intermediate fits the caches as it is are left alone, as are products with an intermediate
// read anywhere else and work that mixes batch elements. Runs before layout assignment, on
// canonical dots (dot-decomposer's form); reports a change when it split a chain.
#pragma once

#include <cstdint>

#include "compiler/passes/hlo_pass.h"

namespace xlens {

class BatchedChainSplit : public HloPass {
 public:
  // Splits a chain whose first product's result has at least `min_bytes`, into chains of as
  // many batch elements as keep theirs under `max_chain_bytes` (a batch element over that
  // would not stay in the cache either: no split). `max_chain_bytes` is below `min_bytes`, so
  // that a chain once split is not split again.
  explicit BatchedChainSplit(int64_t min_bytes = int64_t{16} << 20, int64_t max_chain_bytes = int64_t{4} << 20)
      : min_bytes_(min_bytes), max_chain_bytes_(max_chain_bytes) {}
  std::string_view name() const override { return "batched-chain-split"; }
  StatusOr<bool> Run(HloModule& module) override;

 private:
  int64_t min_bytes_, max_chain_bytes_;
};

}  // namespace xlens
