// Modules for the tests of collectives over several devices (the evaluator's and the CPU
// runtime's): an entry computation written in a test, with the reducers its collectives name.
#pragma once

#include <memory>
#include <string>

#include <gtest/gtest.h>

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

}  // namespace xlens::testing
