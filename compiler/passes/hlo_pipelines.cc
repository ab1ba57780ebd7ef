#include "compiler/passes/hlo_pipelines.h"

#include <algorithm>
#include <charconv>
#include <set>

#include <fmt/format.h>

#include "compiler/passes/algebraic_simplifier.h"
#include "compiler/passes/batch_norm_expander.h"
#include "compiler/passes/batched_chain_split.h"
#include "compiler/passes/call_inliner.h"
#include "compiler/passes/constant_folding.h"
#include "compiler/passes/conv_canonicalization.h"
#include "compiler/passes/copy_insertion.h"
#include "compiler/passes/cse.h"
#include "compiler/passes/dce.h"
#include "compiler/passes/dot_decomposer.h"
#include "compiler/passes/float8_normalization.h"
#include "compiler/passes/horizontal_fusion.h"
#include "compiler/passes/instruction_fusion.h"
#include "compiler/passes/layout_assignment.h"
#include "compiler/passes/multi_output_fusion.h"
#include "compiler/passes/onednn_rewriter.h"
#include "compiler/passes/planted_miscompile.h"
#include "compiler/passes/reduce_factor_hoisting.h"
#include "compiler/passes/reduce_precision_insertion.h"
#include "compiler/passes/reshape_mover.h"
#include "compiler/passes/shifted_moments.h"
#include "compiler/passes/bitcast_dtypes_expander.h"
#include "compiler/passes/rng_bit_generator_expander.h"
#include "compiler/passes/topk_decomposer.h"
#include "compiler/passes/tuple_simplifier.h"
#include "compiler/support/terminal_text.h"
#include "dump/flags.h"

namespace xlens {

std::string_view BackendName(Backend backend) { return backend == Backend::kCpu ? "cpu" : "gpu"; }

StatusOr<ReducePrecisionConfig> ParseReducePrecisionFlag(std::string_view value) {
  auto bad = [&](std::string_view why) {
    return Error(fmt::format("--xla_reduce_precision={}: {}; expected E,M or E,M:opcode,opcode "
                             "(e.g. 5,10 or 8,7:add,multiply)", DisplayText(value), why));
  };
  ReducePrecisionConfig config;
  std::string_view bits = value.substr(0, value.find(':'));
  size_t comma = bits.find(',');
  if (comma == std::string_view::npos) return bad("no ',' between exponent and mantissa bits");
  auto to_int = [](std::string_view t, int64_t& out) {
    auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), out);
    return ec == std::errc() && ptr == t.data() + t.size();
  };
  if (!to_int(bits.substr(0, comma), config.exponent_bits) ||
      !to_int(bits.substr(comma + 1), config.mantissa_bits)) {
    return bad("the bit counts must be integers");
  }
  if (config.exponent_bits < 1 || config.exponent_bits > 11 || config.mantissa_bits < 0 ||
      config.mantissa_bits > 52) {
    return bad("exponent bits must be 1..11 and mantissa bits 0..52");
  }
  if (size_t colon = value.find(':'); colon != std::string_view::npos) {
    std::string_view list = value.substr(colon + 1);
    while (!list.empty()) {
      size_t end = list.find(',');
      std::string_view name = list.substr(0, end);
      std::optional<HloOpcode> opcode = StringToHloOpcode(name);
      if (!opcode) return bad(fmt::format("'{}' is not an opcode", DisplayText(name)));
      config.opcodes.insert(*opcode);
      list = end == std::string_view::npos ? std::string_view() : list.substr(end + 1);
    }
  }
  return config;
}

