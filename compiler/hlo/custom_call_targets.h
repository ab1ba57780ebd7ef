// What xlens knows of the custom-call targets it does not run: the library or hardware each one
// needs, so that a refusal says why, and whether XLA's own CPU backend could run it either.
// (The targets xlens does run are elsewhere: annotations in annotation_custom_calls.h, oneDNN's
// in the CPU passes.)
#pragma once

#include <string>
#include <string_view>

namespace xlens {

// Why a custom call to `target` cannot run on a CPU, for the end of a refusal ("custom-call
// \"__cublas$gemm\" ..."): e.g. "is a cuBLAS matrix product, which XLA's GPU compiler wrote
// for a GPU; XLA:CPU cannot run it either". Empty for a target xlens knows nothing about.
std::string WhyCustomCallCannotRunOnCpu(std::string_view target);

}  // namespace xlens
