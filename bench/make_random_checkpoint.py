#!/usr/bin/python3
"""Writes a random-weight bf16 checkpoint with the exact shapes of a real model, for
benchmarks: `make_random_checkpoint.py OUT_DIR [--shape qwen3-0.6b|qwen3-8b|qwen3-moe-1b|qwen3-next-1b|qwen3-30b-a3b]`.
qwen3-30b-a3b is Qwen3-30B-A3B itself (61 GB: the GPU benchmark draws it with torch,
bench/cuda/make_checkpoint.py).
qwen3-moe-1b is Qwen3-30B-A3B's layer scaled to ~1B total parameters (64 experts, top-8);
qwen3-next-1b is Qwen3-Next-80B-A3B's hybrid layer (3 Gated DeltaNet : 1 gated attention, MoE
with a gated shared expert) scaled likewise.

Weights are N(0, 0.02) (norm weights 1), so the forward pass does the same work as the real
model; the text it produces is meaningless. Idempotent: an existing complete checkpoint is
kept. Needs only numpy.
"""
import argparse
import json
import os
import struct
import sys

import numpy as np

SHAPES = {
    "qwen3-0.6b": dict(vocab_size=151936, hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
                       num_attention_heads=16, num_key_value_heads=8, head_dim=128, tie_word_embeddings=True),
    "qwen3-8b": dict(vocab_size=151936, hidden_size=4096, intermediate_size=12288, num_hidden_layers=36,
                     num_attention_heads=32, num_key_value_heads=8, head_dim=128, tie_word_embeddings=False),
    "qwen3-moe-1b": dict(model_type="qwen3_moe", vocab_size=151936, hidden_size=1024, intermediate_size=3072,
                         num_hidden_layers=16, num_attention_heads=16, num_key_value_heads=4, head_dim=128,
                         tie_word_embeddings=True, num_experts=64, num_experts_per_tok=8, moe_intermediate_size=256,
                         norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[]),
    "qwen3-30b-a3b": dict(model_type="qwen3_moe", vocab_size=151936, hidden_size=2048, intermediate_size=6144,
                          num_hidden_layers=48, num_attention_heads=32, num_key_value_heads=4, head_dim=128,
                          tie_word_embeddings=False, num_experts=128, num_experts_per_tok=8,
                          moe_intermediate_size=768, norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[]),
    "qwen3-next-1b": dict(model_type="qwen3_next", vocab_size=151936, hidden_size=1024, intermediate_size=3072,
                          num_hidden_layers=16, num_attention_heads=8, num_key_value_heads=2, head_dim=256,
                          tie_word_embeddings=True, num_experts=64, num_experts_per_tok=8, moe_intermediate_size=256,
                          shared_expert_intermediate_size=256, norm_topk_prob=True, decoder_sparse_step=1,
                          mlp_only_layers=[], full_attention_interval=4, partial_rotary_factor=0.25,
                          linear_num_key_heads=8, linear_num_value_heads=16, linear_key_head_dim=128,
                          linear_value_head_dim=128, linear_conv_kernel_dim=4),
}
ARCHITECTURES = {"qwen3": "Qwen3ForCausalLM", "qwen3_moe": "Qwen3MoeForCausalLM", "qwen3_next": "Qwen3NextForCausalLM"}


def experts(p, c):
    h, e, i = c["hidden_size"], c["num_experts"], c["moe_intermediate_size"]
    yield p + "mlp.gate.weight", (e, h)
    for x in range(e):
        yield p + f"mlp.experts.{x}.gate_proj.weight", (i, h)
        yield p + f"mlp.experts.{x}.up_proj.weight", (i, h)
        yield p + f"mlp.experts.{x}.down_proj.weight", (h, i)
    if c.get("shared_expert_intermediate_size"):
        s = c["shared_expert_intermediate_size"]
        yield p + "mlp.shared_expert.gate_proj.weight", (s, h)
        yield p + "mlp.shared_expert.up_proj.weight", (s, h)
        yield p + "mlp.shared_expert.down_proj.weight", (h, s)
        yield p + "mlp.shared_expert_gate.weight", (1, h)


