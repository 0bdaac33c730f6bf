#!/usr/bin/python3
"""The issue-49 targets of the two caches, one run each, through `tachyon serve` over HTTP:

  response   a response-cache hit on the demo model: time to the last byte of a repeated greedy
             request (non-streamed and streamed, one kept-alive connection), median and p90 of
             --repeats hits, against the first (computed) answer. Target: <= 5 ms.
  restart    a repeated long prompt (--prompt-tokens, default 8192) after a server restart with
             --prefix-cache-dir: TTFT of the first server (cold: nothing cached) against the TTFT
             of a second server started on the same folder (the prompt's KV read from disk), and,
             for reference, a repeat on the first server (memory prefix cache). Target: restart
             TTFT <= 1/20 of cold. The demo model's context is 4096, so the run uses the demo
             weights with max_position_embeddings raised (a folder of links and an edited
             config.json): the same work per token, a context long enough for the prompt.

  /usr/bin/python3 bench/serve/cache_bench.py --tachyon build/tachyon [--out bench/results/caches-cpu-COMMIT.md]

Standard library only. The disk files of the restart are fresh in the page cache, as after a
server restart (not a reboot).
"""
import argparse
import http.client
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DEMO = os.path.join(ROOT, "models", "tachyon-demo")


class Server:
    def __init__(self, tachyon, model_dir, flags):
        self.proc = subprocess.Popen([tachyon, "serve", model_dir, "--host", "127.0.0.1", "--port", "0", *flags],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.log = ""
        deadline = time.time() + 300
        while time.time() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                raise RuntimeError(f"tachyon serve exited:\n{self.log}")
            self.log += line
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                return
        raise RuntimeError("tachyon serve did not start")

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        _, rest = self.proc.communicate(timeout=300)
        self.log += rest
        return self.log

    def metric(self, name):
        c = http.client.HTTPConnection("127.0.0.1", self.port)
        c.request("GET", "/metrics")
        text = c.getresponse().read().decode()
        m = re.search(rf"^{name}\{{[^}}]*\}} (\d+)", text, re.M)
        return int(m.group(1)) if m else None


def post(conn, route, body, stream=False):
    """(seconds to the first body byte of a streamed answer or None, seconds to the last byte, bytes)."""
    start = time.perf_counter()
    conn.request("POST", route, json.dumps(body), {"content-type": "application/json"})
    r = conn.getresponse()
    first = None
    data = b""
    while True:
        chunk = r.read1(65536) if stream else r.read()
        if not chunk:
            break
        if first is None and stream and b'"text"' in chunk or first is None and stream and b'"content"' in chunk:
            first = time.perf_counter() - start
        data += chunk
        if not stream:
            break
    if r.status != 200:
        raise RuntimeError(f"{route}: {r.status} {data[:400]!r}")
    return first, time.perf_counter() - start, data


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def bench_response(tachyon, repeats):
    server = Server(tachyon, DEMO, ["--response-cache", "64M", "--kv-blocks", "1024"])
    try:
        conn = http.client.HTTPConnection("127.0.0.1", server.port)
        body = {"model": "tachyon-demo", "temperature": 0, "max_tokens": 128,
                "messages": [{"role": "user", "content": "Write a Python class for a binary search tree with insert, "
                                                          "delete and an in-order traversal."}]}
        rows = {}
        for stream in (False, True):
            b = dict(body, stream=stream)
            if stream:
                b["stream_options"] = {"include_usage": True}
                b["messages"] = [{"role": "user", "content": body["messages"][0]["content"] + " Add docstrings."}]
            _, miss, data = post(conn, "/v1/chat/completions", b, stream)
            hits = []
            for _ in range(repeats):
                _, t, again = post(conn, "/v1/chat/completions", b, stream)
                hits.append(t)
            assert b'"cached_response":true' in again, again[-400:]
            rows["streamed" if stream else "non-streamed"] = dict(
                miss_ms=miss * 1e3, hit_median_ms=statistics.median(hits) * 1e3, hit_p90_ms=pct(hits, 90) * 1e3,
                bytes=len(again))
        rows["metrics"] = dict(hits=server.metric("tachyon_response_cache_hits_total"),
                               misses=server.metric("tachyon_response_cache_misses_total"))
        return rows
    finally:
        server.stop()


def long_context_demo(folder, context):
    os.makedirs(folder, exist_ok=True)
    for name in os.listdir(DEMO):
        if name != "config.json" and not name.startswith("drafter"):
            os.symlink(os.path.join(DEMO, name), os.path.join(folder, name))
    with open(os.path.join(DEMO, "config.json")) as f:
        config = json.load(f)
    config["max_position_embeddings"] = context
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    return config["vocab_size"]


def ttft(server, prompt):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=3600)
    body = {"model": "m", "prompt": prompt, "max_tokens": 1, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}}
    first, total, data = post(conn, "/v1/completions", body, stream=True)
    usage = json.loads([line for line in data.decode().split("\n") if '"usage":{' in line][-1][6:])["usage"]
    return (first if first is not None else total), usage


def bench_restart(tachyon, prompt_tokens):
    work = tempfile.mkdtemp(prefix="tachyon-cache-bench-")
    try:
        model = os.path.join(work, "model")
        vocab = long_context_demo(model, max(2 * prompt_tokens, 4096))
        rng = random.Random(49)
        prompt = [rng.randrange(100, vocab) for _ in range(prompt_tokens)]
        flags = ["--served-model-name", "m", "--prefix-cache-dir", os.path.join(work, "kv"), "--ctx-size",
                 str(prompt_tokens + 64), "--kv-blocks", str(prompt_tokens // 16 * 2 + 64), "--no-pld",
                 "--no-drafter", "--no-mtp"]
        first = Server(tachyon, model, flags)
        cold, cold_usage = ttft(first, prompt)
        memory, memory_usage = ttft(first, prompt)
        log = first.stop()
        wrote = re.search(r"wrote (\d+) cached blocks", log)
        second = Server(tachyon, model, flags)
        try:
            warm, warm_usage = ttft(second, prompt)
            disk_hits = second.metric("tachyon_prefix_cache_disk_hit_blocks_total")
        finally:
            second.stop()
        files = sum(len(fs) for _, _, fs in os.walk(os.path.join(work, "kv")))
        disk_bytes = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(os.path.join(work, "kv")) for f in fs)
        return dict(prompt_tokens=cold_usage["prompt_tokens"], cold_s=cold, memory_repeat_s=memory,
                    restart_s=warm, cold_over_restart=cold / warm, cold_over_memory=cold / memory,
                    cached_tokens_restart=warm_usage["prompt_tokens_details"]["cached_tokens"],
                    cached_tokens_memory=memory_usage["prompt_tokens_details"]["cached_tokens"],
                    blocks_written_at_shutdown=int(wrote.group(1)) if wrote else None, disk_hit_blocks=disk_hits,
                    files=files, disk_bytes=disk_bytes)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tachyon", default=os.path.join(ROOT, "build", "tachyon"))
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--prompt-tokens", type=int, default=8192)
    ap.add_argument("--only", choices=["response", "restart"])
    ap.add_argument("--json")
    args = ap.parse_args()
    out = {}
    if args.only in (None, "response"):
        out["response"] = bench_response(args.tachyon, args.repeats)
        print(json.dumps(out["response"], indent=2), flush=True)
    if args.only in (None, "restart"):
        out["restart"] = bench_restart(args.tachyon, args.prompt_tokens)
        print(json.dumps(out["restart"], indent=2), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    sys.exit(main())
