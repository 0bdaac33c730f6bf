#!/usr/bin/python3
"""Serving benchmark: one protocol for every OpenAI-compatible engine (tachyon, llama-server, vLLM, Ollama, ...).

  run      measure a server at --url, or start `tachyon serve MODEL` itself (--model) and stop it after;
           writes bench/results/<stem>.json (every figure with its runs), <stem>.md and <stem>-*.png
  compare  two results files side by side as ratios (B / A), with both engines in the plots
  report   rewrite the table and plots of a results file
  readme   rewrite README.md's generated performance section from a results file

  /usr/bin/python3 bench/serve/serve_bench.py run --model models/tachyon-demo --tachyon build/tachyon
  /usr/bin/python3 bench/serve/serve_bench.py run --url http://127.0.0.1:8080 --engine llama.cpp
  /usr/bin/python3 bench/serve/serve_bench.py compare bench/results/A.json bench/results/B.json
  /usr/bin/python3 bench/serve/serve_bench.py readme bench/results/A.json

Protocol and figures: protocol.py. Workloads: bench/workloads/ (bench/serve/gen_workloads.py writes them).
Only the standard library is needed, plus matplotlib for the plots (skipped with a note when it is missing).
"""
import argparse
import datetime
import json
import os
import platform
import shlex
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import client  # noqa: E402
import protocol  # noqa: E402
import report  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, '..', '..'))


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


class TachyonServer:
    """`tachyon serve MODEL --host 127.0.0.1 --port P [args]`, up until /health answers, stopped on exit."""

    def __init__(self, binary, model, extra_args, timeout):
        self.port = free_port()
        self.command = [binary, 'serve', model, '--host', '127.0.0.1', '--port', str(self.port)] + extra_args
        self.log_path = os.path.join('/tmp', f'serve-bench-{os.getpid()}.log')
        self.timeout = timeout

    def __enter__(self):
        self.log = open(self.log_path, 'w')
        self.proc = subprocess.Popen(self.command, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f'server exited ({self.proc.returncode}); log: {self.log_path}\n'
                                 + open(self.log_path).read()[-2000:])
            if client.get_json(self.url, '/health', timeout=2):
                return self
            time.sleep(0.2)
        self.__exit__(None, None, None)
        raise SystemExit(f'server not healthy after {self.timeout} s; log: {self.log_path}')

    @property
    def url(self):
        return f'http://127.0.0.1:{self.port}'

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def machine_info():
    cpu = platform.processor() or platform.machine()
    try:
        with open('/proc/cpuinfo') as f:
            cpu = next(line.split(':', 1)[1].strip() for line in f if line.startswith('model name'))
    except (OSError, StopIteration):
        pass
    memory = None
    try:
        with open('/proc/meminfo') as f:
            memory = round(int(f.readline().split()[1]) / 2**20, 1)
    except (OSError, ValueError, IndexError):
        pass
    gpus = []
    try:
        out = subprocess.run(['nvidia-smi', '-L'], capture_output=True, text=True, timeout=10)
        gpus = [line.split(' (UUID')[0] for line in out.stdout.splitlines() if line.strip()]
    except (OSError, subprocess.SubprocessError):
        pass
    return {'hostname': platform.node(), 'os': platform.platform(), 'cpu': cpu, 'cpus': os.cpu_count(),
            'memory_gib': memory, 'gpus': gpus, 'loadavg_start': round(os.getloadavg()[0], 2)}


def git_commit():
    try:
        head = subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(['git', 'diff', '--quiet', 'HEAD', '--', 'src', 'CMakeLists.txt', 'cmake'],
                               cwd=ROOT).returncode != 0
        return head + ('-dirty' if dirty else '')
    except (OSError, subprocess.CalledProcessError):
        return None


def probe_engine(url, api_key):
    """(engine name, version, served model id) as far as the server says (vLLM /version, llama.cpp /props,
    Ollama /api/version, /v1/models owned_by)."""
    models = client.get_json(url, '/v1/models', api_key) or {}
    data = (models.get('data') or [{}])[0]
    version = None
    for path, key in [('/version', 'version'), ('/props', 'build_info'), ('/api/version', 'version')]:
        body = client.get_json(url, path, api_key)
        if isinstance(body, dict) and body.get(key):
            version = str(body[key])
            break
    return data.get('owned_by'), version, data.get('id'), data.get('max_model_len')


