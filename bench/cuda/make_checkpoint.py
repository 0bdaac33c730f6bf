#!/usr/bin/env python3
"""Writes a random-weight bf16 checkpoint of bench/make_random_checkpoint.py's shapes on the
GPU machine: `make_checkpoint.py OUT_DIR [--shape qwen3-8b|qwen3-30b-a3b|...] [--max-gb G]`.
Same tensors, config and N(0, 0.02) weights (norm weights 1), but drawn with torch on the GPU
(numpy needs minutes for 16 GB). --max-gb keeps the checkpoint under G GB by dropping whole
layers (the config then says how many: per-token figures scale with the layer count, and the
benchmark's roofline is computed from the checkpoint it ran). Idempotent: a complete
checkpoint is kept.
"""
import argparse
import json
import os
import struct
import sys


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from make_random_checkpoint import ARCHITECTURES, SHAPES, tensors  # noqa: E402


def numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--shape", default="qwen3-8b", choices=sorted(SHAPES))
    ap.add_argument("--max-gb", type=float, default=0.0)
    ap.add_argument("--config-only", action="store_true",
                    help="write config.json alone (what cuda_bench --attention-only and --sampling-only read)")
    args = ap.parse_args()
    c = dict(SHAPES[args.shape])
    os.makedirs(args.out, exist_ok=True)
    done = os.path.join(args.out, ".complete")
    if os.path.exists(done):
        print(f"{args.out}: already complete")
        return
    if args.config_only:
        write_config(args.out, c)
        return
    import torch  # here: --config-only runs where torch is not installed
    full_layers = c["num_hidden_layers"]
    while args.max_gb and c["num_hidden_layers"] > 1 and 2 * sum(numel(s) for _, s in tensors(c)) > args.max_gb * 1e9:
        c["num_hidden_layers"] -= 1
    specs = list(tensors(c))
    header, offset = {}, 0
    for name, shape in specs:
        n = 2 * numel(shape)
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    gen = torch.Generator(device="cuda").manual_seed(0)
    with open(os.path.join(args.out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        pending = 0  # elements of consecutive matrices, drawn in one call (MoE: 18k small experts)

        def flush():
            nonlocal pending
            if pending:
                t = (torch.randn(pending, generator=gen, device="cuda", dtype=torch.float32) * 0.02).to(torch.bfloat16)
                t.cpu().view(torch.int16).numpy().tofile(f)
                pending = 0

        for name, shape in specs:
            if len(shape) == 1:
                flush()
                torch.ones(shape, dtype=torch.bfloat16).view(torch.int16).numpy().tofile(f)
            else:
                pending += numel(shape)
                if pending >= 1 << 28:
                    flush()
        flush()
    write_config(args.out, c)
    open(done, "w").close()
    print(f"{args.out}: {offset / 1e9:.2f} GB of bf16 weights ({args.shape}, "
          f"{c['num_hidden_layers']} of {full_layers} layers)")



def write_config(out, c):
    c = dict(c)
    kind = c.pop("model_type", "qwen3")
    config = dict(architectures=[ARCHITECTURES[kind]], model_type=kind, rms_norm_eps=1e-6,
                  max_position_embeddings=40960, rope_theta=1000000.0, torch_dtype="bfloat16",
                  hidden_act="silu", attention_bias=False, bos_token_id=151643, eos_token_id=151645, **c)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)


if __name__ == "__main__":
    sys.exit(main())
