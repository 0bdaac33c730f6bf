#!/usr/bin/env python3
"""Keeps libFuzzer targets fuzzing on idle CPU, in rotation, and books every slice in a ledger.

    tests/fuzz/fuzz_rotation.py [--build build-asan] [--corpus build-fuzz/corpus] [--slice 300]
                                [--parallel 2] [--control .fuzz-control] [--ledger FILE] [target ...]

Each slice runs one target (at `nice -n 19`, so it only takes CPU nobody else wants) for --slice
wall seconds over its corpus <corpus>/<target>, which starts from the seed corpus of
tests/fuzz/targets.tsv and keeps every input that found new coverage. The next target is always the
one with the fewest CPU-seconds booked in the ledger so far (every run), so the hours spread evenly.

The ledger (bench/results/fuzz-ledger.tsv) gets one row per slice: the fuzzer process's own CPU
seconds (user + system from wait4's rusage, not wall time), executions, crashes (files libFuzzer
wrote to <corpus>/artifacts/<target>/ during the slice: crashes, leaks, timeouts, OOMs) and corpus
size. tests/fuzz/fuzz_ledger.py turns it into the table of bench/results/fuzz-ledger.md.

Pausing: the file given by --control is read every 10 s. "PAUSE" ends the running slices (SIGINT:
libFuzzer prints its final stats and exits; the slices are booked) and starts none until "RESUME".
The fuzzers are ended, not stopped with SIGSTOP: libFuzzer's -timeout is wall-clock, so a stopped
fuzzer would report a false timeout when continued. SIGTERM or SIGINT to this script ends and books
the running slices, then exits.
"""
import argparse
import datetime
import os
import re
import signal
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LEDGER_HEADER = "date_utc\tcommit\ttarget\twall_s\tcpu_s\texecs\tcrashes\tcorpus_files\texit\tnote\n"


def read_targets():
    targets, defaults = {}, []
    with open(os.path.join(ROOT, "tests/fuzz/targets.tsv")) as f:
        for line in f:
            if not line.strip() or line.startswith("#"):
                continue
            fields = line.rstrip("\n").split("\t")
            targets[fields[0]] = fields[1]
            if len(fields) > 2 and fields[2] == "default":
                defaults.append(fields[0])
    return targets, defaults


def booked_cpu(ledger):
    """CPU-seconds per target over every row of the ledger."""
    cpu = {}
    if os.path.exists(ledger):
        with open(ledger) as f:
            for line in f:
                fields = line.rstrip("\n").split("\t")
                if len(fields) < 5 or fields[0] == "date_utc" or line.startswith("#"):
                    continue
                cpu[fields[2]] = cpu.get(fields[2], 0.0) + float(fields[4])
    return cpu


def count_files(folder):
    return sum(len(files) for _, _, files in os.walk(folder)) if os.path.isdir(folder) else 0


# What libFuzzer writes for a finding. Its slow-unit- files are reports of wall time (over 10 s), which
# a fuzzer at nice 19 beside a build reaches on inputs that replay in well under a second (two such
# files counted as crashes on 2026-12-07); a real hang is a timeout- file (-timeout below).
FINDING_PREFIXES = ("crash-", "leak-", "timeout-", "oom-")


def count_findings(folder):
    if not os.path.isdir(folder):
        return 0
    return sum(1 for name in os.listdir(folder) if name.startswith(FINDING_PREFIXES) and not name.endswith(".log"))


def executions(log_path):
    """Executions of a slice: libFuzzer's final stats, else the last progress line's count."""
    final, last = None, None
    with open(log_path, errors="replace") as f:
        for line in f:
            m = re.match(r"stat::number_of_executed_units:\s*(\d+)", line)
            if m:
                final = int(m.group(1))
            m = re.match(r"#(\d+)\s", line)
            if m:
                last = int(m.group(1))
    return final if final is not None else (last or 0)