def cmd_run(args):
    levels = [int(x) for x in args.levels.split(',')]
    workloads = protocol.load_workloads(args.workload_dir, args.workloads.split(',') if args.workloads else None)
    machine = machine_info()
    started = datetime.datetime.now().astimezone().isoformat(timespec='seconds')
    server = None
    if args.model:
        server = TachyonServer(args.tachyon, args.model, shlex.split(args.server_args), args.startup_timeout)
        server.__enter__()
    try:
        url = server.url if server else args.url
        owned_by, version, model_id, max_len = probe_engine(url, args.api_key)
        model = args.model_name or model_id or 'default'
        engine = {'name': args.engine or ('tachyon' if server else owned_by or 'unknown'),
                  'version': args.engine_version or version, 'base_url': url, 'max_model_len': max_len,
                  'server_args': args.server_args,
                  'command': ' '.join(shlex.quote(c) for c in server.command) if server else None,
                  'commit': args.engine_commit or (git_commit() if server else None)}
        if server and not engine['version']:
            engine['version'] = engine['commit']
        print(f'benchmarking {engine["name"]} ({engine["version"]}) model {model} at {url}; levels {levels}, '
              f'{args.runs} runs each', flush=True)
        results = []
        for w in workloads:
            print(f'{w["name"]} ({len(w["items"])} items, max_tokens {args.max_tokens or w["max_tokens"]})', flush=True)
            results.append(protocol.run_workload(url, w, levels, args.runs, model, args.max_tokens, args.api_key,
                                                 log=lambda s: print(s, flush=True), over_cap=args.over_cap))
    finally:
        if server:
            server.__exit__(None, None, None)
    machine['loadavg_end'] = round(os.getloadavg()[0], 2)
    result = {'format': 'tachyon-serve-bench/1', 'engine': engine, 'model': model, 'started': started,
              'machine': machine, 'note': args.note,
              'protocol': {'levels': levels, 'runs': args.runs, 'warmup_runs': 1, 'temperature': 0,
                           'over_cap': args.over_cap, 'max_tokens_override': args.max_tokens, 'stream': True, 'include_usage': True},
              'request_fields': protocol.REQUEST_FIELDS, 'workloads': results,
              'usage_ok': not any(w['usage_problems'] for w in results)}
    stem = args.name or f'serve-{engine["name"]}-{model}-{engine.get("commit") or started[:16].replace(":", "")}'
    write_outputs(result, stem, args.out_dir, [result], lambda png: report.result_markdown(result, png),
                  not args.no_plots)
    if args.update_readme:
        cmd_readme(argparse.Namespace(results=os.path.join(args.out_dir, stem + '.json'), readme=args.update_readme))
    if not result['usage_ok']:
        print('WARNING: the server\'s usage numbers disagree with what it streamed (see the .md)', flush=True)
        if args.fail_on_usage_mismatch:
            return 3
    return 0


def write_outputs(result, stem, out_dir, plotted, markdown, plots):
    os.makedirs(out_dir, exist_ok=True)
    png = []
    if plots:
        try:
            import plots as plotting
            png = [f'{stem}-throughput.png', f'{stem}-ttft.png']
            plotting.plot_throughput(plotted, os.path.join(out_dir, png[0]))
            plotting.plot_ttft(plotted, os.path.join(out_dir, png[1]))
        except ImportError as e:
            print(f'no plots ({e}); install python3-matplotlib', flush=True)
            png = []
    if result is not None:
        with open(os.path.join(out_dir, stem + '.json'), 'w') as f:
            json.dump(result, f, indent=1)
            f.write('\n')
    md = markdown(png)
    with open(os.path.join(out_dir, stem + '.md'), 'w') as f:
        f.write(md)
    print(md)
    print(f'wrote {os.path.join(out_dir, stem)}.{{{"json," if result is not None else ""}md}}'
          + (f' and {len(png)} plots' if png else ''))


def load(path):
    with open(path) as f:
        return json.load(f)


