#!/usr/bin/python3
"""The harness against a real `tachyon serve` on the demo model (which the harness starts and stops itself):
a tiny chat and completions workload at 1 and 2 clients must pass the usage check, with the token count
confirmed through logprobs, and a prompt longer than the demo model's 4096-token context must be skipped
cleanly. Asserts on counts and structure only, never on time.

    /usr/bin/python3 tests/bench_harness/test_live_tachyon.py --tachyon build/tachyon
"""
import argparse
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, '..', '..'))
sys.path.insert(0, os.path.join(ROOT, 'bench', 'serve'))
import serve_bench  # noqa: E402

WORKLOADS = [
    {'name': 'tiny_chat', 'api': 'chat', 'max_tokens': 12, 'max_concurrency': 2, 'tag': 'first_message',
     'items': [{'id': 'add', 'messages': [{'role': 'user', 'content': 'Write a Python function `add(a, b)`.'}]},
               {'id': 'rev', 'messages': [{'role': 'user', 'content': 'Reverse a list in Python.'}]}]},
    {'name': 'tiny_completion', 'api': 'completions', 'max_tokens': 12, 'max_concurrency': 2, 'tag': 'first_message',
     'tag_format': '# {tag}\n', 'items': [{'id': 'fib', 'prompt': 'def fibonacci(n):\n'},
                                          {'id': 'sq', 'prompt': 'def square(x):\n'}]},
    {'name': 'over_context', 'api': 'chat', 'max_tokens': 8, 'max_concurrency': 2, 'tag': 'first_message',
     'items': [{'id': 'long', 'messages': [{'role': 'user', 'content': 'lorem ipsum dolor ' * 3000}]}]},
]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--tachyon', required=True)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        wdir = os.path.join(tmp, 'workloads')
        os.makedirs(wdir)
        for w in WORKLOADS:
            with open(os.path.join(wdir, w['name'] + '.json'), 'w') as f:
                json.dump(w, f)
        code = serve_bench.main(['run', '--model', os.path.join(ROOT, 'models', 'tachyon-demo'),
                                 '--tachyon', args.tachyon, '--workload-dir', wdir, '--levels', '1,2', '--runs', '1',
                                 '--out-dir', tmp, '--name', 'live', '--no-plots', '--fail-on-usage-mismatch'])
        assert code == 0, f'harness exited {code} (3: usage check failed)'
        with open(os.path.join(tmp, 'live.json')) as f:
            result = json.load(f)
    by = {w['name']: w for w in result['workloads']}
    assert result['engine']['name'] == 'tachyon' and result['model'] == 'tachyon-demo', result['engine']
    assert result['usage_ok'], [w['usage_problems'] for w in result['workloads']]
    for name in ('tiny_chat', 'tiny_completion'):
        w = by[name]
        assert w['skipped'] is None, w['skipped']
        tc = w['token_count_check']
        assert tc['checked'] and tc['ok'], tc
        for level in ('1', '2'):
            runs = w['levels'][level]['runs']
            assert len(runs) == 1 and len(runs[0]['requests']) == int(level), (name, level, runs)
            assert runs[0]['errors'] == [], runs[0]['errors']
            f = w['levels'][level]['figures']
            assert 0 < f['completion_tokens'] <= 12 and f['prompt_tokens'] > 0, f
            assert f['ttft_ms'] > 0 and f['output_tps'] > 0, f
    assert 'context length' in by['over_context']['skipped'], by['over_context']
    print('live harness test passed')


if __name__ == '__main__':
    main()
