#!/usr/bin/env python3
"""Soak test: many concurrent streaming clients against one `tachyon serve` for minutes, a share
of them hanging up mid-stream, over the mixed workloads (OpenAI chat and completions, Responses,
Anthropic messages, tool calls, JSON mode; prompt-lookup speculation on, as served by default).

    python3 bench/soak/soak.py --tachyon build/tachyon --model models/tachyon-demo \\
        --clients 64 --minutes 10 --record bench/results/soak-<commit>.md

It starts the server itself and passes when, at the end:
  - no server error: no 5xx, no error event or broken stream on a request the client read to the end;
  - the server's RSS grew by at most 2% from the end of the first minute (warm-up) to the end;
  - every KV block is free and nothing is queued or running (/metrics);
  - every request is accounted: the engine's started = finished + cancelled, none failed, and the
    HTTP counters of the generation routes count exactly the requests the clients sent.
The table (and the RSS samples) go to stdout and, with --record, to a Markdown file.
"""
import argparse
import http.client
import json
import os
import random
import re
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from memory_map import KINDS, rss_by_kind  # noqa: E402

WORKLOADS = ["chat", "completions", "responses", "anthropic", "tools", "json"]
ROUTES = {"chat": "/v1/chat/completions", "completions": "/v1/completions", "responses": "/v1/responses",
          "anthropic": "/v1/messages", "tools": "/v1/chat/completions", "json": "/v1/chat/completions"}
WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
TOPICS = ["the sea", "a small robot", "prime numbers", "Paris in winter", "a lost key", "compilers", "tea",
          "the moon landing", "a cat named Rust", "binary trees"]


def body_of(kind, rng, model):
    topic = rng.choice(TOPICS)
    max_tokens = rng.randint(16, 160)
    # A repeated list makes prompt-lookup speculation draft (and be verified) often.
    repeat = rng.random() < 0.4
    text = (f"Repeat this list twice: {', '.join(rng.sample(TOPICS, 5))}." if repeat else f"Tell me about {topic}.")
    messages = [{"role": "user", "content": text}]
    if kind == "chat":
        return {"model": model, "messages": messages, "max_tokens": max_tokens, "stream": True,
                "temperature": rng.choice([0, 0.7, 1.0])}
    if kind == "completions":
        return {"model": model, "prompt": text + "\n", "max_tokens": max_tokens, "stream": True,
                "temperature": rng.choice([0, 0.8])}
    if kind == "responses":
        return {"model": model, "input": text, "max_output_tokens": max_tokens, "stream": True}
    if kind == "anthropic":
        return {"model": model, "max_tokens": max_tokens, "messages": messages, "stream": True}
    if kind == "tools":
        return {"model": model, "max_tokens": max_tokens, "stream": True, "tools": [WEATHER_TOOL],
                "messages": [{"role": "user", "content": f"What is the weather in {rng.choice(['Oslo', 'Lima', 'Pune'])}?"}]}
    return {"model": model, "max_tokens": max_tokens, "stream": True, "response_format": {"type": "json_object"},
            "messages": [{"role": "user", "content": f"Give a JSON object describing {topic}."}]}


def terminal_seen(kind, text):
    if kind == "anthropic":
        return "event: message_stop" in text
    if kind == "responses":
        return "response.completed" in text or "response.incomplete" in text
    return "data: [DONE]" in text


class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.sent = {k: 0 for k in WORKLOADS}
        self.completed = 0
        self.disconnected = 0
        self.server_errors = []  # (kind, what)
        self.client_errors = []
        self.refused = 0  # 429/503: allowed, counted

    def add(self, field, value=1):
        with self.lock:
            setattr(self, field, getattr(self, field) + value)


