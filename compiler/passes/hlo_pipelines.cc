#include "compiler/passes/hlo_pipelines.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "compiler/passes/algebraic_simplifier.h"
#include "compiler/passes/call_inliner.h"
#include "compiler/passes/constant_folding.h"
#include "compiler/passes/conv_canonicalization.h"
#include "compiler/passes/copy_insertion.h"
#include "compiler/passes/cse.h"
#include "compiler/passes/dce.h"
#include "compiler/passes/dot_decomposer.h"
#include "compiler/passes/horizontal_fusion.h"
#include "compiler/passes/instruction_fusion.h"
#include "compiler/passes/layout_assignment.h"
#include "compiler/passes/multi_output_fusion.h"
#include "compiler/passes/reduce_precision_insertion.h"
#include "compiler/passes/reshape_mover.h"
#include "compiler/passes/tuple_simplifier.h"
#include "dump/flags.h"

namespace xlens {

std::string_view BackendName(Backend backend) { return backend == Backend::kCpu ? "cpu" : "gpu"; }

std::unique_ptr<HloPassPipeline> MakeHloPipeline(Backend backend,
                                                 std::vector<const HloPass*>* fusion_passes) {
  auto pipeline = std::make_unique<HloPassPipeline>(std::string(BackendName(backend)) + "-compiler");

  auto optimization = std::make_unique<HloPassPipeline>("optimization");
  optimization->AddPass<CallInliner>();
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
  post_layout->AddPass<ReducePrecisionInsertion>();
  pipeline->AddPass(std::move(post_layout));

  FusionBackend fusion_backend = backend == Backend::kCpu ? FusionBackend::kCpu : FusionBackend::kGpu;
  auto fusion = std::make_unique<HloPassPipeline>("fusion");
  const HloPass* instruction_fusion = &fusion->AddPass<InstructionFusion>(fusion_backend);
  const HloPass* multi_output = &fusion->AddPass<MultiOutputFusion>();
  const HloPass* horizontal = nullptr;
  if (backend == Backend::kGpu) horizontal = &fusion->AddPass<HorizontalLoopFusion>();
  fusion->AddPass<HloDce>();
  pipeline->AddPass(std::move(fusion));
  if (fusion_passes != nullptr) {
    *fusion_passes = {instruction_fusion, multi_output};
    if (horizontal != nullptr) fusion_passes->push_back(horizontal);
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
  return {names.begin(), names.end()};
}

Status CheckPassNames(const std::vector<std::string>& names, std::string_view flag) {
  std::vector<std::string> known = KnownPassNames();
  for (const std::string& name : names) {
    if (std::find(known.begin(), known.end(), name) != known.end()) continue;
    const std::string* closest = &known.front();
    for (const std::string& k : known) {
      if (EditDistance(name, k) < EditDistance(name, *closest)) closest = &k;
    }
    return Error(fmt::format("{}: unknown pass '{}'; did you mean '{}'? Known passes: {}", flag,
                             name, *closest, fmt::join(known, ", ")));
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
    if (d != nullptr) decisions.insert(decisions.end(), d->begin(), d->end());
  }
  return decisions;
}

}  // namespace xlens
