#!/usr/bin/env python3
"""Writes tests/core/data/interop.safetensors with the reference `safetensors` library.

The file is committed, so CI never runs this script. tests/core/test_safetensors.c reads the
file and checks every value below (the C test spells out the same bit patterns).

    python3 -m venv /tmp/st && /tmp/st/bin/pip install safetensors numpy
    /tmp/st/bin/python tests/core/data/make_safetensors_fixture.py

With --check FILE it instead opens a file written by our writer with the reference library
and prints every tensor, which shows our output is readable by other tools.
"""
import ctypes
import os
import sys

import numpy as np
from safetensors import TensorSpec, safe_open, serialize


def write_fixture(path):
    tensors = {
        "weight": np.array([[0.5, -1.25, 3.0], [1e-3, -0.0, 65504.0]], dtype=np.float32),
        # f16 bit patterns: 1.0, -2.5, 65504 (largest finite), 2^-24 (smallest subnormal)
        "half": np.array([0x3C00, 0xC100, 0x7BFF, 0x0001], dtype=np.uint16).view(np.float16),
        "ids": np.array([-1, 0, 2147483647], dtype=np.int32),
        # five bytes: whatever follows is not 8-aligned unless the writer orders by size
        "bytes": np.array([0, 1, 127, 128, 255], dtype=np.uint8),
        "scalar": np.array(42.0, dtype=np.float32),
        "empty": np.zeros((0, 3), dtype=np.float32),
    }
    metadata = {"format": "pt", "note": "ocrtrain interop fixture"}
    # numpy has no bfloat16, so that tensor goes through the raw serialize() API.
    bf16_bits = (ctypes.c_uint16 * 4)(0x3F80, 0xC040, 0x7F80, 0x0001)  # 1.0, -3.0, +inf, smallest subnormal
    specs = {}
    for name, arr in tensors.items():
        assert arr.flags["C_CONTIGUOUS"]  # (np.ascontiguousarray would turn the 0-d scalar into 1-d)
        specs[name] = TensorSpec(dtype=arr.dtype.name, shape=list(arr.shape),
                                 data_ptr=arr.ctypes.data, data_len=arr.nbytes)
    specs["bf16"] = TensorSpec(dtype="bfloat16", shape=[2, 2], data_ptr=ctypes.addressof(bf16_bits), data_len=8)
    blob = bytes(serialize(specs, metadata=metadata))
    with open(path, "wb") as f:
        f.write(blob)
    print(f"wrote {path} ({len(blob)} bytes)")


def check(path):
    with safe_open(path, framework="numpy") as f:
        print("metadata:", f.metadata())
        for name in f.keys():
            sl = f.get_slice(name)
            print(name, sl.get_dtype(), sl.get_shape())


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--check":
        check(sys.argv[2])
    else:
        write_fixture(os.path.join(os.path.dirname(os.path.abspath(__file__)), "interop.safetensors"))
