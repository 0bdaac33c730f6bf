#!/usr/bin/env python3
"""GGUF fixtures for gemma3, deepseek2 and gpt-oss with llama.cpp's own reference outputs.

For each tiny Hugging Face fixture (shared/fixtures/hf/{gemma3_text,deepseek_v3,gpt_oss}):
  1. llama.cpp's convert_hf_to_gguf.py writes it as a bf16 GGUF (run in-process: the fixtures ship
     no tokenizer and this machine has no `transformers`, so the converter's two tokenizer readers
     are given a small synthetic vocabulary - byte-level BPE with trained merges for gpt2-style
     files, a SentencePiece-style table with byte fallback for gemma3 - and AutoConfig falls back
     to config.json, which the converter does by itself when transformers cannot read a config;
     every tensor and hyper-parameter is written by the converter's own code);
  2. llama-quantize makes the committed file (gemma3 Q8_0, deepseek2 Q4_K_M, gpt-oss MXFP4_MOE);
  3. tools/llama_reference_dump.cpp (linked against llama.cpp) takes llama.cpp's logits at every
     position of the HF fixture's three id sequences, its 16-token greedy continuation and, for the
     MoE models, the scores each MoE layer selected its experts by.

Writes NAME.gguf and NAME.reference.safetensors into OUT_DIR: input_ids_i I64 [T], logits_i F32 [T, 512],
greedy_i I64 [16], and for MoE models route_margin_i F32 [T] and greedy_route_margin_i F32 [16]: per row
(per greedy decode call) the smallest margin over the MoE layers by which llama.cpp's expert choice
was made (top-k: k-th minus (k+1)-th selection score; with expert groups also the chosen groups'
last score minus the next group's), so a test can tell a routing near-tie from an error.

usage: make_gguf_arch_fixtures.py LLAMA_CPP_DIR HF_FIXTURES_DIR LLAMA_REFERENCE_DUMP_BIN OUT_DIR
  (python3 with numpy and torch; LLAMA_CPP_DIR/build/bin holds llama-quantize and the libraries)
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import types

CASES = [
    # (hf case, output name, llama-quantize arguments, vocabulary kind, tokenizer.ggml.pre)
    ("gemma3_text", "gemma3-q8_0", ["Q8_0"], "spm", None),
    # 64-wide rows fall back from Q4_K/Q6_K to Q5_0/Q8_0, the 16- and 48-wide ones to F16.
    ("deepseek_v3", "deepseek2-q4_k_m", ["Q4_K_M"], "bpe", "deepseek-v3"),
    # The experts' down projection has 40-wide rows, which MXFP4 (blocks of 32) cannot hold and for
    # which llama-quantize defines no fallback: kept F16. Gate/up experts MXFP4, the rest Q8_0.
    ("gpt_oss", "gpt-oss-mxfp4", ["--tensor-type", "ffn_down_exps=f16", "MXFP4_MOE"], "bpe", "gpt-4o"),
]
VOCAB = 512
GREEDY = 16
CORPUS = (
    "The quick brown fox jumps over the lazy dog. A tokenizer splits text into pieces; the pieces are "
    "numbered and the model reads the numbers. def main(): return 0 # code is text too. "
    "Large language models predict the next token from the ones before it, one step at a time. "
    "Numbers 0123456789 and punctuation (like this!) appear in prompts, and so do names such as "
    "Alice, Bob and the city of Paris. Sliding windows, experts and latent attention are all here. "
    "Every morning the baker opened the shop, weighed flour, mixed water with yeast and waited for the dough "
    "to rise; customers queued outside, talking about weather, football, politics and their neighbours' "
    "gardens. Meanwhile engineers measured throughput, latency, memory bandwidth and cache misses, wrote "
    "benchmarks, compared kernels and argued whether quantization changes answers. Rivers, mountains, "
    "forests, deserts, oceans: geography fascinated the students, who drew maps with coloured pencils."
)


def bytes_to_unicode():
    # GPT-2's reversible byte -> printable character table.
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def bpe_vocab(n_special):
    """Byte-level BPE: specials, the 256 byte characters, then merges trained on CORPUS."""
    b2u = bytes_to_unicode()
    tokens = [b2u[b] for b in range(256)]
    words = []
    for i, w in enumerate(CORPUS.split(" ")):
        word = (" " if i else "") + w
        words.append([b2u[b] for b in word.encode("utf-8")])
    merges = []
    known = set(tokens)
    while len(tokens) < VOCAB - n_special:
        counts = {}
        for w in words:
            for a, b in zip(w, w[1:]):
                counts[(a, b)] = counts.get((a, b), 0) + 1
        if not counts:
            break
        (a, b), _ = max(counts.items(), key=lambda kv: (kv[1], kv[0]))
        merged = a + b
        merges.append(f"{a} {b}")
        if merged not in known:
            known.add(merged)
            tokens.append(merged)
        for w in words:
            i = 0
            while i < len(w) - 1:
                if w[i] == a and w[i + 1] == b:
                    w[i:i + 2] = [merged]
                else:
                    i += 1
    specials = ["<|bos|>", "<|eos|>", "<|pad|>"][:n_special]
    assert len(specials) + len(tokens) == VOCAB, len(tokens)
    return specials + tokens, merges


def spm_vocab():
    """SentencePiece-style: <pad> <eos> <bos> <unk>, 256 byte pieces, then pieces with scores."""
    tokens = ["<pad>", "<eos>", "<bos>", "<unk>"] + [f"<0x{b:02X}>" for b in range(256)]
    types_ = [3, 3, 3, 2] + [6] * 256
    pieces = []
    for w in CORPUS.replace(".", " ").replace(",", " ").split():
        for piece in ("\u2581" + w, w):
            if piece not in pieces:
                pieces.append(piece)
    for c in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,;:!?()#=":
        for piece in (c, "\u2581" + c):
            if piece not in pieces:
                pieces.append(piece)
    pieces = ["\u2581"] + [p for p in pieces if p != "\u2581"]
    pieces = pieces[: VOCAB - len(tokens)]
    assert len(tokens) + len(pieces) == VOCAB, len(pieces)
    scores = [0.0] * len(tokens) + [-float(i) for i in range(len(pieces))]
    return tokens + pieces, scores, types_ + [1] * len(pieces)


def convert(llama_dir, case_dir, kind, pre, out_path):
    """Runs llama.cpp's converter in this process on a copy of the case with the synthetic vocabulary."""
    sys.path[:0] = [llama_dir, os.path.join(llama_dir, "gguf-py")]
    stub = types.ModuleType("transformers")

    class AutoConfig:  # the converter falls back to reading config.json when this raises
        @staticmethod
        def from_pretrained(*a, **k):
            raise OSError("transformers is not installed")

    stub.AutoConfig = AutoConfig
    sys.modules["transformers"] = stub
    progress = types.ModuleType("tqdm")  # the writer's progress bar, not installed here

    class Bar:
        def __init__(self, *a, **k):
            pass

        def update(self, *a):
            pass

        def close(self):
            pass

    progress.tqdm = Bar
    sys.modules.setdefault("tqdm", progress)
    import torch
    for name in ("float8_e4m3fn", "float8_e5m2"):  # torch < 2.1 (the fixtures hold no fp8 tensors)
        if not hasattr(torch, name):
            setattr(torch, name, type(name, (), {})())
    import gguf  # noqa: E402
    from conversion import base  # noqa: E402
    import convert_hf_to_gguf  # noqa: E402

    with tempfile.TemporaryDirectory() as scratch:
        tmp = os.path.join(scratch, os.path.basename(case_dir))  # general.name comes from the folder's name
        os.mkdir(tmp)
        with open(os.path.join(case_dir, "config.legacy.json")) as f:
            cfg = json.load(f)  # the Hub spelling of the same model (see the HF fixtures' README)
        with open(os.path.join(tmp, "config.json"), "w") as f:
            json.dump(cfg, f)
        os.symlink(os.path.join(case_dir, "model.safetensors"), os.path.join(tmp, "model.safetensors"))
        if kind == "bpe":
            tokens, merges = bpe_vocab(3)
            with open(os.path.join(tmp, "tokenizer.json"), "w") as f:
                json.dump({"model": {"type": "BPE", "merges": merges}, "added_tokens": []}, f)

            def get_vocab_base(self):
                return tokens, [3, 3, 3] + [1] * (VOCAB - 3), pre

            base.TextModel.get_vocab_base = get_vocab_base
        else:
            tokens, scores, toktypes = spm_vocab()
            open(os.path.join(tmp, "tokenizer.model"), "wb").close()  # selects the converter's SentencePiece path

            def create_vocab(self):
                return tokens, scores, toktypes

            base.TextModel._create_vocab_sentencepiece = create_vocab
        sys.argv = ["convert_hf_to_gguf.py", tmp, "--outtype", "bf16", "--outfile", out_path]
        convert_hf_to_gguf.main()
    del gguf