def client_loop(idx, args, model, deadline, tally, seed):
    rng = random.Random(seed)
    while time.monotonic() < deadline:
        kind = rng.choice(WORKLOADS)
        body = json.dumps(body_of(kind, rng, model))
        hang_up_after = rng.randint(1, 12) if rng.random() < 1 / 3 else None  # chunks read before leaving
        conn = http.client.HTTPConnection("127.0.0.1", args.port, timeout=300)
        with tally.lock:
            tally.sent[kind] += 1
        try:
            conn.request("POST", ROUTES[kind], body, {"Content-Type": "application/json", "anthropic-version": "2023-06-01"})
            resp = conn.getresponse()
            if resp.status in (429, 503):
                tally.add("refused")
                resp.read()
                continue
            if resp.status >= 500:
                with tally.lock:
                    tally.server_errors.append((kind, f"HTTP {resp.status}: {resp.read()[:200]!r}"))
                continue
            if resp.status != 200:
                with tally.lock:
                    tally.client_errors.append((kind, f"HTTP {resp.status}: {resp.read()[:200]!r}"))
                continue
            text, chunks = "", 0
            while True:
                chunk = resp.read1(65536) if hasattr(resp, "read1") else resp.read(1024)
                if not chunk:
                    break
                text += chunk.decode(errors="replace")
                chunks += 1
                if hang_up_after is not None and chunks >= hang_up_after:
                    break
            if hang_up_after is not None and chunks >= hang_up_after:
                tally.add("disconnected")
            elif '"error"' in text and ('"type":"error"' in text.replace(" ", "") or "event: error" in text):
                with tally.lock:
                    tally.server_errors.append((kind, "error event: " + text[-300:]))
            elif not terminal_seen(kind, text):
                with tally.lock:
                    tally.server_errors.append((kind, "stream ended without its terminal event: " + text[-300:]))
            else:
                tally.add("completed")
        except Exception as e:  # a reset or a broken stream is a server failure
            with tally.lock:
                tally.server_errors.append((kind, f"{type(e).__name__}: {e}"))
        finally:
            conn.close()


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def keep_smaps(pid, directory, name):
    os.makedirs(directory, exist_ok=True)
    with open(f"/proc/{pid}/smaps") as src, open(os.path.join(directory, name), "w") as dst:
        dst.write(src.read())


def metrics(port):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    return text