def cmd_compare(args):
    a, b = load(args.a), load(args.b)
    name_a, name_b = (os.path.splitext(os.path.basename(p))[0] for p in (args.a, args.b))
    stem = args.name or f'compare-{name_a}-vs-{name_b}'
    write_outputs(None, stem, args.out_dir, [a, b],
                  lambda png: report.compare_markdown(a, b, name_a, name_b)
                  + ''.join(f'\n![{p}]({p})\n' for p in png), not args.no_plots)
    return 0


def cmd_report(args):
    result = load(args.results)
    stem = os.path.splitext(os.path.basename(args.results))[0]
    write_outputs(None, stem, os.path.dirname(os.path.abspath(args.results)), [result],
                  lambda png: report.result_markdown(result, png), not args.no_plots)
    return 0


def cmd_readme(args):
    result = load(args.results)
    stem = os.path.splitext(os.path.relpath(args.results, os.path.join(ROOT, 'bench', 'results')))[0]
    with open(args.readme) as f:
        text = f.read()
    with open(args.readme, 'w') as f:
        f.write(report.rewrite_readme(text, report.readme_section(result, stem)))
    print(f'rewrote the generated performance section of {args.readme} from {args.results}')
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest='command', required=True)
    run = sub.add_parser('run', help='measure one server')
    where = run.add_mutually_exclusive_group(required=True)
    where.add_argument('--url', help='base URL of a running OpenAI-compatible server')
    where.add_argument('--model', help='model folder: start `tachyon serve MODEL` for the run')
    run.add_argument('--tachyon', default=os.path.join(ROOT, 'build', 'tachyon'), help='tachyon binary (--model)')
    run.add_argument('--server-args', default='', help='extra `tachyon serve` flags (default: none, all defaults)')
    run.add_argument('--startup-timeout', type=float, default=120)
    run.add_argument('--engine', help='engine name for the results (default: tachyon, or /v1/models owned_by)')
    run.add_argument('--engine-version', help='engine version (default: what the server reports)')
    run.add_argument('--engine-commit', help='engine commit (default for --model runs: this tree\'s)')
    run.add_argument('--model-name', help='model name to send (default: the first of /v1/models)')
    run.add_argument('--api-key')
    run.add_argument('--workload-dir', default=os.path.join(ROOT, 'bench', 'workloads'))
    run.add_argument('--workloads', help='comma-separated workload names (default: all)')
    run.add_argument('--levels', default='1,8,32', help='concurrency levels (default 1,8,32)')
    run.add_argument('--runs', type=int, default=3, help='measured runs per level, after one warm-up (default 3)')
    run.add_argument('--over-cap', action='store_true',
                     help='run levels above a workload\'s max_concurrency too (its items repeat, tags stay distinct)')
    run.add_argument('--max-tokens', type=int, help='override every workload\'s max_tokens')
    run.add_argument('--out-dir', default=os.path.join(ROOT, 'bench', 'results'))
    run.add_argument('--name', help='file stem of the outputs (default serve-ENGINE-MODEL-COMMIT)')
    run.add_argument('--note', help='a sentence recorded with the results (e.g. "shared machine")')
    run.add_argument('--no-plots', action='store_true')
    run.add_argument('--update-readme', nargs='?', const=os.path.join(ROOT, 'README.md'), metavar='README',
                     help='then rewrite the README\'s generated performance section from this run')
    run.add_argument('--fail-on-usage-mismatch', action='store_true', help='exit 3 when the usage check fails')
    compare = sub.add_parser('compare', help='two results files side by side (B / A)')
    compare.add_argument('a')
    compare.add_argument('b')
    compare.add_argument('--out-dir', default=os.path.join(ROOT, 'bench', 'results'))
    compare.add_argument('--name')
    compare.add_argument('--no-plots', action='store_true')
    rep = sub.add_parser('report', help='rewrite the .md (and plots) of a results file')
    rep.add_argument('results')
    rep.add_argument('--no-plots', action='store_true')
    readme = sub.add_parser('readme', help='rewrite README.md\'s generated performance section')
    readme.add_argument('results')
    readme.add_argument('--readme', default=os.path.join(ROOT, 'README.md'))
    args = parser.parse_args(argv)
    return {'run': cmd_run, 'compare': cmd_compare, 'report': cmd_report, 'readme': cmd_readme}[args.command](args)


if __name__ == '__main__':
    sys.exit(main())
