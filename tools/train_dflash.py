#!/usr/bin/env python3
"""Trains a DFlash block drafter (arXiv 2602.06036) for the tachyon-demo model and saves it in the
published z-lab layout (config.json + model.safetensors: fc, hidden_norm, layers.N.*, norm; the
target's embedding and LM head are shared, not stored). Plain torch + numpy; `tokenizers` for the
prompts when present (the GPU machine has it). The math is in src/model/dflash_head.h.

Data: the demo model's own greedy continuations of prompts of the kinds of text the engine
serves (bench/spec/prompts), made from the machine's site-packages: Python windows of 16 to 320
tokens, Python-function chat requests in the demo's chat format, edits that restate a window with
an identifier renamed (whose continuation copies the context), and the opening words of English
docstring paragraphs. Loss: cross-entropy of block position k (1..B-1) against the target's
greedy token, weighted by exp(-(k-1)/gamma) as in the paper.

Evaluation: held-out continuations (every kind, random anchors) and, with --eval-ids, the
engine's own schedule on given prompts (every step anchored where the last one ended; what
bench/spec/run_dflash_bench.sh measures as tokens/step at block 8).

  python3 tools/train_dflash.py --target models/tachyon-demo --out /tmp/dflash \
      --eval-ids bench/spec/prompts/code_completion.ids,bench/spec/prompts/code_edit.ids,bench/spec/prompts/prose.ids
  python3 tools/train_dflash.py --smoke --target models/tachyon-demo --out /tmp/dflash   # CPU, ~1 min
  python3 tools/train_dflash.py --smoke --init models/tachyon-demo/dflash --seconds 0 ...  # evaluate a drafter
"""
import argparse, ast, contextlib, glob, json, math, os, random, struct, sys, time
import numpy as np
import torch
import torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--target", required=True)
p.add_argument("--out", required=True)
p.add_argument("--smoke", action="store_true")
p.add_argument("--seconds", type=float, default=250.0, help="training wall time (cut to fit --deadline)")
p.add_argument("--gen-seconds", type=float, default=100.0, help="wall time for generating data")
p.add_argument("--deadline", type=float, default=400.0,
               help="wall time of the whole run from start-up: training stops early enough to evaluate and save")
p.add_argument("--prompts", type=int, default=48000, help="prompts to make (generation stops at --gen-seconds)")
p.add_argument("--gen-batch", type=int, default=1024)
p.add_argument("--data", help="the generated continuations: loaded from this file when it exists, else generated "
               "and saved there (runs side by side on one GPU share one generation)")
p.add_argument("--no-feature-cache", action="store_true",
               help="recompute the target's features every step instead of once for every sequence (bf16, "
                    "kept on the GPU when they fit)")
p.add_argument("--eval-len", type=int, default=256, help="greedy tokens per --eval-ids prompt")
p.add_argument("--init", help="start from this drafter folder instead of the target's layers "
               "(with --seconds 0: only evaluate it)")
p.add_argument("--eval-ids", default="", help="comma-separated token-id files (bench/spec/prompts/*.ids): the "
               "engine's greedy chains on each are simulated and logged")
p.add_argument("--block", type=int, default=8)
p.add_argument("--layers", type=int, default=2)
p.add_argument("--target-layer-ids", default="1,3")
p.add_argument("--mask-token", type=int, default=8191)
p.add_argument("--gamma", type=float, default=4.0, help="loss weight exp(-(k-1)/gamma); the paper's 4 for block 8")
p.add_argument("--prompt-max", type=int, default=320, help="longest prompt in tokens")
p.add_argument("--gen-len", type=int, default=256)
p.add_argument("--lr", type=float, default=3e-3)
p.add_argument("--batch", type=int, default=64, help="sequences per training step")
p.add_argument("--anchors", type=int, default=24, help="blocks per sequence per training step")
args = p.parse_args()

torch.manual_seed(0); random.seed(0); np.random.seed(0)
dev = "cuda" if torch.cuda.is_available() else "cpu"
if dev == "cuda":
    torch.backends.cuda.matmul.allow_tf32 = False  # features and labels as the f32 engine computes them
    torch.backends.cudnn.allow_tf32 = False
os.makedirs(args.out, exist_ok=True)
log_file = open(os.path.join(args.out, "train_log.txt"), "w")
T0 = time.time()

def log(*a):
    s = f"[{time.time() - T0:7.1f}s] " + " ".join(str(x) for x in a)
    print(s, flush=True); log_file.write(s + "\n"); log_file.flush()