def metric(text, name, labels=None):
    total = 0
    found = False
    for m in re.finditer(rf"^{name}(\{{[^}}]*\}})? (\S+)$", text, re.M):
        if labels and not all(f'{k}="{v}"' in (m.group(1) or "") for k, v in labels.items()):
            continue
        total += float(m.group(2))
        found = True
    if not found:
        raise KeyError(name)
    return total


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tachyon", default="build/tachyon")
    ap.add_argument("--model", default="models/tachyon-demo")
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--warmup-minutes", type=float, default=1, help="RSS growth is measured from the end of this")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--server-args", default="", help="more flags for tachyon serve")
    ap.add_argument("--record", help="append the result table to this Markdown file")
    ap.add_argument("--note", default="", help="a line recorded with the table (e.g. the machine was shared)")
    ap.add_argument("--smaps-dir", help="keep the server's /proc/PID/smaps at the end of the warm-up and at the end "
                                        "(warm.smaps, end.smaps), to tell which mappings grew")
    args = ap.parse_args()

    server = subprocess.Popen([args.tachyon, "serve", args.model, "--host", "127.0.0.1", "--port", "0",
                               "--max-concurrent", str(args.clients), *args.server_args.split()],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    log = []
    for line in server.stderr:
        log.append(line)
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
        if m:
            args.port = int(m.group(1))
            break
    else:
        sys.exit("tachyon serve did not start:\n" + "".join(log))
    threading.Thread(target=lambda: [log.append(l) for l in server.stderr], daemon=True).start()
    conn = http.client.HTTPConnection("127.0.0.1", args.port, timeout=60)
    conn.request("GET", "/v1/models")
    model = json.loads(conn.getresponse().read())["data"][0]["id"]
    conn.close()

    tally = Tally()
    start = time.monotonic()
    deadline = start + args.minutes * 60
    threads = [threading.Thread(target=client_loop, args=(i, args, model, deadline, tally, args.seed * 1000 + i))
               for i in range(args.clients)]
    for t in threads:
        t.start()
    samples = []  # (seconds, RSS KiB, RSS KiB by kind)
    kept_warm = False
    while any(t.is_alive() for t in threads):
        samples.append((time.monotonic() - start, rss_kib(server.pid), rss_by_kind(server.pid)))
        if args.smaps_dir and not kept_warm and samples[-1][0] >= args.warmup_minutes * 60:
            keep_smaps(server.pid, args.smaps_dir, "warm.smaps")
            kept_warm = True
        time.sleep(5)
    for t in threads:
        t.join()
    if server.poll() is not None:
        sys.exit(f"tachyon serve exited during the soak (code {server.returncode}); its log ends:\n" + "".join(log[-40:]))
    # Idle: nothing queued, running or in flight.
    for _ in range(600):
        text = metrics(args.port)
        if (metric(text, "tachyon_http_requests_in_flight") == 0 and metric(text, "tachyon_requests_running") == 0
                and metric(text, "tachyon_queue_depth") == 0):
            break
        time.sleep(0.1)
    samples.append((time.monotonic() - start, rss_kib(server.pid), rss_by_kind(server.pid)))
    if args.smaps_dir:
        keep_smaps(server.pid, args.smaps_dir, "end.smaps")
    text = metrics(args.port)
    server.terminate()
    exit_code = server.wait(timeout=120)

    warm = [r for s, r, _ in samples if s >= args.warmup_minutes * 60]
    rss_warm, rss_end, rss_peak = warm[0], samples[-1][1], max(warm)
    growth = (rss_end - rss_warm) / rss_warm * 100
    peak_growth = (rss_peak - rss_warm) / rss_warm * 100
    started = metric(text, "tachyon_requests_started_total")
    finished = metric(text, "tachyon_requests_finished_total")
    cancelled = metric(text, "tachyon_requests_cancelled_total")
    failed = metric(text, "tachyon_requests_failed_total")
    kv_total, kv_free = metric(text, "tachyon_kv_blocks_total"), metric(text, "tachyon_kv_blocks_free")
    sent = sum(tally.sent.values())
    http_counted = sum(metric(text, "tachyon_http_requests_total", {"route": r})
                       for r in sorted(set(ROUTES.values())))
    http_5xx = sum(metric(text, "tachyon_http_requests_total", {"route": r, "status": "5xx"})
                   for r in sorted(set(ROUTES.values())))
    checks = [
        ("server errors (5xx, error events, broken streams)", len(tally.server_errors) + int(http_5xx), "0",
         not tally.server_errors and http_5xx == 0),
        ("client errors (4xx other than 429)", len(tally.client_errors), "0", not tally.client_errors),
        ("RSS growth after the first minute (end)", f"{growth:+.2f}%", "<= 2%", growth <= 2),
        ("RSS growth after the first minute (peak)", f"{peak_growth:+.2f}%", "(reported)", True),
        ("KV blocks free at the end", f"{kv_free:.0f} / {kv_total:.0f}", "all", kv_free == kv_total),
        ("engine: started = finished + cancelled", f"{started:.0f} = {finished:.0f} + {cancelled:.0f}", "equal",
         started == finished + cancelled),
        ("engine: requests failed", f"{failed:.0f}", "0", failed == 0),
        ("HTTP requests counted / sent", f"{http_counted:.0f} / {sent}", "equal", http_counted == sent),
        ("server exit code after SIGTERM", exit_code, "0", exit_code == 0),
    ]
    ok = all(c[3] for c in checks)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    lines = [f"## Soak {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, commit {commit}",
             "",
             f"{args.clients} streaming clients for {args.minutes:g} min against `tachyon serve {args.model} "
             f"--max-concurrent {args.clients} {args.server_args}`; workloads {', '.join(WORKLOADS)} "
             f"(prompt-lookup speculation on); a third hang up after 1-12 chunks. CPU: {cpu}, {os.cpu_count()} cores."
             + (f" {args.note}" if args.note else ""),
             "",
             f"Requests sent: {sent} ({', '.join(f'{k} {v}' for k, v in tally.sent.items())}); read to the end: "
             f"{tally.completed}; hung up mid-stream: {tally.disconnected}; refused 429/503: {tally.refused}; "
             f"generated tokens: {metric(text, 'tachyon_generation_tokens_total'):.0f}; "
             f"speculative verify steps: {metric(text, 'tachyon_spec_verify_steps_total'):.0f}.",
             "",
             "| check | measured | required | pass |", "|---|---|---|---|"]
    lines += [f"| {name} | {value} | {need} | {'yes' if good else '**NO**'} |" for name, value, need, good in checks]
    # One row a minute (the sample nearest each whole minute) and the last, after the clients stopped.
    rows = [min(samples, key=lambda x: abs(x[0] - 60 * m)) for m in range(int(samples[-1][0] // 60) + 1)]
    rows = [r for i, r in enumerate(rows) if i == 0 or r[0] != rows[i - 1][0]] + [samples[-1]]
    lines += ["", "Resident memory (MiB) by kind (bench/soak/memory_map.py), each minute and at the end:", "",
              "| time | RSS | " + " | ".join(KINDS) + " |", "|---|---:|" + "---:|" * len(KINDS)]
    lines += [f"| {s / 60:.1f} min | {r / 1024:.1f} | " + " | ".join(f"{kinds[k] / 1024:.1f}" for k in KINDS) + " |"
              for s, r, kinds in rows]
    for kind, what in (tally.server_errors + tally.client_errors)[:10]:
        lines.append(f"- {kind}: {what}")
    report = "\n".join(lines) + "\n"
    print(report)
    if args.record:
        with open(args.record, "a") as f:
            f.write(report + "\n")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
