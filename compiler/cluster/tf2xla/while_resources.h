// What a functional While carries for the TensorArrays and stacks a function makes
// (tensor_array_ops.cc, stack_ops.cc), as tf2xla's while_op.cc does. Two things are only known
// from a first compilation of the body:
//   - the value of one that enters uninitialized (a v1 loop gradient's stack, made outside the
//     forward loop and first pushed inside it): the loop starts it as zeros of the shape the
//     body gives it (an empty buffer, push index 0);
//   - the gradient arrays the body takes of a TensorArray it is passed (a v1 backward loop calls
//     TensorArrayGradV3 in every iteration): they are made before the loop, zeros, and carried
//     as extra elements of its state after the loop variables, so the writes of every iteration
//     add up and the graph after the loop finds them by their source.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "compiler/cluster/tf2xla/xla_op_registry.h"

namespace xlens::cluster {

// Whether `e` is a TensorArray or a stack the function made.
bool IsMadeResource(const XlaExpression& e);

// Zeros of `shape` (a tuple: zeros of each element), the start of an uninitialized resource.
StatusOr<HloInstruction*> ZerosOfShape(HloBuilder& builder, const Shape& shape);

// Prepares the body's copy of a loop variable for the first compilation: uninitialized when the
// variable is, free to make gradient arrays, and holding none of the outer ones (whose values
// belong to the outer computation).
void PrepareFirstPassCopy(const XlaResource& outer, XlaResource& copy);

// One gradient array a loop carries: of loop variable `input`, by `source`.
struct CarriedGradient {
  size_t input = 0;
  std::string source;
  std::shared_ptr<XlaResource> outer;
};

// Makes, before the loop, the gradient arrays of each TensorArray loop variable that the first
// compilation saw the body take (`sources[i]`) and that do not exist yet; returns every gradient
// array of those variables, to be carried.
StatusOr<std::vector<CarriedGradient>> GradientsToCarry(
    HloBuilder& builder, const std::vector<XlaExpression>& inputs,
    const std::vector<std::set<std::string>>& sources);

// Gives the body's copies of the loop variables the carried gradients, their values elements
// `first_element`... of the state `param`.
Status BindCarriedGradients(HloBuilder& body, HloInstruction* param, size_t first_element,
                            const std::vector<CarriedGradient>& carried,
                            std::vector<std::unique_ptr<XlaResource>>& copies);

}  // namespace xlens::cluster