# ---------------------------------------------------------------- checkpoint I/O (no safetensors package)
def load_st(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    hdr = json.loads(b[8:8 + n]); base = 8 + n
    hdr.pop("__metadata__", None)
    out = {}
    for k, v in hdr.items():
        s, e = v["data_offsets"]; raw = b[base + s: base + e]
        assert v["dtype"] == "BF16", v["dtype"]
        u = np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16
        out[k] = torch.from_numpy(u.view(np.float32).copy()).reshape(v["shape"])
    return out

def save_st_bf16(path, tensors):
    hdr, blobs, off = {}, [], 0
    for k in sorted(tensors):
        t = tensors[k].detach().float().cpu().contiguous()
        # round to nearest even bf16
        u = t.numpy().view(np.uint32).astype(np.uint64)
        u = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
        raw = u.tobytes()
        hdr[k] = {"dtype": "BF16", "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw); off += len(raw)
    hdr["__metadata__"] = {"format": "pt"}
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h))); f.write(h)
        for raw in blobs: f.write(raw)

cfg = json.load(open(os.path.join(args.target, "config.json")))
idx = json.load(open(os.path.join(args.target, "model.safetensors.index.json")))
W = {}
for f in sorted(set(idx["weight_map"].values())):
    W.update(load_st(os.path.join(args.target, f)))
W = {k: v.to(dev) for k, v in W.items() if not k.startswith("mtp.")}
H, KV, HD, D = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"], cfg["hidden_size"]
L, V, EPS = cfg["num_hidden_layers"], cfg["vocab_size"], cfg["rms_norm_eps"]
THETA = cfg["rope_parameters"]["rope_theta"]
E = W["model.embed_tokens.weight"]  # [V, D]; the LM head too (tied)
LAYER_IDS = [int(x) for x in args.target_layer_ids.split(",")]
assert all(0 <= i < L - 1 for i in LAYER_IDS), "target_layer_ids must be in [0, num_hidden_layers - 1)"
BLK, MASK = args.block, args.mask_token
EOS = {8181, 8179}

# ---------------------------------------------------------------- shared math
def rms(x, w):
    x32 = x.float()
    return (w * (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + EPS))).to(x.dtype)

INV_FREQ = (1.0 / (THETA ** (torch.arange(0, HD, 2, dtype=torch.float64) / HD))).to(dev)

