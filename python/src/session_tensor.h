// graph::Tensor <-> numpy for the session bindings. The extension sees every numeric value as its
// bytes (a 1-D uint8 array) with a DataType number and a shape; the Python side views them with
// the numpy dtype (session.py), so every dtype TensorFlow feeds crosses the same way, bfloat16
// and the complex types included, and strings as lists of bytes.
#pragma once

#include <nanobind/nanobind.h>

#include <string>

#include "compiler/graph/tensor.h"

namespace xlens::python {

// A fed value: (dtype number, shape, data), data a 1-D C-contiguous uint8 array of the elements'
// bytes or, for DT_STRING, a sequence of bytes. Copied into the tensor: a Literal owns its
// storage. `what` names the value in messages ("feed_dict 'x:0'").
graph::Tensor TensorFromPython(const std::string& what, nanobind::handle dtype,
                               nanobind::handle shape, nanobind::handle data);

// (dtype number, shape tuple, data): data a uint8 array over the tensor's own elements (no
// copy: the array keeps the tensor alive; a tensor another holder shares, such as a variable's
// value, is copied first so that writes to the array never reach the session), or a list of
// bytes for strings. An uninitialised tensor is None. Resource and variant tensors have no numpy
// value: an error naming `what`.
nanobind::object TensorToPython(const std::string& what, graph::Tensor tensor);

}  // namespace xlens::python
