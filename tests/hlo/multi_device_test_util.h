// Modules for the tests of collectives over several devices (the evaluator's, the CPU runtime's
// and the simulated GPUs'): an entry computation written in a test, with the reducers its
// collectives name; modules every runtime runs; random arguments for each device.
#pragma once

#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "compiler/hlo/computation.h"
#include "compiler/hlo/literal.h"
#include "compiler/hlo/module.h"
#include "compiler/hlo/parser.h"

namespace xlens::testing {

// The `to_apply=` computations the tests' collectives use: add and max of f32 scalars.
inline constexpr char kCollectiveReducers[] = R"(
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
max {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] maximum(x, y)
}
)";

// `HloModule m`, the reducers, then `entry` (the entry computation and any others it calls).
// A module that does not parse fails the test (with the text) and gives nullptr.
inline std::unique_ptr<HloModule> ParseWithReducers(const std::string& entry) {
  auto module = ParseHloModule("HloModule m\n" + std::string(kCollectiveReducers) + entry);
  EXPECT_TRUE(module.ok()) << module.status().message() << "\n" << entry;
  return module.ok() ? std::move(*module) : nullptr;
}

// Every collective and its -start/-done forms on 4 devices, each on the value before, up to
// `cpd` (f32[16,6]); a test adds its own ROOT (and what it computes from them) and the `}`.
inline constexpr char kEveryCollectiveUpToCpd[] = R"(ENTRY e {
  p = f32[4,6] parameter(0)
  r = u32[] replica-id()
  q = u32[] partition-id()
  ar = f32[4,6] all-reduce(p), replica_groups={{0,1},{2,3}}, to_apply=add
  ag = f32[4,12]{0,1} all-gather(ar), replica_groups=[2,2]<=[2,2]T(1,0), dimensions={1}
  rs = f32[1,12] reduce-scatter(ag), replica_groups={}, dimensions={0}, to_apply=max
  a2a = f32[4,6] all-to-all(p), replica_groups={{0,1,2,3}}, dimensions={0}
  cp = f32[4,6] collective-permute(a2a), source_target_pairs={{0,1},{1,2},{2,3}}
  b = f32[4,6] collective-broadcast(cp), replica_groups={{3,2,1,0}}
  ars = f32[4,6] all-reduce-start(b), replica_groups={}, to_apply=add
  ard = f32[4,6] all-reduce-done(ars)
  ags = (f32[4,6], f32[16,6]) all-gather-start(ard), replica_groups={}, dimensions={0}
  agd = f32[16,6] all-gather-done(ags)
  cps = (f32[16,6], f32[16,6], u32[], u32[]) collective-permute-start(agd), source_target_pairs={{3,0}}
  cpd = f32[16,6] collective-permute-done(cps)
)";

// On 2 replicas x 2 partitions: channels over flattened ids and over replicas, an all-gather
// whose group lists its devices out of order, and an all-reduce inside a While's body.
inline constexpr char kReplicasPartitionsAndALoop[] = R"(
cond {
  s = (s32[], f32[8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[8] get-tuple-element(s), index=1
  one = s32[] constant(1)
  next = s32[] add(i, one)
  r = f32[8] all-reduce(x), channel_id=1, replica_groups={{0,3},{1,2}}, use_global_device_ids=true, to_apply=max
  half = f32[] constant(0.5)
  h = f32[8] broadcast(half), dimensions={}
  y = f32[8] multiply(r, h)
  ROOT t = (s32[], f32[8]) tuple(next, y)
}
ENTRY e {
  p = f32[8] parameter(0)
  a = f32[8] all-reduce(p), channel_id=2, replica_groups={{0},{1}}, use_global_device_ids=false, to_apply=add
  g = f32[32] all-gather(a), channel_id=3, replica_groups={{1,0}}, dimensions={0}
  s = f32[8] slice(g), slice={[12:20]}
  zero = s32[] constant(0)
  init = (s32[], f32[8]) tuple(zero, s)
  w = (s32[], f32[8]) while(init), condition=cond, body=body
  ROOT x = f32[8] get-tuple-element(w), index=1
})";

// On 2 devices: replica 0 meets at all-reduce %ar inside a conditional's branch, replica 1 takes
// the other branch, so the meeting can never complete (device 1 never arrives).
inline constexpr char kOnlyReplicaZeroMeets[] = R"(
with {
  x = f32[4] parameter(0)
  ROOT ar = f32[4] all-reduce(x), replica_groups={}, to_apply=add
}
without {
  ROOT x = f32[4] parameter(0)
}
ENTRY e {
  p = f32[4] parameter(0)
  r = u32[] replica-id()
  zero = u32[] constant(0)
  first = pred[] compare(r, zero), direction=EQ
  ROOT c = f32[4] conditional(first, p, p), true_computation=with, false_computation=without
})";

// Device d's arguments: one array per entry parameter (f32, its shape), values in [-2, 2)
// from `seed`, distinct on every device.
inline std::vector<std::vector<Literal>> RandomDeviceArguments(const HloModule& module, int64_t devices,
                                                               uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> value(-2, 2);
  std::vector<std::vector<Literal>> arguments(devices);
  for (int64_t d = 0; d < devices; ++d) {
    for (const HloInstruction* parameter : module.entry_computation()->parameter_instructions()) {
      Literal literal(parameter->shape());
      for (float& v : literal.data<float>()) v = value(rng);
      arguments[d].push_back(std::move(literal));
    }
  }
  return arguments;
}

}  // namespace xlens::testing