def rope(x, pos):  # x [B, nh, T, HD], pos [B, T]
    fr = pos[..., None].double() * INV_FREQ
    emb = torch.cat([fr, fr], -1)
    cos, sin = emb.cos().float()[:, None].to(x.dtype), emb.sin().float()[:, None].to(x.dtype)
    x1, x2 = x[..., :HD // 2], x[..., HD // 2:]
    return x * cos + torch.cat([-x2, x1], -1) * sin

def attend(q, k, v, mask):  # q [B,H,T,HD], k/v [B,KV,S,HD], mask [B,1|H,T,S] bool (True: visible)
    rep = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    s = (q @ k.transpose(-1, -2)) / math.sqrt(HD)
    s = s.masked_fill(~mask, float("-inf"))
    return s.softmax(-1).nan_to_num(0.0) @ v  # a row that sees nothing (left padding): zeros, as SDPA gives

def mlp(x, Wd, p):
    return (F.silu(x @ Wd[p + "mlp.gate_proj.weight"].T) * (x @ Wd[p + "mlp.up_proj.weight"].T)) @ Wd[p + "mlp.down_proj.weight"].T

# ---------------------------------------------------------------- target (batched, left padding, KV cache)
def target_forward(ids, pos, key_ok, cache=None, start=0, collect=()):
    """ids/pos [B,T]; key_ok [B,S] which cache slots hold real tokens (S = start + T with a cache).
    Returns the final hidden (pre-norm) and the outputs of the layers in `collect`."""
    B, T = ids.shape
    x = E[ids]
    S = start + T
    causal = torch.ones(T, S, dtype=torch.bool, device=dev).tril(start)
    mask = (causal[None] & key_ok[:, None, :S])[:, None]
    feats = []
    for l in range(L):
        pfx = f"model.layers.{l}."
        xn = rms(x, W[pfx + "input_layernorm.weight"])
        q = (xn @ W[pfx + "self_attn.q_proj.weight"].T).view(B, T, H, HD).transpose(1, 2)
        k = (xn @ W[pfx + "self_attn.k_proj.weight"].T).view(B, T, KV, HD).transpose(1, 2)
        v = (xn @ W[pfx + "self_attn.v_proj.weight"].T).view(B, T, KV, HD).transpose(1, 2)
        q, k = rope(rms(q, W[pfx + "self_attn.q_norm.weight"]), pos), rope(rms(k, W[pfx + "self_attn.k_norm.weight"]), pos)
        if cache is not None:
            cache[l][0][:, :, start:S] = k; cache[l][1][:, :, start:S] = v
            k, v = cache[l][0][:, :, :S], cache[l][1][:, :, :S]
        o = attend(q, k, v, mask).transpose(1, 2).reshape(B, T, H * HD)
        x = x + o @ W[pfx + "self_attn.o_proj.weight"].T
        x = x + mlp(rms(x, W[pfx + "post_attention_layernorm.weight"]), W, pfx)
        if l in collect:
            feats.append(x)
            if l == max(collect): break  # the layers above feed nothing collected
    return x, feats

def logits_of(h):
    return rms(h, W["model.norm.weight"]) @ E.T

@torch.no_grad()
def generate(prompts, n_new):
    """Greedy continuations of left-padded prompts; returns [B, P + n_new] ids, [B, P + n_new] validity."""
    B, P = len(prompts), max(len(x) for x in prompts)
    ids = torch.full((B, P), 8179, dtype=torch.long)
    ok = torch.zeros(B, P + n_new, dtype=torch.bool)
    for i, x in enumerate(prompts):
        ids[i, P - len(x):] = torch.tensor(x); ok[i, P - len(x):] = True
    ok[:, P:] = True
    ids, ok = ids.to(dev), ok.to(dev)
    pos_all = (ok.long().cumsum(1) - 1).clamp(min=0)
    cache = [[torch.zeros(B, KV, P + n_new, HD, device=dev) for _ in range(2)] for _ in range(L)]
    h, _ = target_forward(ids, pos_all[:, :P], ok, cache, 0)
    out = [ids]
    nxt = logits_of(h[:, -1]).argmax(-1)
    for t in range(n_new):
        out.append(nxt[:, None])
        if t == n_new - 1: break
        h, _ = target_forward(nxt[:, None], pos_all[:, P + t:P + t + 1], ok, cache, P + t)
        nxt = logits_of(h[:, -1]).argmax(-1)
    return torch.cat(out, 1), ok

# ---------------------------------------------------------------- prompts
# The kinds of text the engine serves (bench/spec/prompts): code to complete, chat requests for a
# function, edits that restate a file with a change (whose continuation copies the context), and
# prose. Prompt lengths vary from a line to a few hundred tokens, as served prompts do.
KINDS = ("code", "chat", "edit", "prose")
SHARE = {"code": 0.40, "chat": 0.20, "edit": 0.25, "prose": 0.15}

def edit_prompt(lines, rng, name):
    """'# f.py (before)\n<code>\n\n\n# f.py (after: a renamed to b)\n<code renamed>...' cut somewhere
    in the restated code (the bench's code_edit kind: the continuation copies what came before)."""
    import re
    code = "".join(lines)
    words = [w for w in set(re.findall(r"\b[a-z_][a-z0-9_]{2,}\b", code))
             if len(re.findall(r"\b" + w + r"\b", code)) >= 2 and w not in ("self", "def", "return", "import", "for", "not", "and", "None", "the")]
    if not words: return None
    old = rng.choice(sorted(words))
    new = rng.choice([old + "_new", "new_" + old, old.upper(), old[:3] + "_value", old + "s", "my_" + old])
    after = re.sub(r"\b" + old + r"\b", new, code)
    text = f"# {name} (before)\n{code}\n\n\n# {name} (after: {old} renamed to {new})\n"
    if rng.random() < 0.5:  # a second restatement, as the bench prompt's "(final)" copy
        text += f"{after}\n\n\n# {name} (final)\n"
        after = code
    cut = rng.randrange(0, max(1, len(after) // 2))
    return text + after[:cut]

_TOK = None

def _init_worker(path):
    global _TOK
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    from tokenizers import Tokenizer
    _TOK = Tokenizer.from_file(path)

def prompts_of_file(job):
    """The candidate prompts of one source file, by kind (runs in a worker process)."""
    i, f, p_max = job
    rng = random.Random(1000003 * i + 7)
    got = {k: [] for k in KINDS}
    try:
        src = open(f, encoding="utf-8").read()
    except Exception:
        return got
    if "<|" in src or max((len(x) for x in src.splitlines()), default=0) > 1000: return got
    enc = lambda text: _TOK.encode(text).ids
    lines = src.splitlines(keepends=True)
    if len(lines) > 20:
        for _ in range(3):  # a few windows per file, starting at a line, 16..p_max tokens
            s0 = rng.randrange(0, max(1, len(lines) - 10))
            ids = enc("".join(lines[s0:s0 + 80]))
            m = min(len(ids), int(math.exp(rng.uniform(math.log(16), math.log(p_max)))))
            if m >= 16: got["code"].append(ids[:m])
        if rng.random() < 0.5:
            # a file's top too: completion prompts often start there (imports, then the first class),
            # and windows at random lines almost never do
            ids = enc("".join(lines[:80]))
            m = min(len(ids), int(math.exp(rng.uniform(math.log(16), math.log(p_max)))))
            if m >= 16: got["code"].append(ids[:m])
        s0 = rng.randrange(0, max(1, len(lines) - 10))
        text = edit_prompt(lines[s0:s0 + rng.randrange(4, 15)], rng, os.path.basename(f))
        if text:
            ids = enc(text)
            if 24 <= len(ids) <= p_max: got["edit"].append(ids)
    try:
        tree = ast.parse(src)
    except Exception:
        return got
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.ClassDef)) or not ast.get_docstring(node): continue
        paras = [p.replace("\n", " ").strip() for p in ast.get_docstring(node).split("\n\n")]
        doc = paras[0]
        if isinstance(node, ast.FunctionDef) and 16 <= len(doc) <= 320 and len(got["chat"]) < 4:
            sig = f"{node.name}({', '.join(a.arg for a in node.args.args)})"
            text = (f"<|im_start|>user\nWrite a Python function `{sig}` that {doc[0].lower() + doc[1:]}"
                    f"<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n")
            ids = enc(text)
            if len(ids) <= p_max: got["chat"].append(ids)
        if len(got["prose"]) < 3:
            # the opening words of a paragraph of English (plain text, no template)
            for p in paras:
                if len(p) >= 120 and p[0].isupper() and p.count(" ") > 15 and not any(c in p for c in "=>{}[]`"):
                    ids = enc(p)
                    if len(ids) >= 8: got["prose"].append(ids[:rng.randrange(8, min(len(ids), 64) + 1)])
                    break
    return got

def make_prompts(n, p_max):
    """n prompts of at most p_max tokens: (ids, kind) pairs. The files are read by a pool of
    processes (parsing and tokenizing 19k files takes a minute on one core)."""
    try:
        import tokenizers  # noqa: F401
    except ImportError:
        tokenizers = None
    if args.smoke or tokenizers is None:
        rng = random.Random(1)
        return [([rng.randrange(0, 8179) for _ in range(rng.randrange(8, p_max))], KINDS[i % 4]) for i in range(n)], \
            "random ids (smoke)"
    import multiprocessing as mp, site
    roots = [r for r in site.getsitepackages() if os.path.isdir(r)]
    files = sorted(f for r in roots for f in glob.glob(os.path.join(r, "**", "*.py"), recursive=True)
                   if "test" not in f.lower() and os.path.getsize(f) < 200_000)
    rng = random.Random(2)
    rng.shuffle(files)
    want = {k: int(n * SHARE[k]) for k in KINDS}
    got = {k: [] for k in KINDS}
    used = 0
    with mp.get_context("fork").Pool(max(1, min(16, (os.cpu_count() or 2) - 1)), _init_worker,
                                     (os.path.join(args.target, "tokenizer.json"),)) as pool:
        for part in pool.imap(prompts_of_file, [(i, f, p_max) for i, f in enumerate(files)], chunksize=32):
            used += 1
            for k in KINDS:
                if len(got[k]) < want[k]: got[k] += part[k][:want[k] - len(got[k])]
            if all(len(got[k]) >= want[k] for k in KINDS): break
        pool.terminate()
    prompts = [(ids, k) for k in KINDS for ids in got[k]]
    rng.shuffle(prompts)
    return prompts, ", ".join(f"{len(got[k])} {k}" for k in KINDS) + f" prompts from {used} of {len(files)} files"

# ---------------------------------------------------------------- data: greedy continuations
P_MAX = 64 if args.smoke else args.prompt_max
gen_batch = 16 if args.smoke else args.gen_batch
n_prompts = 64 if args.smoke else args.prompts
have_data = bool(args.data) and os.path.exists(args.data)
prompts, how = ([], f"from {args.data}") if have_data else make_prompts(n_prompts, P_MAX)
log(f"device {dev} ({torch.cuda.get_device_name() if dev == 'cuda' else 'cpu'}), torch {torch.__version__}; prompts: {how}")
if prompts and "smoke" not in how:  # one prompt of each kind, as text
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(args.target, "tokenizer.json"))
    for k in KINDS:
        example = next((ids for ids, kind in prompts if kind == k), None)
        if example: log(f"  {k}: {tok.decode(example)[-240:]!r}")