def moe_layers(cfg):
    if cfg["model_type"] == "gpt_oss":
        return cfg["num_hidden_layers"]
    if cfg["model_type"] == "deepseek_v3":
        return cfg["num_hidden_layers"] - cfg.get("first_k_dense_replace", 0)
    return 0


def route_margins(scores, cfg):
    """Per row of [rows, E] selection scores: how far llama.cpp's expert choice was from a tie."""
    import numpy as np
    k = cfg.get("num_experts_per_tok") or cfg["experts_per_token"]
    groups, keep = cfg.get("n_group", 1), cfg.get("topk_group", 1)
    out = []
    for s in scores.astype(np.float64):
        margin = np.inf
        if groups > 1:  # DeepSeek-V3: groups ranked by the sum of their two best scores
            g = np.sort(np.sort(s.reshape(groups, -1), axis=1)[:, -2:].sum(axis=1))[::-1]
            margin = g[keep - 1] - g[keep]
            chosen = np.argsort(-np.sort(s.reshape(groups, -1), axis=1)[:, -2:].sum(axis=1), kind="stable")[:keep]
            s = s.reshape(groups, -1)[chosen].reshape(-1)
        t = np.sort(s)[::-1]
        out.append(min(margin, t[k - 1] - t[k]))
    return np.array(out)


