"""numpy values to and from the extension's (dtype number, shape, bytes) triples.

The extension sees every value as its elements' bytes with TensorFlow's DataType number, so every
dtype TensorFlow feeds crosses the same way (bfloat16 through ml_dtypes, which TensorFlow brings);
strings cross as lists of bytes. Outputs view the tensor's own storage (no copy).
"""

import numpy as np

from ._xlens import Error

DT_STRING = 7
DT_BFLOAT16 = 14

# TensorFlow's DataType numbers (types.proto) of the numpy dtypes.
_CODES = {
    np.dtype(np.float32): 1,
    np.dtype(np.float64): 2,
    np.dtype(np.int32): 3,
    np.dtype(np.uint8): 4,
    np.dtype(np.int16): 5,
    np.dtype(np.int8): 6,
    np.dtype(np.complex64): 8,
    np.dtype(np.int64): 9,
    np.dtype(np.bool_): 10,
    np.dtype(np.uint16): 17,
    np.dtype(np.complex128): 18,
    np.dtype(np.float16): 19,
    np.dtype(np.uint32): 22,
    np.dtype(np.uint64): 23,
}
_DTYPES = {code: dtype for dtype, code in _CODES.items()}


def _bfloat16():
    import ml_dtypes  # TensorFlow's and JAX's numpy bfloat16

    return np.dtype(ml_dtypes.bfloat16)


def numpy_dtype(code):
    """The numpy dtype of DataType `code` (object for strings); None when numpy has none."""
    if code == DT_STRING:
        return np.dtype(object)
    if code == DT_BFLOAT16:
        try:
            return _bfloat16()
        except ImportError:
            return None
    return _DTYPES.get(code)


def dtype_code(dtype):
    """The DataType number of a numpy dtype, or None."""
    dtype = np.dtype(dtype)
    if dtype.kind in "OSU":
        return DT_STRING
    if dtype.name == "bfloat16":
        return DT_BFLOAT16
    return _CODES.get(dtype)


def _as_bytes(element):
    if isinstance(element, bytes):
        return element
    if isinstance(element, str):
        return element.encode("utf-8")
    if isinstance(element, (bytearray, memoryview, np.bytes_)):
        return bytes(element)
    raise Error(f"a string tensor's element is {type(element).__name__}, not bytes or str")


def convert(value, want, what):
    """`value` as the extension takes it, converted to DataType `want` (None: unknown) as
    TensorFlow converts a fed value: Python scalars and lists are made arrays of the wanted type;
    a numpy array is cast when numpy's same-kind rule allows (float64 to float32, int64 to int32),
    else left as it is for the run to refuse with the command line's message."""
    if want == DT_STRING:
        array = np.asarray(value, dtype=object)
        return (DT_STRING, tuple(int(d) for d in array.shape),
                [_as_bytes(e) for e in array.reshape(-1)])
    target = numpy_dtype(want) if want is not None else None
    if isinstance(value, np.ndarray):
        array = value
        if array.dtype.kind == "O" and target is not None and target.kind != "O":
            try:  # numbers in an object array, as np.asarray(value, dtype) takes them
                array = array.astype(target)
            except (TypeError, ValueError, OverflowError):
                raise Error(f"{what}: an object array whose elements are not {target} "
                            f"values") from None
        if (target is not None and array.dtype != target and array.dtype.kind not in "OSUV"
                and np.can_cast(array.dtype, target, casting="same_kind")):
            array = array.astype(target)
    else:
        try:
            array = np.asarray(value)
            if target is not None and array.dtype != target and array.dtype.kind not in "OSUV":
                array = np.asarray(value, dtype=target)
        except (TypeError, ValueError, OverflowError) as e:
            raise Error(f"{what}: cannot be made an array: {e}") from None
    if not array.dtype.isnative:
        array = array.astype(array.dtype.newbyteorder("="))
    shape = tuple(int(d) for d in array.shape)
    code = dtype_code(array.dtype)
    if code == DT_STRING:
        return (DT_STRING, shape, [_as_bytes(e) for e in array.reshape(-1)])
    if code is None:
        raise Error(f"{what}: numpy dtype {array.dtype} has no TensorFlow type")
    # One copy at most (of a non-contiguous array); the extension copies into the tensor.
    flat = np.ascontiguousarray(array).reshape(-1)
    return (code, shape, flat.view(np.uint8))


def to_numpy(triple, scalar_as_numpy_scalar=True):
    """A result triple as numpy: an array viewing the tensor's storage; a 0-d value as a numpy
    scalar (bytes for a string), as TensorFlow's Session.run returns them."""
    if triple is None:
        return None
    code, shape, data = triple
    if code == DT_STRING:
        if shape == () and scalar_as_numpy_scalar:
            return data[0]
        array = np.empty(len(data), dtype=object)
        array[:] = data
        return array.reshape(shape)
    dtype = numpy_dtype(code)
    if dtype is None:
        raise Error(f"DataType {code} has no numpy dtype (install ml_dtypes for bfloat16)")
    array = data.view(dtype).reshape(shape)
    if shape == () and scalar_as_numpy_scalar:
        return array[()]
    return array
