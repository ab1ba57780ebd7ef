// What several `xlens` subcommands share: loading a module and its inputs, printing results.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "compiler/hlo/literal.h"
#include "compiler/hlo/module.h"
#include "compiler/support/status.h"

namespace xlens::cli {

// Prints "xlens: MESSAGE" to stderr and returns 1, the exit code of a user error.
int Fail(const Status& status);
StatusOr<std::unique_ptr<HloModule>> LoadModule(const std::string& path, bool verify);
// Every leaf of a (possibly tuple) literal, in order.
void CollectLeaves(const Literal& literal, std::vector<const Literal*>& leaves);
// A literal for a terminal: whole when small, the first and last elements otherwise.
std::string Summarize(const Literal& literal);
// DIR/arg0.npy, arg1.npy, ... in parameter order, or random values (seeded) when `dir` is empty
// or "random".
StatusOr<std::vector<Literal>> LoadInputs(const HloComputation& entry, const std::string& dir,
                                          uint64_t seed);
// Writes DIR/out0.npy, out1.npy, ... (creating DIR), printing each file.
Status WriteOutputs(const std::string& dir, const std::vector<const Literal*>& leaves);

}  // namespace xlens::cli
