#!/usr/bin/env python3
"""A from-scratch numpy reference of DFlash drafting for the tachyon-demo model (no torch): the
target's greedy continuation and its layer features, the drafter's block forward exactly as
tools/train_dflash.py trains it (drafter_forward_pos: block rows see the context before the
anchor and their whole block), and what greedy speculation with that drafter accepts.

It answers two questions about a prompt:
  * what a correct engine's DFlash chains accept per verify step (k drafts, every step anchored
    at the last committed token, the context = every committed position's features), against
    the every-anchor mean that the training script reports;
  * the golden drafts of every anchor (--golden FILE: a JSON that
    tests/unit/engine/spec_engine_test.cpp compares the engine's DFlash proposals with).

  /usr/bin/python3 tools/dflash_reference.py models/tachyon-demo bench/spec/prompts/code_completion.ids -n 256
"""
import argparse, json, os, struct
import numpy as np

p = argparse.ArgumentParser()
p.add_argument("target")
p.add_argument("ids", help="a file of whitespace-separated prompt token ids")
p.add_argument("-n", type=int, default=256, help="greedy tokens to generate")
p.add_argument("--drafter", help="drafter folder (default TARGET/dflash)")
p.add_argument("--k", type=int, default=0, help="drafts per chain (default block_size - 1)")
p.add_argument("--vocab", type=int, default=0, help="draft over ids [0, vocab) only (0: all)")
p.add_argument("--golden", help="write the sequence and the drafts of every anchor to this JSON")
args = p.parse_args()


