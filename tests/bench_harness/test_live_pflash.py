#!/usr/bin/python3
"""The harness's retrieval workload (bench/workloads/retrieval_2k.json, ~3.3k-token prompts) against a real
`tachyon serve --pflash always` on the demo model (attention scorer: the demo drafter): every request must be
compressed (usage.prompt_tokens_details.dropped_tokens > 0, computed tokens at most about the keep ratio), pass the
usage check, and the workload's recall must be recorded. Asserts on counts and structure only, never on time.

    /usr/bin/python3 tests/bench_harness/test_live_pflash.py --tachyon build/tachyon
"""
import argparse
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, '..', '..'))
sys.path.insert(0, os.path.join(ROOT, 'bench', 'serve'))
import protocol  # noqa: E402
import serve_bench  # noqa: E402

KEEP = 0.2


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--tachyon', required=True)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        code = serve_bench.main(['run', '--model', os.path.join(ROOT, 'models', 'tachyon-demo'),
                                 '--tachyon', args.tachyon, '--workloads', 'retrieval_2k', '--levels', '2',
                                 '--runs', '1', '--max-tokens', '8', '--out-dir', tmp, '--name', 'pflash',
                                 '--no-plots', '--fail-on-usage-mismatch',
                                 '--server-args', f'--pflash always --pflash-keep {KEEP} --no-pld'])
        assert code == 0, f'harness exited {code} (3: usage check failed)'
        with open(os.path.join(tmp, 'pflash.json')) as f:
            result = json.load(f)
    assert result['usage_ok'], [w['usage_problems'] for w in result['workloads']]
    (w,) = result['workloads']
    assert w['name'] == 'retrieval_2k' and w['skipped'] is None, w
    level = w['levels']['2']
    assert level['figures']['recall'] is not None, level['figures']
    fields = protocol.REQUEST_FIELDS
    rows = [dict(zip(fields, r)) for run in level['runs'] for r in run['requests']]
    assert len(rows) == 2, rows
    for r in rows:
        assert r['dropped_tokens'] and r['dropped_tokens'] > 0, r  # compression engaged
        kept = r['prompt_tokens'] - r['dropped_tokens']
        assert kept <= KEEP * r['prompt_tokens'], r  # the budget (sink, tail and run-on tokens included)
    print('live PFlash harness test passed')


if __name__ == '__main__':
    main()
