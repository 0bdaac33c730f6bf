#!/usr/bin/env python3
"""Quantized-checkpoint fixtures: tiny checkpoints in each published quantized layout.

From the tiny Hugging Face fixtures (tests/fixtures/hf/<arch>: bf16 weights, config.json), this
writes one directory per case under OUT (tests/fixtures/quant/<case>):

  config.json               the model's config with the layout's quantization block, as the
                            quantizing tool writes it (mlx-lm, AutoAWQ, GPTQModel, llm-compressor,
                            the FP8 / gpt-oss releases)
  model.safetensors         the checkpoint in that layout: quantized modules as their packed
                            tensors, every other tensor as in the source (bf16)
  dequantized.config.json   the float model the checkpoint means (no quantization block)
  dequantized.safetensors   the exact dequantization (float32, or bf16 where exact) of every quantized tensor, under
                            the float checkpoint's names and layout; together with the float
                            tensors of model.safetensors it is the whole float model
  golden.safetensors        (--goldens only) transformers' float32 logits and greedy tokens on
                            the dequantized model, in the format of tests/fixtures/hf (README.md)

The quantized tests (tests/unit/model/quant_*) load model.safetensors through our loaders and
compare with golden.safetensors when present, else with our own float32 run of the dequantized
model (which matches transformers on the HF fixtures).

Usage:
  python3 tools/make_quant_fixtures.py tests/fixtures/hf tests/fixtures/quant          # numpy only
  python3 tools/make_quant_fixtures.py tests/fixtures/hf tests/fixtures/quant --goldens  # + torch,
      transformers (the GPU machine; computes on CPU)

Quantization uses numpy with a fixed seed: a rerun writes the same bytes.
"""
import argparse
import copy
import json
import os
import shutil
import struct
import sys
import tempfile

import numpy as np

# ----------------------------------------------------------------------------- safetensors io

_NP = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16, "I32": np.int32, "I64": np.int64, "U8": np.uint8,
       "U32": np.uint32, "F8_E4M3": np.uint8}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        a, b = e["data_offsets"]
        arr = np.frombuffer(data[base + a:base + b], dtype=_NP[e["dtype"]]).reshape(e["shape"])
        out[name] = (e["dtype"], arr.copy())
    return out