def load_st(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    hdr = json.loads(b[8:8 + n])
    base = 8 + n
    hdr.pop("__metadata__", None)
    out = {}
    for k, v in hdr.items():
        s, e = v["data_offsets"]
        raw = b[base + s: base + e]
        assert v["dtype"] == "BF16", (k, v["dtype"])
        u = np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16
        out[k] = u.view(np.float32).reshape(v["shape"])
    return out


cfg = json.load(open(os.path.join(args.target, "config.json")))
idx = json.load(open(os.path.join(args.target, "model.safetensors.index.json")))
W = {}
for f in sorted(set(idx["weight_map"].values())):
    W.update(load_st(os.path.join(args.target, f)))
ddir = args.drafter or os.path.join(args.target, "dflash")
dcfg = json.load(open(os.path.join(ddir, "config.json")))
Wd = load_st(os.path.join(ddir, "model.safetensors"))

H, KV, HD, D = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"], cfg["hidden_size"]
L, EPS = cfg["num_hidden_layers"], cfg["rms_norm_eps"]
THETA = cfg.get("rope_theta") or cfg["rope_parameters"]["rope_theta"]
E = W["model.embed_tokens.weight"]
BLK = dcfg["block_size"]
MASK = dcfg["dflash_config"]["mask_token_id"]
LAYER_IDS = dcfg["dflash_config"]["target_layer_ids"]
DL = dcfg["num_hidden_layers"]
INV_FREQ = 1.0 / (THETA ** (np.arange(0, HD, 2, dtype=np.float64) / HD))


def rms(x, w):
    return (w * (x / np.sqrt((x.astype(np.float64) ** 2).mean(-1, keepdims=True) + EPS))).astype(np.float32)


def rope(x, pos):  # x [nh, T, HD], pos [T]
    fr = pos[:, None].astype(np.float64) * INV_FREQ
    emb = np.concatenate([fr, fr], -1)
    cos, sin = np.cos(emb).astype(np.float32), np.sin(emb).astype(np.float32)
    x1, x2 = x[..., :HD // 2], x[..., HD // 2:]
    return x * cos + np.concatenate([-x2, x1], -1) * sin


def attend(q, k, v, mask):  # q [H,T,HD], k/v [KV,S,HD], mask [T,S] (True: visible)
    rep = q.shape[0] // k.shape[0]
    k, v = np.repeat(k, rep, 0), np.repeat(v, rep, 0)
    s = (q @ k.transpose(0, 2, 1)) / np.sqrt(HD)
    s = np.where(mask[None], s, -np.inf)
    s = np.exp(s - s.max(-1, keepdims=True))
    return (s / s.sum(-1, keepdims=True)) @ v


def silu(x):
    return x / (1 + np.exp(-x))


def mlp(x, Wt, p):
    return (silu(x @ Wt[p + "mlp.gate_proj.weight"].T) * (x @ Wt[p + "mlp.up_proj.weight"].T)) @ Wt[p + "mlp.down_proj.weight"].T


def target_forward(ids, cache=None):
    """Causal forward of ids after the `cache` positions (a list of per-layer [k, v], extended in
    place); returns the final hidden (pre-norm) and the concatenated features of these rows."""
    T = len(ids)
    start = cache[0][0].shape[1] if cache and cache[0] else 0
    x = E[np.asarray(ids)]
    pos = np.arange(start, start + T)
    mask = np.tril(np.ones((T, start + T), dtype=bool), start)
    feats = {}
    for l in range(L):
        pfx = f"model.layers.{l}."
        xn = rms(x, W[pfx + "input_layernorm.weight"])
        q = (xn @ W[pfx + "self_attn.q_proj.weight"].T).reshape(T, H, HD).transpose(1, 0, 2)
        k = (xn @ W[pfx + "self_attn.k_proj.weight"].T).reshape(T, KV, HD).transpose(1, 0, 2)
        v = (xn @ W[pfx + "self_attn.v_proj.weight"].T).reshape(T, KV, HD).transpose(1, 0, 2)
        q = rope(rms(q, W[pfx + "self_attn.q_norm.weight"]), pos)
        k = rope(rms(k, W[pfx + "self_attn.k_norm.weight"]), pos)
        if cache is not None:
            if cache[l]:
                k = np.concatenate([cache[l][0], k], 1)
                v = np.concatenate([cache[l][1], v], 1)
            cache[l] = [k, v]
        o = attend(q, k, v, mask).transpose(1, 0, 2).reshape(T, H * HD)
        x = x + o @ W[pfx + "self_attn.o_proj.weight"].T
        x = x + mlp(rms(x, W[pfx + "post_attention_layernorm.weight"]), W, pfx)
        feats[l] = x
    return x, np.concatenate([feats[l] for l in LAYER_IDS], -1)


def next_token(h):
    return int(np.argmax(rms(h[-1:], W["model.norm.weight"]) @ E.T))


def greedy(prompt, n):
    """Greedy continuation with a KV cache."""
    cache = [None] * L
    ids = list(prompt)
    h, _ = target_forward(ids, cache)
    for i in range(n):
        ids.append(next_token(h))
        if i + 1 < n:
            h, _ = target_forward(ids[-1:], cache)
    return ids


def drafter_block(ctx, anchor, anchor_token):
    """Block logits [BLK-1, V] for the anchor at position `anchor`, the context = ctx rows 0..anchor-1
    (positions 0..anchor-1): drafter_forward_pos of tools/train_dflash.py for one block."""
    c = rms(ctx[:anchor] @ Wd["fc.weight"].T, Wd["hidden_norm.weight"])
    S = c.shape[0]
    ids = np.full(BLK, MASK)
    ids[0] = anchor_token
    h = E[ids]
    qpos = anchor + np.arange(BLK)
    kpos = np.concatenate([np.arange(S), qpos])
    mask = np.ones((BLK, S + BLK), dtype=bool)
    for i in range(DL):
        pfx = f"layers.{i}."
        hn = rms(h, Wd[pfx + "input_layernorm.weight"])
        q = (hn @ Wd[pfx + "self_attn.q_proj.weight"].T).reshape(BLK, H, HD).transpose(1, 0, 2)
        kin = np.concatenate([c, hn], 0)
        k = (kin @ Wd[pfx + "self_attn.k_proj.weight"].T).reshape(S + BLK, KV, HD).transpose(1, 0, 2)
        v = (kin @ Wd[pfx + "self_attn.v_proj.weight"].T).reshape(S + BLK, KV, HD).transpose(1, 0, 2)
        q = rope(rms(q, Wd[pfx + "self_attn.q_norm.weight"]), qpos)
        k = rope(rms(k, Wd[pfx + "self_attn.k_norm.weight"]), kpos)
        o = attend(q, k, v, mask).transpose(1, 0, 2).reshape(BLK, H * HD)
        h = h + o @ Wd[pfx + "self_attn.o_proj.weight"].T
        h = h + mlp(rms(h, Wd[pfx + "post_attention_layernorm.weight"]), Wd, pfx)
    return rms(h[1:], Wd["norm.weight"]) @ E.T


def drafts_of(logits, k):
    v = args.vocab or logits.shape[1]
    return [int(x) for x in np.argmax(logits[:k, :v], -1)]


prompt = [int(x) for x in open(args.ids).read().split()]
P = len(prompt)
seq = greedy(prompt, args.n)
_, ctx = target_forward(seq)
k = args.k or BLK - 1
print(f"prompt {P} tokens, {args.n} greedy tokens; drafter {ddir}: block {BLK}, layers {LAYER_IDS}, k {k}, "
      f"vocab {args.vocab or 'all'}")
print("greedy ids:", " ".join(str(x) for x in seq[P:]))


def accepted_at(anchor):
    d = drafts_of(drafter_block(ctx, anchor, seq[anchor]), k)
    a = 0
    while a < len(d) and anchor + 1 + a < len(seq) and d[a] == seq[anchor + 1 + a]:
        a += 1
    return a, d


# Speculative decoding as the engine runs it: anchor = the last committed token (P - 1 after
# prefill: the token the prefill sampled is at P), each step commits accepted + 1.
steps, accepted, n = 0, 0, P  # n: the anchor's position (the last committed token)
per_step = []
while n + 1 + k <= len(seq) - 1:
    a, _ = accepted_at(n)
    per_step.append(a)
    steps += 1
    accepted += a
    n += a + 1
print(f"chain steps {steps}: {accepted} drafts accepted, {1 + accepted / steps:.3f} tokens/step")
print("per step accepted:", " ".join(str(x) for x in per_step))
every = [accepted_at(t)[0] for t in range(P, len(seq) - k)]
print(f"every anchor of the generated region: {1 + sum(every) / len(every):.3f} mean accepted length")

if args.golden:
    # The drafts of every anchor in the generated region: the engine, whatever its schedule,
    # must propose exactly these (tests/unit/engine/spec_engine_test.cpp). The gap between each
    # position's best and second-best logit says how far from a tie its draft is.
    drafts, gaps = [], []
    for t in range(P, len(seq)):
        lg = drafter_block(ctx, t, seq[t])
        if args.vocab: lg = lg[:, :args.vocab]
        top2 = np.sort(lg, -1)[:, -2:]
        gaps.append([round(float(x), 4) for x in top2[:, 1] - top2[:, 0]])
        drafts.append(drafts_of(lg, BLK - 1))
    gap = min(min(g) for g in gaps)
    json.dump({"about": f"tools/dflash_reference.py {os.path.basename(args.ids)} -n {args.n}: the target's greedy "
                        f"sequence and the drafter's block drafts at every anchor from {P} on",
               "prompt": prompt, "sequence": seq, "first_anchor": P, "drafts": drafts,
               "top2_gaps": gaps, "chain_tokens_per_step": 1 + accepted / steps},
              open(args.golden, "w"))
    print(f"golden written to {args.golden}; smallest top-2 logit gap {gap:.4f}")