gen_len = 24 if args.smoke else args.gen_len
WIDTH = P_MAX + gen_len

def generate_data():
    seqs, valid, kinds = [], [], []
    t_gen = time.time()
    for b in range(0, len(prompts), gen_batch):
        # sort by length inside each slice to limit padding
        chunk = sorted(prompts[b:b + gen_batch], key=lambda x: len(x[0]))
        ids, ok = generate([x[0] for x in chunk], gen_len)
        # pad every batch to one width (left) so that all sequences stack
        pad = WIDTH - ids.shape[1]
        ids = F.pad(ids, (pad, 0), value=8179); ok = F.pad(ok, (pad, 0), value=False)
        # labels stop after the first EOS of the continuation
        cont = ids[:, WIDTH - gen_len:]
        is_eos = (cont == 8181) | (cont == 8179)
        after = (is_eos.long().cumsum(1) - is_eos.long()) > 0
        ok[:, WIDTH - gen_len:] &= ~after
        seqs.append(ids.cpu()); valid.append(ok.cpu()); kinds += [KINDS.index(x[1]) for x in chunk]
        if time.time() - t_gen > (20 if args.smoke else args.gen_seconds): break
    seqs, valid, kinds = torch.cat(seqs), torch.cat(valid), np.array(kinds)
    log(f"generated {seqs.shape[0]} sequences x {gen_len} greedy tokens in {time.time() - t_gen:.1f}s "
        f"({seqs.shape[0] * gen_len / (time.time() - t_gen):.0f} tok/s)")
    return seqs, valid, kinds