def gated_delta_net(p, c):
    h, nk, nv = c["hidden_size"], c["linear_num_key_heads"], c["linear_num_value_heads"]
    dk, dv, k = c["linear_key_head_dim"], c["linear_value_head_dim"], c["linear_conv_kernel_dim"]
    yield p + "linear_attn.in_proj_qkvz.weight", (2 * nk * dk + 2 * nv * dv, h)
    yield p + "linear_attn.in_proj_ba.weight", (2 * nv, h)
    yield p + "linear_attn.conv1d.weight", (2 * nk * dk + nv * dv, 1, k)
    yield p + "linear_attn.A_log", (nv,)
    yield p + "linear_attn.dt_bias", (nv,)
    yield p + "linear_attn.norm.weight", (dv,)
    yield p + "linear_attn.out_proj.weight", (h, nv * dv)


def tensors(c):
    h, i, d = c["hidden_size"], c["intermediate_size"], c["head_dim"]
    q, kv = c["num_attention_heads"] * d, c["num_key_value_heads"] * d
    kind = c.get("model_type", "qwen3")
    yield "model.embed_tokens.weight", (c["vocab_size"], h)
    for l in range(c["num_hidden_layers"]):
        p = f"model.layers.{l}."
        yield p + "input_layernorm.weight", (h,)
        yield p + "post_attention_layernorm.weight", (h,)
        if kind == "qwen3_next" and (l + 1) % c["full_attention_interval"]:
            yield from gated_delta_net(p, c)
        else:
            gate = 2 if kind == "qwen3_next" else 1  # Qwen3-Next: query and output gate per head
            yield p + "self_attn.q_proj.weight", (gate * q, h)
            yield p + "self_attn.k_proj.weight", (kv, h)
            yield p + "self_attn.v_proj.weight", (kv, h)
            yield p + "self_attn.o_proj.weight", (h, q)
            yield p + "self_attn.q_norm.weight", (d,)
            yield p + "self_attn.k_norm.weight", (d,)
        if kind in ("qwen3_moe", "qwen3_next"):
            yield from experts(p, c)
        else:
            yield p + "mlp.gate_proj.weight", (i, h)
            yield p + "mlp.up_proj.weight", (i, h)
            yield p + "mlp.down_proj.weight", (h, i)
    yield "model.norm.weight", (h,)
    if not c["tie_word_embeddings"]:
        yield "lm_head.weight", (c["vocab_size"], h)


def bf16(shape, rng):
    if len(shape) == 1:
        return np.full(shape, 0x3F80, dtype=np.uint16)  # 1.0
    x = rng.standard_normal(shape, dtype=np.float32) * np.float32(0.02)
    return (x.view(np.uint32) >> 16).astype(np.uint16)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--shape", default="qwen3-0.6b", choices=sorted(SHAPES))
    args = ap.parse_args()
    c = SHAPES[args.shape]
    os.makedirs(args.out, exist_ok=True)
    weights = os.path.join(args.out, "model.safetensors")
    done = os.path.join(args.out, ".complete")
    if os.path.exists(done):
        print(f"{args.out}: already complete")
        return
    specs = list(tensors(c))
    header, offset = {}, 0
    for name, shape in specs:
        n = int(np.prod(shape)) * 2
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    rng = np.random.default_rng(0)
    with open(weights, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for name, shape in specs:
            f.write(bf16(shape, rng).tobytes())
    c = dict(c)
    kind = c.pop("model_type", "qwen3")
    config = dict(architectures=[ARCHITECTURES[kind]], model_type=kind, rms_norm_eps=1e-6,
                  max_position_embeddings=40960, rope_theta=1000000.0, torch_dtype="bfloat16",
                  hidden_act="silu", attention_bias=False, bos_token_id=151643, eos_token_id=151645, **c)
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    open(done, "w").close()
    print(f"{args.out}: {offset / 1e9:.2f} GB of bf16 weights ({args.shape})")


if __name__ == "__main__":
    sys.exit(main())
