#!/usr/bin/env python3
"""Builds the tokenizer benchmark corpus: >= 10 MB of mixed text, one JSON string per line
(documents of a few KB): English prose, source code, and CJK text. Deterministic: the same
machine files and seed give the same corpus.

Sources (all local, no network): prose from /usr/share/common-licenses and the Debian
package documentation under /usr/share/doc (plain-text files), code from /usr/include and
this repository's src/, CJK from a seeded generator over common Chinese, Japanese and
Korean characters with CJK punctuation, mixed with the CJK lines of the golden fixtures.

Usage: make_corpus.py OUT_FILE [TARGET_MB]
"""
import glob
import gzip
import json
import os
import random
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def read_text(path):
    try:
        if path.endswith(".gz"):
            with gzip.open(path, "rb") as f:
                data = f.read(1 << 20)
        else:
            with open(path, "rb") as f:
                data = f.read(1 << 20)
        return data.decode("utf-8")
    except (OSError, UnicodeDecodeError, EOFError):
        return None


def chunks(text, size):
    out, cur = [], []
    n = 0
    for line in text.splitlines(keepends=True):
        cur.append(line)
        n += len(line)
        if n >= size:
            out.append("".join(cur))
            cur, n = [], 0
    if cur:
        out.append("".join(cur))
    return out


def collect(paths, budget, rng):
    docs, total = [], 0
    rng.shuffle(paths)
    for p in paths:
        t = read_text(p)
        if not t or len(t) < 200:
            continue
        for c in chunks(t, 2048):
            docs.append(c)
            total += len(c.encode("utf-8"))
        if total >= budget:
            break
    return docs, total


def cjk_docs(budget, rng):
    han = [chr(c) for c in range(0x4E00, 0x4E00 + 3500)]
    kana = [chr(c) for c in range(0x3041, 0x3097)] + [chr(c) for c in range(0x30A1, 0x30FB)]
    hangul = [chr(c) for c in range(0xAC00, 0xAC00 + 2000)]
    punct = ["\u3002", "\uFF0C", "\u3001", "\uFF01", "\uFF1F", "\u300C", "\u300D", "\n"]
    fixtures = []
    for g in glob.glob(os.path.join(ROOT, "tests", "fixtures", "tokenizers", "*.golden.json")):
        for case in json.load(open(g, encoding="utf-8"))["cases"]:
            if any("\u3040" <= ch <= "\u9fff" or "\uac00" <= ch <= "\ud7a3" for ch in case["text"]):
                fixtures.append(case["text"])
    docs, total = [], 0
    while total < budget:
        parts = []
        script = rng.choice(["zh", "ja", "ko"])
        for _ in range(rng.randint(20, 60)):
            if script == "zh":
                w = "".join(rng.choice(han) for _ in range(rng.randint(1, 4)))
            elif script == "ja":
                w = "".join(rng.choice(han if rng.random() < 0.4 else kana) for _ in range(rng.randint(1, 5)))
            else:
                w = "".join(rng.choice(hangul) for _ in range(rng.randint(1, 4))) + " "
            parts.append(w)
            if rng.random() < 0.15:
                parts.append(rng.choice(punct))
            if fixtures and rng.random() < 0.02:
                parts.append(rng.choice(fixtures))
        d = "".join(parts)
        docs.append(d)
        total += len(d.encode("utf-8"))
    return docs, total


def main():
    out = sys.argv[1]
    target = float(sys.argv[2]) if len(sys.argv) > 2 else 12.0
    rng = random.Random(20261130)
    budget = int(target * 1e6)
    prose_paths = sorted(glob.glob("/usr/share/common-licenses/*") + glob.glob("/usr/share/doc/*/*.txt") +
                         glob.glob("/usr/share/doc/*/README*") + glob.glob("/usr/share/doc/*/changelog*.gz") +
                         glob.glob("/usr/share/doc/*/NEWS*"))
    code_paths = sorted(glob.glob("/usr/include/**/*.h", recursive=True) + glob.glob("/usr/include/c++/**/*", recursive=True) +
                        glob.glob(os.path.join(ROOT, "src", "**", "*.cpp"), recursive=True) +
                        glob.glob(os.path.join(ROOT, "src", "**", "*.h"), recursive=True))
    code_paths = [p for p in code_paths if os.path.isfile(p)]
    prose, p_bytes = collect(prose_paths, budget * 0.4, rng)
    code, c_bytes = collect(code_paths, budget * 0.4, rng)
    cjk, k_bytes = cjk_docs(budget * 0.2, rng)
    docs = prose + code + cjk
    rng.shuffle(docs)
    with open(out, "w", encoding="utf-8") as f:
        for d in docs:
            f.write(json.dumps(d, ensure_ascii=False) + "\n")
    total = p_bytes + c_bytes + k_bytes
    print(f"corpus: {len(docs)} documents, {total / 1e6:.1f} MB (prose {p_bytes / 1e6:.1f}, code {c_bytes / 1e6:.1f}, "
          f"CJK {k_bytes / 1e6:.1f})", file=sys.stderr)


if __name__ == "__main__":
    main()