if have_data:
    seqs, valid, kinds = torch.load(args.data)
    kinds = np.array(kinds)
    log(f"loaded {seqs.shape[0]} sequences from {args.data}")
else:
    seqs, valid, kinds = generate_data()
    if args.data:  # written whole, then renamed: a run waiting for the file never reads half of it
        torch.save((seqs, valid, kinds.tolist()), args.data + ".part")
        os.replace(args.data + ".part", args.data)
N_SEQ = seqs.shape[0]
GEN0 = WIDTH - gen_len  # first generated position (the same in every row)
n_eval = max(8, N_SEQ // 50)
# the held-out rows: every kind, interleaved (the batches above are in random kind order)
perm = np.random.default_rng(3).permutation(N_SEQ)
seqs, valid, kinds = seqs[perm], valid[perm], kinds[perm]
log(f"{N_SEQ} sequences, {n_eval} held out for evaluation")

# ---------------------------------------------------------------- the drafter
DL = args.layers
def init_drafter():
    Wd = {}
    # layers start as copies of the target's last layers (any init works; this one converges faster)
    for i in range(DL):
        src = f"model.layers.{L - DL + i}."
        for k, v in W.items():
            if k.startswith(src): Wd[f"layers.{i}." + k[len(src):]] = v.clone()
    Wd["fc.weight"] = torch.randn(D, D * len(LAYER_IDS), device=dev) * (1.0 / math.sqrt(D * len(LAYER_IDS)))
    Wd["hidden_norm.weight"] = torch.ones(D, device=dev)
    Wd["norm.weight"] = W["model.norm.weight"].clone()
    if args.init:
        Wd = {k: v.to(dev) for k, v in load_st(os.path.join(args.init, "model.safetensors")).items()}
    return {k: torch.nn.Parameter(v.float()) for k, v in Wd.items()}

def features(ids, ok):
    with torch.no_grad():
        pos = (ok.long().cumsum(1) - 1).clamp(min=0)
        _, feats = target_forward(ids, pos, ok, None, 0, collect=set(LAYER_IDS))
        return torch.cat(feats, -1), pos  # layer order = LAYER_IDS order (sorted ascending)

# Training reads every sequence's features from one bf16 copy made up front: the drafter's autocast
# rounds them to bf16 before its first matmul anyway, and the target's f32 forward was the larger
# part of a training step. Evaluation recomputes them in f32, as the engine has them.
FEAT = None
if dev == "cuda" and not args.smoke and not args.no_feature_cache:
    need = N_SEQ * WIDTH * D * len(LAYER_IDS) * 2
    free = torch.cuda.mem_get_info()[0]
    if need + 8e9 < free:
        t_feat = time.time()
        FEAT = torch.empty(N_SEQ, WIDTH, D * len(LAYER_IDS), dtype=torch.bfloat16, device=dev)
        for b in range(0, N_SEQ, 64):
            FEAT[b:b + 64] = features(seqs[b:b + 64].to(dev), valid[b:b + 64].to(dev))[0].to(torch.bfloat16)
        log(f"features of {N_SEQ} sequences cached ({need / 1e9:.1f} GB) in {time.time() - t_feat:.1f}s")
    else:
        log(f"features recomputed every step: {need / 1e9:.1f} GB do not fit beside the {free / 1e9:.1f} GB free")

N_ANCH = 4 if args.smoke else args.anchors
def batch_of(rows, rng, cached=True):
    ids = seqs[rows].to(dev); ok = valid[rows].to(dev)
    if cached and FEAT is not None:
        ctx, pos = FEAT[torch.from_numpy(rows).to(dev)], (ok.long().cumsum(1) - 1).clamp(min=0)
    else:
        ctx, pos = features(ids, ok)
    # anchors: the bonus token of a step is at a position >= GEN0 (the first generated token)
    hi = WIDTH - BLK
    anchors = torch.stack([torch.from_numpy(rng.choice(np.arange(GEN0, hi + 1), N_ANCH, replace=False))
                           for _ in rows]).to(dev)
    # absolute positions: shift by each row's padding (RoPE only sees differences, but keep them exact)
    apos = pos.gather(1, anchors)                 # absolute position of each anchor
    block_ids = torch.full((len(rows), N_ANCH * BLK), MASK, dtype=torch.long, device=dev)
    block_ids[:, ::BLK] = ids.gather(1, anchors)
    tgt_idx = (anchors[:, :, None] + torch.arange(BLK, device=dev)).reshape(len(rows), -1)
    labels = ids.gather(1, tgt_idx)
    lab_ok = ok.gather(1, tgt_idx)
    lab_ok = lab_ok.view(len(rows), N_ANCH, BLK).cummin(2).values.view(len(rows), -1)  # stop at the first invalid
    return ctx, ok, pos, anchors, apos, block_ids, labels, lab_ok

def drafter_forward_pos(Wd, ctx, ok, pos, anchors, apos, block_ids):
    """ctx [B,S,n·D] the target's features at sequence indices 0..S-1 (positions pos, left padding not
    ok); anchors [B,N] indices of the anchors, apos their positions; block_ids [B,N·BLK] = per block
    [x_anchor, MASK x (BLK-1)]. Block j's rows see the context before its anchor and every row of
    block j (bidirectional). Returns the normed final hidden [B,N·BLK,D]."""
    B, S, _ = ctx.shape
    N = anchors.shape[1]; R = N * BLK
    c = rms(ctx @ Wd["fc.weight"].T, Wd["hidden_norm.weight"])
    h = E[block_ids].to(c.dtype)
    qpos = (apos[:, :, None] + torch.arange(BLK, device=dev)).reshape(B, R)
    kpos = torch.cat([pos, qpos], 1)
    blk = torch.arange(N, device=dev).repeat_interleave(BLK)
    see_ctx = (torch.arange(S, device=dev)[None, None, :] < anchors.repeat_interleave(BLK, 1)[:, :, None]) & ok[:, None, :]
    see_blk = (blk[:, None] == blk[None, :])[None].expand(B, -1, -1)
    mask = torch.cat([see_ctx, see_blk], 2)[:, None]
    for i in range(DL):
        pfx = f"layers.{i}."
        hn = rms(h, Wd[pfx + "input_layernorm.weight"])
        q = (hn @ Wd[pfx + "self_attn.q_proj.weight"].T).view(B, R, H, HD).transpose(1, 2)
        kin = torch.cat([c, hn], 1)
        k = (kin @ Wd[pfx + "self_attn.k_proj.weight"].T).view(B, S + R, KV, HD).transpose(1, 2)
        v = (kin @ Wd[pfx + "self_attn.v_proj.weight"].T).view(B, S + R, KV, HD).transpose(1, 2)
        q = rope(rms(q, Wd[pfx + "self_attn.q_norm.weight"]), qpos)
        k = rope(rms(k, Wd[pfx + "self_attn.k_norm.weight"]), kpos)
        o = attend(q, k, v, mask).transpose(1, 2).reshape(B, R, H * HD)
        h = h + o @ Wd[pfx + "self_attn.o_proj.weight"].T
        h = h + mlp(rms(h, Wd[pfx + "post_attention_layernorm.weight"]), Wd, pfx)
    return rms(h, Wd["norm.weight"])

KW = torch.tensor([0.0] + [math.exp(-(k - 1) / args.gamma) for k in range(1, BLK)], device=dev)

def loss_and_acc(Wd, batch):
    ctx, ok, pos, anchors, apos, block_ids, labels, lab_ok = batch
    hn = drafter_forward_pos(Wd, ctx, ok, pos, anchors, apos, block_ids)
    B, R, _ = hn.shape
    w = KW.repeat(R // BLK)[None].expand(B, R) * lab_ok.float()
    sel = w > 0
    logits = hn[sel] @ E.T.to(hn.dtype)
    ce = F.cross_entropy(logits.float(), labels[sel], reduction="none")
    loss = (ce * w[sel]).sum() / w[sel].sum()
    hit = torch.zeros(B, R, dtype=torch.bool, device=dev)
    hit[sel] = logits.argmax(-1) == labels[sel]
    return loss, hit.view(B, -1, BLK), lab_ok.view(B, -1, BLK)

def accepted_length(hit, lab_ok):
    """Mean accepted length of a greedy chain (1 + leading matches of positions 1..BLK-1) over blocks
    whose labels are all valid, and the per-position acceptance conditional on the earlier ones."""
    full = lab_ok.all(-1)
    h = hit[..., 1:][full]
    lead = h.long().cumprod(-1)
    tau = 1 + lead.sum(-1).float().mean().item()
    cond = []
    for k in range(BLK - 1):
        prev = lead[:, k - 1] if k else torch.ones_like(lead[:, 0])
        cond.append((lead[:, k].sum() / prev.sum().clamp(min=1)).item())
    return tau, cond, int(full.sum())

# ---------------------------------------------------------------- training
Wd = init_drafter()
opt = torch.optim.AdamW(list(Wd.values()), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.01)
rng = np.random.default_rng(0)
train_rows = np.arange(n_eval, N_SEQ)
eval_rows = np.arange(0, n_eval)
bs = 4 if args.smoke else args.batch
# the run must end (evaluated and saved) within --deadline of start-up: keep 45 s for that
budget = min(args.seconds, 20) if args.smoke else min(args.seconds, args.deadline - (time.time() - T0) - 45)
warm = 20 if args.smoke else 200
step, t_train, t20 = 0, time.time(), 0.0
est_steps = None
use_amp = dev == "cuda"
while True:
    el = time.time() - t_train
    if el > budget: break
    if step == 20: t20 = el
    if step == 100: est_steps = 100 + int((budget - el) / ((el - t20) / 80))  # cosine length from the measured speed
    total = est_steps or 10**9
    lr = args.lr * min(1.0, (step + 1) / warm) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, step / total))))
    for g in opt.param_groups: g["lr"] = lr
    rows = rng.choice(train_rows, bs, replace=False)
    batch = batch_of(rows, rng)
    with (torch.autocast("cuda", dtype=torch.bfloat16) if use_amp else contextlib.nullcontext()):
        loss, hit, lab_ok = loss_and_acc(Wd, batch)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(list(Wd.values()), 1.0)
    opt.step()
    if step % (5 if args.smoke else 250) == 0:
        tau, cond, _ = accepted_length(hit, lab_ok)
        log(f"step {step} lr {lr:.2e} loss {loss.item():.4f} train tau {tau:.3f}")
    step += 1