def read_safetensors(path):
    import numpy as np
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        blob = f.read()
    out = {}
    for k, v in header.items():
        if k == "__metadata__":
            continue
        a, b = v["data_offsets"]
        dt = {"I64": np.int64, "F32": np.float32}[v["dtype"]]
        out[k] = np.frombuffer(blob[a:b], dtype=dt).reshape(v["shape"])
    return out


def write_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for name, arr in tensors.items():
        raw = arr.tobytes()
        header[name] = {"dtype": {"int64": "I64", "float32": "F32"}[str(arr.dtype)], "shape": list(arr.shape),
                        "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def main():
    import numpy as np
    llama_dir, hf_dir, llama_logits, out_dir = sys.argv[1:5]
    only = sys.argv[5] if len(sys.argv) > 5 else None
    bin_dir = os.path.join(llama_dir, "build", "bin")
    env = dict(os.environ, LD_LIBRARY_PATH=bin_dir)
    for case, name, qtype, kind, pre in CASES:
        if only and only != case:
            continue
        if only is None:  # each conversion in its own process: the converter registers classes globally
            subprocess.run([sys.executable, __file__, llama_dir, hf_dir, llama_logits, out_dir, case], check=True)
            continue
        case_dir = os.path.join(hf_dir, case)
        with tempfile.TemporaryDirectory() as tmp:
            bf16 = os.path.join(os.environ.get("KEEP_BF16", tmp), name + "-bf16.gguf")
            convert(llama_dir, case_dir, kind, pre, bf16)
            gguf_path = os.path.join(out_dir, name + ".gguf")
            subprocess.run([os.path.join(bin_dir, "llama-quantize")] + qtype[:-1] + [bf16, gguf_path, qtype[-1]], check=True, env=env,
                           stdout=subprocess.DEVNULL)
            golden = read_safetensors(os.path.join(case_dir, "golden.safetensors"))
            with open(os.path.join(case_dir, "config.json")) as f:
                cfg = json.load(f)
            ref = {}
            for i in range(3):
                ids = golden[f"input_ids_{i}"].astype(np.int64)
                prefix = os.path.join(tmp, f"seq{i}")
                res = subprocess.run([llama_logits, gguf_path, ",".join(map(str, ids)), prefix, str(GREEDY)],
                                     check=True, env=env, capture_output=True, text=True)
                meta = json.loads(res.stdout.strip().splitlines()[-1])
                assert meta["n_vocab"] == VOCAB, meta
                logits = np.fromfile(prefix + ".logits.f32", dtype=np.float32).reshape(len(ids), VOCAB)
                ref[f"input_ids_{i}"] = ids
                ref[f"logits_{i}"] = logits
                ref[f"greedy_{i}"] = np.array(meta["greedy"], dtype=np.int64)
                moe = moe_layers(cfg)
                if moe:
                    scores = np.fromfile(prefix + ".routing.f32", dtype=np.float32)
                    E = meta["n_expert"]
                    rows = [len(ids)] + [1] * GREEDY  # the batch, then one row per greedy decode call
                    assert scores.size == sum(rows) * moe * E, (scores.size, rows, moe, E)
                    margins, at = [], 0
                    for r in rows:
                        call = scores[at:at + r * moe * E].reshape(moe, r, E)
                        at += r * moe * E
                        margins.append(np.min([route_margins(call[l], cfg) for l in range(moe)], axis=0))
                    ref[f"route_margin_{i}"] = margins[0].astype(np.float32)
                    ref[f"greedy_route_margin_{i}"] = np.concatenate(margins[1:]).astype(np.float32)
            write_safetensors(os.path.join(out_dir, name + ".reference.safetensors"), ref)
            print(f"{name}: {os.path.getsize(gguf_path)} bytes")


if __name__ == "__main__":
    main()