class Slice:
    def __init__(self, args, target, seed_dir, commit):
        self.target, self.commit = target, commit
        self.dir = os.path.join(args.corpus, target)
        self.artifacts = os.path.join(args.corpus, "artifacts", target)
        self.log = os.path.join(args.corpus, "logs", target + ".log")
        for d in (self.dir, self.artifacts, os.path.dirname(self.log)):
            os.makedirs(d, exist_ok=True)
        for name in os.listdir(os.path.join(ROOT, seed_dir)):
            dst = os.path.join(self.dir, name)
            if not os.path.exists(dst):
                with open(os.path.join(ROOT, seed_dir, name), "rb") as src, open(dst, "wb") as out:
                    out.write(src.read())
        self.crashes_before = count_findings(self.artifacts)
        binary = os.path.join(args.build, "tests", "fuzz", seed_dir.split("/")[2], target)
        cmd = ["nice", "-n", "19", binary, f"-max_total_time={args.slice}", "-timeout=25",
               "-rss_limit_mb=2048", "-print_final_stats=1", f"-artifact_prefix={self.artifacts}/",
               self.dir]
        self.start = time.time()
        with open(self.log, "w") as log:
            # nice execs the fuzzer, so the child's rusage is the fuzzer's own.
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)

    def poll(self):
        pid, status, usage = os.wait4(self.proc.pid, os.WNOHANG)
        if pid == 0:
            return None
        self.proc.returncode = os.waitstatus_to_exitcode(status)
        return usage

    def finish(self, usage, ledger, note):
        crashes = count_findings(self.artifacts) - self.crashes_before
        row = [datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M"), self.commit,
               self.target, f"{time.time() - self.start:.0f}", f"{usage.ru_utime + usage.ru_stime:.1f}",
               str(executions(self.log)), str(crashes), str(count_files(self.dir)),
               str(self.proc.returncode), note]
        with open(ledger, "a") as f:
            f.write("\t".join(row) + "\n")
        if crashes:
            os.replace(self.log, os.path.join(self.artifacts, f"crash-{int(self.start)}.log"))
        print("\t".join(row), flush=True)
        return crashes


def main():
    targets, defaults = read_targets()
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default="build-asan")
    p.add_argument("--corpus", default="build-fuzz/corpus")
    p.add_argument("--ledger", default="bench/results/fuzz-ledger.tsv")
    p.add_argument("--slice", type=int, default=300, help="wall seconds per slice")
    p.add_argument("--parallel", type=int, default=2, help="targets fuzzing at once")
    p.add_argument("--control", default=".fuzz-control", help="file holding PAUSE or RESUME")
    p.add_argument("targets", nargs="*")
    args = p.parse_args()
    os.chdir(ROOT)
    chosen = args.targets or defaults
    for t in chosen:
        if t not in targets:
            sys.exit(f"fuzz_rotation.py: unknown target {t} (known: {' '.join(targets)})")
        binary = os.path.join(args.build, "tests", "fuzz", targets[t].split("/")[2], t)
        if not os.access(binary, os.X_OK):
            sys.exit(f"fuzz_rotation.py: {binary} is missing: build it with -DTACHYON_LIBFUZZER=ON "
                     "(make test-asan's build folder)")
    if not os.path.exists(args.ledger):
        with open(args.ledger, "w") as f:
            f.write(LEDGER_HEADER)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            check=True).stdout.strip()

    running, stopping = [], []
    paused = False
    crashed = set()  # left out of the rotation until restarted: a crash is fixed before fuzzing on

    def end_all(note):
        for s in running:
            s.proc.send_signal(signal.SIGINT)
        for s in running:
            _, status, usage = os.wait4(s.proc.pid, 0)
            s.proc.returncode = os.waitstatus_to_exitcode(status)
            s.finish(usage, args.ledger, note)
        running.clear()

    def on_signal(signum, _frame):
        stopping.append(signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    while not stopping:
        try:
            with open(args.control) as f:
                word = f.read().strip().upper()
        except OSError:
            word = ""
        if word == "PAUSE" and not paused:
            paused = True
            end_all("paused")
            print("paused", flush=True)
        elif word == "RESUME" and paused:
            paused = False
            print("resumed", flush=True)
        for s in list(running):
            usage = s.poll()
            if usage is not None:
                running.remove(s)
                if s.finish(usage, args.ledger, ""):
                    crashed.add(s.target)
                    print(f"{s.target}: crashed, see {s.artifacts}; left out of the rotation", flush=True)
        if not paused:
            cpu = booked_cpu(args.ledger)
            idle = [t for t in chosen if t not in {s.target for s in running} and t not in crashed]
            while idle and len(running) < args.parallel:
                t = min(idle, key=lambda name: cpu.get(name, 0.0))
                idle.remove(t)
                running.append(Slice(args, t, targets[t], commit))
        time.sleep(10)
    end_all("stopped")


if __name__ == "__main__":
    main()
