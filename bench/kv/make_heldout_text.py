#!/usr/bin/env python3
"""Held-out Python text for the KV quality benchmark (bench/kv/kv_quality.cpp).

The demo model's card (models/tachyon-demo/MODEL_CARD.md, "Corpus") holds out every Python file
whose SHA-256 (of its UTF-8 text, BOM stripped, CRLF -> LF) has int(hex[:8], 16) % 100 == 0, and
trains on no such file. Its own held-out files came from the training machine's site-packages,
which this machine does not have; the same rule applied to this machine's Python sources picks
files the model cannot have trained on, with the card's filters (<= 200 KB, no tests, no *_pb2,
no line over 1000 characters, no added-token strings). Writes a JSON array of file texts,
sorted by hash, up to --max-chars characters.

  python3 bench/kv/make_heldout_text.py --out bench/kv/heldout_python.json
"""
import argparse
import hashlib
import json
import os
import sys
import sysconfig

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>", "<tool_call>", "</tool_call>"]


def candidates(roots):
    for root in roots:
        for dirpath, dirnames, files in os.walk(root):
            dirnames[:] = [d for d in dirnames if d not in ("test", "tests", "testing", "__pycache__")]
            for f in files:
                if not f.endswith(".py") or f.startswith("test_") or f.endswith("_test.py"):
                    continue
                if f.endswith("_pb2.py") or f.endswith("_pb2_grpc.py"):
                    continue
                p = os.path.join(dirpath, f)
                try:
                    if 0 < os.path.getsize(p) <= 200_000:
                        yield p
                except OSError:
                    pass


def read(path):
    try:
        text = open(path, "rb").read().decode("utf-8")
    except Exception:
        return None
    text = text.lstrip("\ufeff").replace("\r\n", "\n")
    if "\x00" in text or not text.strip() or max(len(l) for l in text.split("\n")) > 1000:
        return None
    if any(s in text for s in SPECIAL):
        return None
    return text


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--max-chars", type=int, default=160_000)
    args = ap.parse_args()
    roots = sorted({sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["purelib"]} | set(p for p in sys.path if p.endswith("-packages")))
    held = {}
    for p in candidates(r for r in roots if os.path.isdir(r)):
        text = read(p)
        if text is None:
            continue
        h = hashlib.sha256(text.encode("utf-8")).hexdigest()
        if int(h[:8], 16) % 100 == 0:
            held.setdefault(h, text)
    docs, total = [], 0
    for h in sorted(held):
        if total >= args.max_chars:
            break
        docs.append(held[h][: args.max_chars - total])
        total += len(docs[-1])
    json.dump(docs, open(args.out, "w"))
    print(f"{len(held)} held-out files found, {len(docs)} written ({total} characters) to {args.out}")


if __name__ == "__main__":
    main()