log(f"trained {step} steps of {bs} sequences x {N_ANCH} blocks in {time.time() - t_train:.1f}s")

# ---------------------------------------------------------------- evaluation on held-out continuations
# with the weights as saved (bf16), in float32 as the engine computes
Wq = {k: v.detach().to(torch.bfloat16).float() for k, v in Wd.items()}
with torch.no_grad():
    hits, oks = [], []
    erng = np.random.default_rng(1)
    for b in range(0, n_eval, bs):
        rows = eval_rows[b:b + bs]
        batch = batch_of(rows, erng, cached=False)
        _, hit, lab_ok = loss_and_acc(Wq, batch)
        hits.append(hit); oks.append(lab_ok)
    hits, oks = torch.cat(hits), torch.cat(oks)
    tau, cond, nb = accepted_length(hits, oks)
    by_kind = {}
    for i, k in enumerate(KINDS):
        sel = torch.from_numpy(kinds[eval_rows] == i).to(dev)
        if sel.any(): by_kind[k] = accepted_length(hits[sel], oks[sel])[0]
log(f"held-out: {nb} blocks of {BLK}, greedy chain mean accepted length {tau:.3f}; per position "
    + " ".join(f"{c:.3f}" for c in cond) + "; by kind " + " ".join(f"{k} {v:.3f}" for k, v in by_kind.items()))

