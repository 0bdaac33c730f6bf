#!/usr/bin/python3
"""Writes tests/fixtures/gguf/quant_blocks.gguf: one small tensor per ggml type tachyon repacks
(and one per refused type), with random block bytes, and quant_blocks.expected.safetensors: the
values llama.cpp's own gguf-py dequantizer (gguf/quants.py, numpy) gives for those bytes.
An oracle independent of tachyon's repacking for the types no llama.cpp fixture holds.

Usage: PYTHONPATH=LLAMA_CPP/gguf-py /usr/bin/python3 tools/make_gguf_quant_blocks.py OUT_DIR
"""
import json
import struct
import sys

import numpy as np
from gguf import GGMLQuantizationType as Q, GGUFWriter
from gguf.constants import GGML_QUANT_SIZES
from gguf.quants import dequantize

out = sys.argv[1]
rng = np.random.default_rng(45)
ROWS, COLS = 3, 512


def random_blocks(qtype):
    block_elems, block_bytes = GGML_QUANT_SIZES[qtype]
    n_blocks = ROWS * COLS // block_elems
    raw = rng.integers(0, 256, size=(n_blocks, block_bytes), dtype=np.uint8)
    # Finite f16 scales: the positions of d (and m / dmin) in each block (ggml-common.h).
    def f16(offset, lo, hi):
        vals = rng.uniform(lo, hi, size=n_blocks).astype(np.float16)
        raw[:, offset:offset + 2] = vals.view(np.uint8).reshape(n_blocks, 2)
    if qtype in (Q.Q4_0, Q.Q5_0, Q.Q8_0):
        f16(0, -0.05, 0.05)
    elif qtype in (Q.Q4_1, Q.Q5_1, Q.Q4_K, Q.Q5_K):
        f16(0, -0.05, 0.05)
        f16(2, -0.05, 0.05)
    elif qtype == Q.Q6_K:
        f16(208, -0.01, 0.01)
    elif qtype in (Q.Q2_K, Q.IQ4_NL):
        f16(0, -0.05, 0.05)
    return raw.reshape(ROWS, -1)


supported = [Q.Q8_0, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q4_K, Q.Q5_K, Q.Q6_K]
w = GGUFWriter(f"{out}/quant_blocks.gguf", "blocks")
expected = {}
for qtype in supported:
    raw = random_blocks(qtype)
    w.add_tensor(qtype.name, raw, raw_shape=raw.shape, raw_dtype=qtype)
    expected[qtype.name] = dequantize(raw, qtype).astype(np.float32).reshape(ROWS, COLS)
for qtype in (Q.Q2_K, Q.IQ4_NL):  # refused by name
    raw = random_blocks(qtype)
    w.add_tensor(qtype.name, raw, raw_shape=raw.shape, raw_dtype=qtype)
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()

header, blobs, offset = {}, [], 0
for name, arr in expected.items():
    b = arr.tobytes()
    header[name] = {"dtype": "F32", "shape": list(arr.shape), "data_offsets": [offset, offset + len(b)]}
    blobs.append(b)
    offset += len(b)
text = json.dumps(header).encode()
text += b" " * (-len(text) % 8)
with open(f"{out}/quant_blocks.expected.safetensors", "wb") as f:
    f.write(struct.pack("<Q", len(text)))
    f.write(text)
    for b in blobs:
        f.write(b)