def write_safetensors(path, tensors):
    """tensors: {name: (dtype string, numpy array)}; names sorted, as safetensors writers do."""
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        dtype, arr = tensors[name]
        raw = np.ascontiguousarray(arr).astype(_NP[dtype], copy=False).tobytes()
        header[name] = {"dtype": dtype, "shape": list(arr.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def bf16_to_f32(u16):
    return (u16.astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16(x):
    b = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)


def as_f32(entry):
    dtype, arr = entry
    if dtype == "BF16":
        return bf16_to_f32(arr)
    return arr.astype(np.float32)


def round_scale(s, dtype):
    """Scales as stored in `dtype` ('F16', 'BF16', 'F32'): (stored array, their float32 values)."""
    s = s.astype(np.float32)
    if dtype == "F16":
        h = s.astype(np.float16)
        return h, h.astype(np.float32)
    if dtype == "BF16":
        h = f32_to_bf16(s)
        return h, bf16_to_f32(h)
    return s, s


def pack_along_last(codes, bits):
    """uint32 words of 32/bits codes each along the last axis, the first code in the low bits."""
    per = 32 // bits
    c = codes.astype(np.uint32).reshape(codes.shape[:-1] + (codes.shape[-1] // per, per))
    shifts = (np.arange(per, dtype=np.uint32) * bits)
    return np.bitwise_or.reduce(c << shifts, axis=-1).astype(np.uint32)


# ----------------------------------------------------------------------------- quantizers

def affine_groups(w, bits, group, scale_dtype):
    """min/max asymmetric quantization per row and group of columns: codes [R, C] (unsigned),
    scale [R, C/g] and zero [R, C/g] (integer zero points), scales rounded to scale_dtype."""
    R, C = w.shape
    g = w.reshape(R, C // group, group)
    lo, hi = g.min(-1), g.max(-1)
    qmax = (1 << bits) - 1
    s = np.maximum(hi - lo, 1e-6) / qmax
    s_stored, s32 = round_scale(s, scale_dtype)
    z = np.clip(np.round(-lo / s32), 0, qmax).astype(np.int64)
    q = np.clip(np.round(g / s32[..., None]) + z[..., None], 0, qmax).astype(np.int64).reshape(R, C)
    return q, s_stored, s32, z


def symmetric_groups(w, bits, group, scale_dtype):
    """absmax symmetric quantization: signed codes [R, C] in [-2^(b-1), 2^(b-1)-1], scales."""
    R, C = w.shape
    g = w.reshape(R, C // group, group)
    half = 1 << (bits - 1)
    s = np.maximum(np.abs(g).max(-1), 1e-6) / (half - 1)
    s_stored, s32 = round_scale(s, scale_dtype)
    q = np.clip(np.round(g / s32[..., None]), -half, half - 1).astype(np.int64).reshape(R, C)
    return q, s_stored, s32


def expand(per_group, group):
    return np.repeat(per_group, group, axis=-1)


def dequant_affine(q, s32, z, group):
    """(q − z)·s in float32: exact (small integers times scales of at most 11 significant bits)."""
    return ((q - expand(z, group)).astype(np.float32) * expand(s32, group)).astype(np.float32)


E4M3_VALUES = None


def e4m3_table():
    global E4M3_VALUES
    if E4M3_VALUES is None:
        v = np.zeros(256, np.float32)
        for b in range(256):
            s, e, m = b >> 7, (b >> 3) & 15, b & 7
            mag = (m / 8.0) * 2.0 ** -6 if e == 0 else (1 + m / 8.0) * 2.0 ** (e - 7)
            v[b] = -mag if s else mag
        v[0x7F] = v[0xFF] = np.nan
        E4M3_VALUES = v
    return E4M3_VALUES


def to_e4m3(x):
    """Nearest e4m3fn code of each value (|x| <= 448)."""
    t = e4m3_table()
    pos = np.array([b for b in range(0x7F)], np.int64)  # 0x00..0x7e: the finite non-negative codes
    vals = t[pos]
    a = np.abs(x).ravel()
    idx = np.clip(np.searchsorted(vals, a), 1, len(vals) - 1)
    pick = np.where(np.abs(vals[idx - 1] - a) <= np.abs(vals[idx] - a), idx - 1, idx)
    codes = pos[pick].astype(np.uint8)
    codes = np.where((x.ravel() < 0) & (codes != 0), codes | 0x80, codes).astype(np.uint8)
    return codes.reshape(x.shape)


E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], np.float32)


# ----------------------------------------------------------------------------- layouts

def linear_names(tensors, arch):
    """The 2-D linear weights a layout quantizes (not embeddings, norms, routers, lm_head)."""
    out = []
    for name, (dtype, arr) in tensors.items():
        if arr.ndim != 2 or not name.endswith("_proj.weight"):
            continue
        out.append(name)
    return sorted(out)


def mlx_case(src, cfg, rng):
    """mlx-lm: default 4-bit g64; layer 1 attention 8-bit g32; layer 1 down_proj left in bf16;
    embeddings (tied: also the LM head) quantized 4-bit g64. Scales and biases bf16."""
    q = {"group_size": 64, "bits": 4, "mode": "affine"}
    per_module = {}
    out, deq = {}, {}
    targets = linear_names(src, "qwen3") + ["model.embed_tokens.weight"]
    for name, entry in src.items():
        if name not in targets:
            out[name] = entry
            continue
        module = name[:-len(".weight")]
        bits, group = 4, 64
        if ".layers.1.self_attn." in name:
            bits, group = 8, 32
            per_module[module] = {"group_size": 32, "bits": 8}
        if ".layers.1.mlp.down_proj" in name:
            per_module[module] = False
            out[name] = entry
            continue
        w = as_f32(entry)
        codes, s_stored, s32, z = affine_groups(w, bits, group, "BF16")
        # MLX stores w = q·scale + bias: bias = −z·scale (rounded to bf16; the dequantization
        # below uses the stored bias, so it is exact whatever the rounding).
        bias_stored, b32 = round_scale(-z.astype(np.float32) * s32, "BF16")
        out[name] = ("U32", pack_along_last(codes, bits))
        out[module + ".scales"] = ("BF16", s_stored)
        out[module + ".biases"] = ("BF16", bias_stored)
        deq[name] = (codes.astype(np.float32) * expand(s32, group) + expand(b32, group)).astype(np.float32)
    q.update(per_module)
    c = copy.deepcopy(cfg)
    c["quantization"] = q
    c["quantization_config"] = q
    return c, out, deq


def fp8_case(src, cfg, rng, block=32):
    """Block FP8 e4m3 with f32 weight_scale_inv (DeepSeek-V3 / Qwen3-FP8 layout). The fixtures'
    dimensions (64..192) need a block of 32 to tile fused q/k/v rows; real checkpoints use 128."""
    out, deq = {}, {}
    for name, entry in src.items():
        if name not in linear_names(src, ""):
            out[name] = entry
            continue
        w = as_f32(entry)
        R, C = w.shape
        br, bc = -(-R // block), -(-C // block)
        scale = np.zeros((br, bc), np.float32)
        codes = np.zeros((R, C), np.uint8)
        for i in range(br):
            for j in range(bc):
                blk = w[i * block:(i + 1) * block, j * block:(j + 1) * block]
                s = np.float32(max(np.abs(blk).max(), 1e-6) / 448.0)
                scale[i, j] = s
                codes[i * block:(i + 1) * block, j * block:(j + 1) * block] = to_e4m3(blk / s)
        out[name] = ("F8_E4M3", codes)
        out[name + "_scale_inv"] = ("F32", scale)
        full = np.repeat(np.repeat(scale, block, 0), block, 1)[:R, :C]
        deq[name] = (e4m3_table()[codes] * full).astype(np.float32)
    c = copy.deepcopy(cfg)
    c["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                                "weight_block_size": [block, block],
                                "modules_to_not_convert": ["lm_head", "model.embed_tokens", "mlp.gate"]}
    return c, out, deq


AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]  # nibble i holds output 8j + AWQ_ORDER[i]


def awq_pack(x):
    """[in, out] 4-bit values -> I32 [in, out/8] in AWQ's GEMM order."""
    n_in, n_out = x.shape
    x = x.reshape(n_in, n_out // 8, 8).astype(np.uint32)
    words = np.zeros((n_in, n_out // 8), np.uint32)
    for i in range(8):
        words |= x[:, :, AWQ_ORDER[i]] << np.uint32(4 * i)
    return words.view(np.int32)


def awq_case(src, cfg, rng, group=64):
    out, deq = {}, {}
    for name, entry in src.items():
        if name not in linear_names(src, ""):
            out[name] = entry
            continue
        m = name[:-len(".weight")]
        w = as_f32(entry)
        q, s_stored, s32, z = affine_groups(w, 4, group, "F16")
        out[m + ".qweight"] = ("I32", awq_pack(q.T))
        out[m + ".qzeros"] = ("I32", awq_pack(z.T))
        out[m + ".scales"] = ("F16", np.ascontiguousarray(s_stored.T))
        deq[name] = dequant_affine(q, s32, z, group)
    c = copy.deepcopy(cfg)
    c["quantization_config"] = {"quant_method": "awq", "bits": 4, "group_size": group, "zero_point": True,
                                "version": "gemm", "modules_to_not_convert": None}
    return c, out, deq


def gptq_case(src, cfg, rng, bits, group, sym, v2, act_order):
    """GPTQ: qweight packed along the inputs, qzeros along the outputs (v1: z − 1), g_idx.
    act_order: layer 0's MLP uses groups made of scattered aligned 32-column blocks (exact as
    Affine/Symmetric g32), layer 1 a random permutation of the columns (dequantized to F32 by
    the loader); attention stays sequential."""
    out, deq = {}, {}
    per = 32 // bits
    for name, entry in src.items():
        if name not in linear_names(src, ""):
            out[name] = entry
            continue
        m = name[:-len(".weight")]
        w = as_f32(entry)  # [out, in]
        R, C = w.shape
        groups = C // group
        g_idx = np.arange(C) // group
        if act_order and ".mlp." in name and ".layers.0." in name:
            blocks = np.arange(C // 32)
            rng.shuffle(blocks)
            g_idx = np.repeat(blocks // (group // 32), 32)
        elif act_order and ".mlp." in name and ".layers.1." in name:
            perm = rng.permutation(C)
            g_idx = np.empty(C, np.int64)
            g_idx[perm] = np.arange(C) // group
        # quantize each group's columns together (wherever they are)
        q = np.zeros((R, C), np.int64)
        s32 = np.zeros((R, groups), np.float32)
        s_stored = np.zeros((R, groups), np.float16)
        z = np.zeros((R, groups), np.int64)
        for gi in range(groups):
            cols = np.nonzero(g_idx == gi)[0]
            if sym:
                qg, ss, sg = symmetric_groups(w[:, cols], bits, len(cols), "F16")
                zg = np.full((R, 1), 1 << (bits - 1), np.int64)
                qg = qg + (1 << (bits - 1))
            else:
                qg, ss, sg, zg = affine_groups(w[:, cols], bits, len(cols), "F16")
            q[:, cols] = qg
            s32[:, gi], s_stored[:, gi], z[:, gi] = sg[:, 0], ss[:, 0], zg[:, 0]
        packed = pack_along_last(q.T.reshape(C // per, per, R).transpose(0, 2, 1), bits)[..., 0]  # [C/per, R]
        out[m + ".qweight"] = ("I32", np.ascontiguousarray(packed).view(np.int32))
        stored_z = z - (0 if v2 else 1)
        out[m + ".qzeros"] = ("I32", pack_along_last(stored_z.T.astype(np.uint32) & ((1 << bits) - 1), bits).view(np.int32))
        out[m + ".scales"] = ("F16", np.ascontiguousarray(s_stored.T))
        out[m + ".g_idx"] = ("I32", g_idx.astype(np.int32))
        deq[name] = ((q - z[:, g_idx]).astype(np.float32) * s32[:, g_idx]).astype(np.float32)
    c = copy.deepcopy(cfg)
    c["quantization_config"] = {"quant_method": "gptq", "bits": bits, "group_size": group, "desc_act": act_order,
                                "sym": sym, "checkpoint_format": "gptq_v2" if v2 else "gptq", "true_sequential": True}
    return c, out, deq


def ct_case(src, cfg, rng):
    """compressed-tensors pack-quantized with four schemes picked by targets: layer 0 attention
    W4A16 symmetric g32, layer 0 MLP W4A16 asymmetric g64, layer 1 attention W8A16 symmetric per
    channel, layer 1 MLP W8A16 asymmetric per channel. Scales bf16."""
    schemes = {
        "re:.*layers\\.0\\.self_attn\\..*": dict(num_bits=4, symmetric=True, strategy="group", group_size=32),
        "re:.*layers\\.0\\.mlp\\..*": dict(num_bits=4, symmetric=False, strategy="group", group_size=64),
        "re:.*layers\\.1\\.self_attn\\..*": dict(num_bits=8, symmetric=True, strategy="channel", group_size=None),
        "re:.*layers\\.1\\.mlp\\..*": dict(num_bits=8, symmetric=False, strategy="channel", group_size=None),
    }
    out, deq = {}, {}
    for name, entry in src.items():
        if name not in linear_names(src, ""):
            out[name] = entry
            continue
        m = name[:-len(".weight")]
        key = next(k for k in schemes if __import__("re").match(k[3:], m))
        a = schemes[key]
        bits = a["num_bits"]
        w = as_f32(entry)
        R, C = w.shape
        group = a["group_size"] or C
        off = 1 << (bits - 1)
        if a["symmetric"]:
            qs, s_stored, s32 = symmetric_groups(w, bits, group, "BF16")
            zs = np.zeros((R, C // group), np.int64)
        else:
            qu, s_stored, s32, zu = affine_groups(w, bits, group, "BF16")
            qs, zs = qu - off, zu - off  # signed values as compressed-tensors keeps them
        out[m + ".weight_packed"] = ("I32", pack_along_last((qs + off).astype(np.uint32), bits).view(np.int32))
        out[m + ".weight_scale"] = ("BF16", s_stored)
        out[m + ".weight_shape"] = ("I64", np.array([R, C], np.int64))
        if not a["symmetric"]:
            zp = (zs + off).astype(np.uint32)  # [R, groups], packed along the outputs (dim 0)
            out[m + ".weight_zero_point"] = ("I32", pack_along_last(np.ascontiguousarray(zp.T), bits).T.copy().view(np.int32))
        deq[name] = ((qs - expand(zs, group)).astype(np.float32) * expand(s32, group)).astype(np.float32)
    groups = {}
    for i, (target, a) in enumerate(schemes.items()):
        groups[f"group_{i}"] = {"targets": [target], "input_activations": None, "output_activations": None,
                                "weights": {"num_bits": a["num_bits"], "type": "int", "symmetric": a["symmetric"],
                                            "strategy": a["strategy"], "group_size": a["group_size"],
                                            "dynamic": False, "actorder": None, "observer": "minmax"}}
    c = copy.deepcopy(cfg)
    c["quantization_config"] = {"quant_method": "compressed-tensors", "format": "pack-quantized",
                                "quantization_status": "compressed", "config_groups": groups,
                                "ignore": ["lm_head"], "kv_cache_scheme": None}
    return c, out, deq


def mxfp4_case(src, cfg, rng, intermediate=32, layers=2):
    """gpt-oss's release: experts' gate_up_proj / down_proj as MXFP4 blocks + e8m0 scales
    ([E, out, in/32, 16] / [E, out, in/32]); the rest bf16. The fixture keeps the first 32
    intermediate units (MXFP4 needs a multiple of 32; the HF fixture has 40) and 2 layers."""
    I0 = cfg["intermediate_size"]
    c = copy.deepcopy(cfg)
    c["intermediate_size"] = intermediate
    c["num_hidden_layers"] = layers
    c["layer_types"] = cfg["layer_types"][:layers]
    keep = [2 * j for j in range(intermediate)] + [2 * j + 1 for j in range(intermediate)]
    keep.sort()  # interleaved gate/up columns of the first `intermediate` units
    out, deq = {}, {}
    for name, entry in src.items():
        if ".layers." in name and int(name.split(".layers.")[1].split(".")[0]) >= layers:
            continue
        dtype, arr = entry
        if name.endswith("experts.gate_up_proj_bias"):
            out[name] = (dtype, np.ascontiguousarray(arr[:, keep]))
            continue
        if not (name.endswith("experts.gate_up_proj") or name.endswith("experts.down_proj")):
            out[name] = entry
            continue
        w = as_f32(entry)  # [E, in, out]
        w = w[:, :, keep] if name.endswith("gate_up_proj") else w[:, :intermediate, :]
        wt = np.ascontiguousarray(w.transpose(0, 2, 1))  # [E, out, in]
        E, R, C = wt.shape
        g = wt.reshape(E, R, C // 32, 32)
        amax = np.maximum(np.abs(g).max(-1), 1e-6)
        e = np.clip(np.ceil(np.log2(amax / 6.0)), -127, 127).astype(np.int64)  # 6 = largest e2m1
        scale = np.ldexp(np.float32(1), e).astype(np.float32)
        x = g / scale[..., None]
        codes = np.abs(x[..., None] - E2M1[None, None, None, None, :]).argmin(-1).astype(np.uint8)
        lo, hi = codes[..., 0::2], codes[..., 1::2]
        out[name + "_blocks"] = ("U8", (lo | (hi << 4)).astype(np.uint8))
        out[name + "_scales"] = ("U8", (e + 127).astype(np.uint8))
        values = (E2M1[codes] * scale[..., None]).reshape(E, R, C)
        deq[name] = np.ascontiguousarray(values.transpose(0, 2, 1)).astype(np.float32)  # back to [E, in, out]
    c["quantization_config"] = {"quant_method": "mxfp4",
                                "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                                           "model.embed_tokens", "lm_head"]}
    base = copy.deepcopy(cfg)
    base["intermediate_size"], base["num_hidden_layers"], base["layer_types"] = intermediate, layers, c["layer_types"]
    return c, out, deq, base


CASES = {
    "mlx_qwen3": ("qwen3", lambda s, c, r: mlx_case(s, c, r)),
    "fp8_qwen3_moe": ("qwen3_moe", lambda s, c, r: fp8_case(s, c, r)),
    "awq_qwen3": ("qwen3", lambda s, c, r: awq_case(s, c, r)),
    "gptq_qwen3": ("qwen3", lambda s, c, r: gptq_case(s, c, r, 4, 32, True, False, False)),
    "gptq8_qwen3": ("qwen3", lambda s, c, r: gptq_case(s, c, r, 8, 64, False, True, False)),
    "gptq_actorder_qwen3": ("qwen3", lambda s, c, r: gptq_case(s, c, r, 4, 64, True, False, True)),
    "ct_qwen3": ("qwen3", lambda s, c, r: ct_case(s, c, r)),
    "mxfp4_gpt_oss": ("gpt_oss", lambda s, c, r: mxfp4_case(s, c, r)),
}


def smallest_exact(values):
    """BF16 where every value is exact in it (MXFP4), else F32: keeps the fixtures small."""
    b = f32_to_bf16(values)
    if np.array_equal(bf16_to_f32(b), values):
        return ("BF16", b)
    return ("F32", values)


def make_case(name, hf_dir, out_dir):
    arch, build = CASES[name]
    src_dir = os.path.join(hf_dir, arch)
    cfg = json.load(open(os.path.join(src_dir, "config.json")))
    src = read_safetensors(os.path.join(src_dir, "model.safetensors"))
    rng = np.random.default_rng(44)
    result = build(src, cfg, rng)
    qcfg, tensors, deq = result[:3]
    base_cfg = result[3] if len(result) > 3 else cfg
    d = os.path.join(out_dir, name)
    os.makedirs(d, exist_ok=True)
    json.dump(qcfg, open(os.path.join(d, "config.json"), "w"), indent=2)
    json.dump(base_cfg, open(os.path.join(d, "dequantized.config.json"), "w"), indent=2)
    write_safetensors(os.path.join(d, "model.safetensors"), tensors)
    write_safetensors(os.path.join(d, "dequantized.safetensors"), {k: smallest_exact(v) for k, v in deq.items()})
    json.dump({"source": arch}, open(os.path.join(d, "fixture.json"), "w"))
    size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
    print(f"{name}: {len(deq)} quantized tensors, {size / 1024:.0f} KiB")


def dequantized_model_dir(case_dir, tmp):
    """The float model a case means: its float tensors + dequantized.safetensors, for transformers."""
    tensors = {}
    deq = read_safetensors(os.path.join(case_dir, "dequantized.safetensors"))
    quant = read_safetensors(os.path.join(case_dir, "model.safetensors"))
    for k, v in quant.items():
        if v[0] in ("F32", "F16", "BF16") and k not in deq:
            tensors[k] = (v[0], v[1])
    tensors.update(deq)
    companions = ("scales", "biases", "_scale_inv", "qzeros", "g_idx", "weight_scale", "weight_zero_point")
    tensors = {k: v for k, v in tensors.items() if not k.endswith(companions)}
    write_safetensors(os.path.join(tmp, "model.safetensors"), tensors)
    shutil.copy(os.path.join(case_dir, "dequantized.config.json"), os.path.join(tmp, "config.json"))
    return tmp


def make_goldens(name, hf_dir, out_dir):
    import torch
    from transformers import AutoModelForCausalLM
    arch = CASES[name][0]
    case_dir = os.path.join(out_dir, name)
    inputs = read_safetensors(os.path.join(hf_dir, arch, "golden.safetensors"))
    with tempfile.TemporaryDirectory() as tmp:
        model = AutoModelForCausalLM.from_pretrained(dequantized_model_dir(case_dir, tmp), dtype=torch.float32,
                                                     attn_implementation="eager")
        model.eval()
        golden = {}
        with torch.no_grad():
            for i in range(2):  # logits of the 7- and 33-token inputs (input_ids_2's 70 rows would add 140 KiB)
                ids = torch.from_numpy(inputs[f"input_ids_{i}"][1].astype(np.int64))
                golden[f"input_ids_{i}"] = ("I64", ids.numpy())
                golden[f"logits_{i}"] = ("F32", model(input_ids=ids[None], use_cache=False).logits[0].float().numpy())
            for j in range(2):
                ids = torch.from_numpy(inputs[f"input_ids_{j}"][1].astype(np.int64))
                model.generation_config.eos_token_id = None
                out = model.generate(ids[None], attention_mask=torch.ones_like(ids[None]), do_sample=False,
                                     max_new_tokens=16, min_new_tokens=16, eos_token_id=None, pad_token_id=0,
                                     output_logits=True, return_dict_in_generate=True)
                golden[f"greedy_{j}"] = ("I64", out.sequences[0, ids.numel():].numpy())
                golden[f"greedy_{j}_logits"] = ("F32", torch.stack([lg[0].float() for lg in out.logits]).numpy())
        write_safetensors(os.path.join(case_dir, "golden.safetensors"), golden)
    print(f"{name}: golden.safetensors written")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("hf_dir")
    ap.add_argument("out_dir")
    ap.add_argument("--only", nargs="*", default=None, choices=sorted(CASES))
    ap.add_argument("--goldens", action="store_true", help="also run transformers on the dequantized models")
    ap.add_argument("--goldens-only", action="store_true", help="only (re)write golden.safetensors")
    args = ap.parse_args()
    for name in args.only or sorted(CASES):
        if not args.goldens_only:
            make_case(name, args.hf_dir, args.out_dir)
        if args.goldens or args.goldens_only:
            make_goldens(name, args.hf_dir, args.out_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