std::unique_ptr<HloPassPipeline> MakeHloPipeline(
    Backend backend, std::vector<const HloPass*>* fusion_passes,
    const std::optional<ReducePrecisionConfig>& reduce_precision) {
  auto pipeline = std::make_unique<HloPassPipeline>(std::string(BackendName(backend)) + "-compiler");

  auto optimization = std::make_unique<HloPassPipeline>("optimization");
  optimization->AddPass<CallInliner>();
  // Ops XLA expands into other HLO before optimizing: batch norms into arithmetic that fuses,
  // topk into a sort, rng-bit-generator into Philox or ThreeFry rounds, bitcasts between
  // widths into shifts.
  optimization->AddPass<BatchNormExpander>();
  optimization->AddPass<TopkDecomposer>();
  optimization->AddPass<RngBitGeneratorExpander>();
  optimization->AddPass<BitcastDtypesExpander>();
  // Dots and convolutions of 8-bit floats over f32, so that they reach Eigen and oneDNN.
  optimization->AddPass<Float8Normalization>();
  optimization->AddPass<DotDecomposer>();
  // XLA's CPU backend wants convolutions in one canonical layout for its Eigen kernels; the GPU
  // backend picks layouts per convolution later.
  if (backend == Backend::kCpu) optimization->AddPass<ConvCanonicalization>();
  auto simplification = std::make_unique<HloPassPipeline>("simplification");
  simplification->AddPass<AlgebraicSimplifier>();
  simplification->AddPass<ReshapeMover>();
  simplification->AddPass<HloConstantFolding>();
  simplification->AddPass<TupleSimplifier>();
  simplification->AddPass<HloDce>();
  optimization->AddPass(std::make_unique<HloPassFix>(std::move(simplification)));
  // Per-output factors out of sums, so that a sum waits only for what varies along its reduced
  // dimensions (batch norm's backward sums then need only the mean); CSE below merges the
  // products it builds with the rest.
  optimization->AddPass<ReduceFactorHoisting>();
  // The sums of x - mean about a sample mean of x: with the mean's sum they take one sweep of the
  // CPU's column reductions where they took two.
  if (backend == Backend::kCpu) optimization->AddPass<ShiftedMoments>();
  // Attention's scores too large for the caches, one batch element at a time (CSE then merges
  // the chains' copies of the same scalar broadcasts).
  if (backend == Backend::kCpu) optimization->AddPass<BatchedChainSplit>();
  optimization->AddPass<HloCse>();
  optimization->AddPass<HloDce>();
  pipeline->AddPass(std::move(optimization));

  auto layout = std::make_unique<HloPassPipeline>("layout-assignment");
  layout->AddPass<LayoutAssignment>(backend == Backend::kCpu ? LayoutBackend::kCpu
                                                             : LayoutBackend::kGpu);
  pipeline->AddPass(std::move(layout));

  auto post_layout = std::make_unique<HloPassPipeline>("post-layout-assignment");
  auto cleanup = std::make_unique<HloPassPipeline>("simplification-after-layout");
  cleanup->AddPass<AlgebraicSimplifier>();
  cleanup->AddPass<HloCse>();
  cleanup->AddPass<HloDce>();
  post_layout->AddPass(std::make_unique<HloPassFix>(std::move(cleanup)));
  if (!reduce_precision) {
    post_layout->AddPass<ReducePrecisionInsertion>();
  } else if (reduce_precision->opcodes.empty()) {
    post_layout->AddPass<ReducePrecisionInsertion>(reduce_precision->exponent_bits,
                                                   reduce_precision->mantissa_bits,
                                                   [](HloOpcode) { return true; });
  } else {
    post_layout->AddPass<ReducePrecisionInsertion>(reduce_precision->exponent_bits,
                                                   reduce_precision->mantissa_bits,
                                                   reduce_precision->opcodes);
  }
  pipeline->AddPass(std::move(post_layout));

  FusionBackend fusion_backend = backend == Backend::kCpu ? FusionBackend::kCpu : FusionBackend::kGpu;
  auto fusion = std::make_unique<HloPassPipeline>("fusion");
  // Dots and convolutions become oneDNN calls with their epilogues before the loop fusions take
  // those epilogues (XLA's CPU pipeline runs its oneDNN rewriter before fusion too).
  const HloPass* onednn = nullptr;
#ifdef XLENS_HAVE_ONEDNN
  if (backend == Backend::kCpu) onednn = &fusion->AddPass<OneDnnRewriter>();
#endif
  const HloPass* instruction_fusion = &fusion->AddPass<InstructionFusion>(fusion_backend);
  const HloPass* multi_output = &fusion->AddPass<MultiOutputFusion>();
  const HloPass* horizontal = nullptr;
  if (backend == Backend::kGpu) horizontal = &fusion->AddPass<HorizontalLoopFusion>();
  fusion->AddPass<HloDce>();
  pipeline->AddPass(std::move(fusion));
  if (fusion_passes != nullptr) {
    *fusion_passes = {instruction_fusion, multi_output};
    if (horizontal != nullptr) fusion_passes->push_back(horizontal);
    if (onednn != nullptr) fusion_passes->insert(fusion_passes->begin(), onednn);
  }

  auto copies = std::make_unique<HloPassPipeline>("copy-insertion");
  copies->AddPass<CopyInsertion>();
  pipeline->AddPass(std::move(copies));
  return pipeline;
}

std::vector<std::string> KnownPassNames() {
  std::set<std::string> names;
  for (Backend backend : {Backend::kCpu, Backend::kGpu}) {
    for (std::string& name : MakeHloPipeline(backend)->LeafPassNames()) names.insert(std::move(name));
  }
  // Not in the pipelines (a module reaches them partitioned or on one device), run by --passes.
  names.insert("sharding-propagation");
  names.insert("spmd-partitioning");
  return {names.begin(), names.end()};
}

Status CheckPassNames(const std::vector<std::string>& names, std::string_view flag) {
  std::vector<std::string> known = KnownPassNames();
  for (const std::string& name : names) {
    if (std::find(known.begin(), known.end(), name) != known.end()) continue;
    // The test-only pass is never listed, but it can be disabled like any other.
    if (name == PlantedMiscompile::kName) continue;
    const std::string* closest = &known.front();
    for (const std::string& k : known) {
      if (EditDistance(name, k) < EditDistance(name, *closest)) closest = &k;
    }
    return Error(fmt::format("{}: unknown pass '{}'; did you mean '{}'? Known passes: {}", flag,
                             DisplayText(name), *closest, fmt::join(known, ", ")));
  }
  return OkStatus();
}

std::vector<FusionDecision> FusionDecisionsOf(const std::vector<const HloPass*>& passes) {
  std::vector<FusionDecision> decisions;
  for (const HloPass* pass : passes) {
    const std::vector<FusionDecision>* d = nullptr;
    if (const auto* f = dynamic_cast<const InstructionFusion*>(pass)) d = &f->decisions();
    if (const auto* f = dynamic_cast<const MultiOutputFusion*>(pass)) d = &f->decisions();
    if (const auto* f = dynamic_cast<const HorizontalLoopFusion*>(pass)) d = &f->decisions();
    if (const auto* f = dynamic_cast<const OneDnnRewriter*>(pass)) d = &f->decisions();
    if (d != nullptr) decisions.insert(decisions.end(), d->begin(), d->end());
  }
  return decisions;
}

}  // namespace xlens