@torch.no_grad()
def engine_chains(prompt, n_new):
    """What the engine's greedy DFlash chains at k = BLK - 1 accept on `prompt`: every step anchored
    at the last committed token, its context every committed position's features (as
    tools/dflash_reference.py computes it); also the every-anchor mean."""
    ids, ok = generate([prompt], n_new)
    pos = torch.arange(ids.shape[1], device=dev)[None]
    _, feats = target_forward(ids, pos, ok, None, 0, collect=set(LAYER_IDS))
    ctx = torch.cat(feats, -1)
    seq = ids[0].tolist()
    P, k = len(prompt), BLK - 1
    def drafts(anchor_list):
        a = torch.tensor([anchor_list], device=dev)
        bid = torch.full((1, len(anchor_list) * BLK), MASK, dtype=torch.long, device=dev)
        bid[:, ::BLK] = ids.gather(1, a)
        hn = drafter_forward_pos(Wq, ctx, ok, pos, a, a, bid)
        return (hn @ E.T).argmax(-1).view(len(anchor_list), BLK)[:, 1:].tolist()
    def accepted(anchor, d):
        n = 0
        while n < k and d[n] == seq[anchor + 1 + n]: n += 1
        return n
    steps, acc, n = 0, 0, P
    while n + 1 + k <= len(seq) - 1:
        a = accepted(n, drafts([n])[0]); steps += 1; acc += a; n += a + 1
    every = list(range(P, len(seq) - k))
    ev = [accepted(t, d) for t, d in zip(every, drafts(every))]
    return 1 + acc / steps, 1 + sum(ev) / len(ev), steps

