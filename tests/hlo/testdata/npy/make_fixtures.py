"""Regenerates the .npy fixtures of tests/hlo/npy_test.cc with NumPy (and ml_dtypes).

Every valid fixture holds numpy.arange(n) of its dtype, shaped as its name says, so the test
can check the values without Python. Run from this directory: python3 make_fixtures.py
"""
import numpy as np
import numpy.lib.format as fmt


def arange(dtype, shape):
    n = int(np.prod(shape)) if shape else 1
    return np.arange(n).astype(dtype).reshape(shape)


VALID = {
    "pred_5.npy": np.array([True, False, True, True, False]),
    "s8_2x3.npy": arange(np.int8, (2, 3)) - 3,
    "s16_4.npy": arange(np.int16, (4,)) - 2,
    "s32_2x2x2.npy": arange(np.int32, (2, 2, 2)),
    "s64_scalar.npy": np.array(-(2**62), dtype=np.int64),
    "u8_6.npy": arange(np.uint8, (6,)) * 50,
    "u16_3.npy": arange(np.uint16, (3,)) + 65533,
    "u32_2.npy": np.array([0, 2**32 - 1], dtype=np.uint32),
    "u64_2.npy": np.array([0, 2**64 - 1], dtype=np.uint64),
    "f16_2x3.npy": arange(np.float16, (2, 3)) / 4,
    "f32_2x3.npy": arange(np.float32, (2, 3)) / 2,
    "f64_scalar.npy": np.array(3.25, dtype=np.float64),
    "c64_3.npy": (arange(np.float32, (3,)) * (1 - 1j)).astype(np.complex64),
    "c128_2.npy": np.array([1.5 - 2j, -0.25 + 8j], dtype=np.complex128),
    "f32_0x3.npy": np.zeros((0, 3), dtype=np.float32),
}

for name, array in VALID.items():
    np.save(name, array)

with open("f32_2x3_v2.npy", "wb") as f:
    fmt.write_array(f, arange(np.float32, (2, 3)) / 2, version=(2, 0))
with open("f32_2x3_v3.npy", "wb") as f:
    fmt.write_array(f, arange(np.float32, (2, 3)) / 2, version=(3, 0))

# Valid files xlens must refuse.
np.save("fortran_f32_2x3.npy", np.asfortranarray(arange(np.float32, (2, 3))))
np.save("bigendian_f32_3.npy", arange(">f4", (3,)))
np.save("object_2.npy", np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
np.save("structured_2.npy", np.zeros(2, dtype=[("x", "<f4"), ("y", "<i4")]))
try:
    import ml_dtypes

    np.save("bf16_3.npy", arange(ml_dtypes.bfloat16, (3,)))
except ImportError:
    pass
