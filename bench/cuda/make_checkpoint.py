#!/usr/bin/env python3
"""Writes the random-weight Qwen3-8B-shaped bf16 checkpoint of issue 6 on the GPU machine:
`make_checkpoint.py OUT_DIR [--shape qwen3-8b]`. Same tensors, config and N(0, 0.02) weights
(norm weights 1) as bench/make_random_checkpoint.py, but drawn with torch on the GPU
(numpy needs minutes for 16 GB). Idempotent: a complete checkpoint is kept.
"""
import argparse
import json
import os
import struct
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from make_random_checkpoint import SHAPES, tensors  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--shape", default="qwen3-8b", choices=sorted(SHAPES))
    args = ap.parse_args()
    c = SHAPES[args.shape]
    os.makedirs(args.out, exist_ok=True)
    done = os.path.join(args.out, ".complete")
    if os.path.exists(done):
        print(f"{args.out}: already complete")
        return
    specs = list(tensors(c))
    header, offset = {}, 0
    for name, shape in specs:
        n = 2
        for s in shape:
            n *= s
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    gen = torch.Generator(device="cuda").manual_seed(0)
    with open(os.path.join(args.out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for name, shape in specs:
            if len(shape) == 1:
                t = torch.ones(shape, dtype=torch.bfloat16)
            else:
                t = (torch.randn(shape, generator=gen, device="cuda", dtype=torch.float32) * 0.02).to(torch.bfloat16)
            f.write(t.cpu().view(torch.int16).numpy().tobytes())
    config = dict(architectures=["Qwen3ForCausalLM"], model_type="qwen3", rms_norm_eps=1e-6,
                  max_position_embeddings=40960, rope_theta=1000000.0, torch_dtype="bfloat16",
                  hidden_act="silu", attention_bias=False, bos_token_id=151643, eos_token_id=151645, **c)
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    open(done, "w").close()
    print(f"{args.out}: {offset / 1e9:.2f} GB of bf16 weights ({args.shape})")


if __name__ == "__main__":
    sys.exit(main())