bench = {}
for f in [x for x in args.eval_ids.split(",") if x]:
    prompt = [int(x) for x in open(f).read().split()]
    chain, every, steps = engine_chains(prompt, args.eval_len)
    name = os.path.basename(f).rsplit(".", 1)[0]
    bench[name] = {"chain_tokens_per_step": chain, "every_anchor": every, "steps": steps}
    log(f"{name} ({len(prompt)} prompt tokens, {args.eval_len} greedy): engine chains {chain:.3f} tokens/step over {steps} steps; "
        f"every anchor {every:.3f}")

# ---------------------------------------------------------------- save the z-lab layout
dcfg = {k: cfg[k] for k in ("attention_bias", "attention_dropout", "bos_token_id", "eos_token_id", "head_dim",
                            "hidden_act", "hidden_size", "initializer_range", "intermediate_size",
                            "max_position_embeddings", "model_type", "num_attention_heads", "num_key_value_heads",
                            "rms_norm_eps", "rope_theta", "vocab_size")}
dcfg.update({"architectures": ["DFlashDraftModel"], "auto_map": {"AutoModel": "dflash.DFlashDraftModel"},
             "block_size": BLK, "dflash_config": {"mask_token_id": MASK, "target_layer_ids": LAYER_IDS},
             "dtype": "bfloat16", "layer_types": ["full_attention"] * DL, "max_window_layers": DL,
             "num_hidden_layers": DL, "num_target_layers": L, "rope_scaling": None, "sliding_window": None,
             "tie_word_embeddings": False, "use_cache": True, "use_sliding_window": False})
json.dump(dcfg, open(os.path.join(args.out, "config.json"), "w"), indent=2)
save_st_bf16(os.path.join(args.out, "model.safetensors"), {k: v.detach() for k, v in Wd.items()})
json.dump({"held_out_tau": tau, "per_position": cond, "held_out_by_kind": by_kind, "bench_prompts": bench,
           "blocks": nb, "steps": step, "sequences": N_SEQ, "gen_len": gen_len, "block": BLK, "gamma": args.gamma,
           "target_layer_ids": LAYER_IDS, "layers": DL, "args": vars(args)},
          open(os.path.join(args.out, "metrics.json"), "w"), indent=1)
log("saved", args.out, f"{os.path.getsize(os.path.join(args.out, 'model.safetensors'))} bytes")
