"""Unit tests of the serving benchmark harness (bench/serve): medians, token counting, the usage check against
a fake server that lies, context refusals, reports. No assertion depends on wall-clock time.

    /usr/bin/python3 -m unittest discover -s tests/bench_harness -p 'test_*.py'
"""
import json
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, '..', '..'))
sys.path.insert(0, os.path.join(ROOT, 'bench', 'serve'))
sys.path.insert(0, HERE)

import client  # noqa: E402
import protocol  # noqa: E402
import report  # noqa: E402
import serve_bench  # noqa: E402
from fake_server import FakeServer  # noqa: E402

CHAT = {'name': 'tiny_chat', 'api': 'chat', 'max_tokens': 4, 'max_concurrency': 4, 'tag': 'first_message',
        'items': [{'id': f'q{i}', 'messages': [{'role': 'user', 'content': f'question {i}'}]} for i in range(3)]}
COMPLETION = {'name': 'tiny_completion', 'api': 'completions', 'max_tokens': 4, 'max_concurrency': 4,
              'tag': 'first_message', 'tag_format': '# {tag}\n', 'items': [{'id': 'p', 'prompt': 'def f():\n'}]}


def quiet(_):
    pass


def record(**over):
    rec = {'status': 200, 'error': None, 'ttft_s': 0.5, 'last_output_s': 2.5, 'e2e_s': 2.6, 'finish_reason': 'stop',
           'num_output_chunks': 5, 'num_logprobs': 0, 'text': 'the answer is 42',
           'usage': {'prompt_tokens': 100, 'completion_tokens': 5, 'total_tokens': 105}}
    rec.update(over)
    return rec


class Medians(unittest.TestCase):
    def test_odd_even_none(self):
        self.assertEqual(protocol.median([3, 1, 2]), 2)
        self.assertEqual(protocol.median([4, 1, 2, 3]), 2.5)
        self.assertEqual(protocol.median([None, 7, None]), 7)
        self.assertIsNone(protocol.median([]))
        self.assertIsNone(protocol.median([None]))


class RequestFigures(unittest.TestCase):
    def test_decode_counts_tokens_after_the_first(self):
        row, problems = protocol.request_figures(record(), {'id': 'x'}, 16)
        self.assertEqual(problems, [])
        self.assertEqual(row['decode_tps'], 4 / 2.0)  # 4 tokens after the first over 2 s
        self.assertEqual(row['ttft_ms'], 500)
        self.assertEqual(row['prompt_tokens'], 100)
        self.assertIsNone(row['correct'])

    def test_single_token_has_no_decode_rate(self):
        rec = record(num_output_chunks=1, last_output_s=0.5,
                     usage={'prompt_tokens': 3, 'completion_tokens': 1, 'total_tokens': 4})
        self.assertIsNone(protocol.request_figures(rec, {}, 16)[0]['decode_tps'])

    def test_recall_matches_answer_case_insensitively(self):
        self.assertTrue(protocol.request_figures(record(text='Code: 12-AB'), {'answer': '12-ab'}, 16)[0]['correct'])
        self.assertFalse(protocol.request_figures(record(text='no idea'), {'answer': '12-ab'}, 16)[0]['correct'])


class UsageCheck(unittest.TestCase):
    def test_consistent_usage_passes(self):
        self.assertEqual(protocol.check_usage(record(), 16), [])
        # several tokens per chunk (speculative decoding) is fine: chunks <= tokens
        self.assertEqual(protocol.check_usage(record(num_output_chunks=2), 16), [])

    def test_each_lie_is_caught(self):
        cases = {
            'no usage': record(usage=None),
            'chunks carried text': record(num_output_chunks=9),
            'total_tokens': record(usage={'prompt_tokens': 100, 'completion_tokens': 5, 'total_tokens': 99}),
            '> max_tokens': record(usage={'prompt_tokens': 100, 'completion_tokens': 20, 'total_tokens': 120}),
            'finish_reason "length"': record(finish_reason='length'),
            'prompt_tokens = 0': record(usage={'prompt_tokens': 0, 'completion_tokens': 5, 'total_tokens': 5}),
            'cached_tokens': record(usage={'prompt_tokens': 10, 'completion_tokens': 5, 'total_tokens': 15,
                                           'prompt_tokens_details': {'cached_tokens': 11}}),
        }
        for expected, rec in cases.items():
            problems = protocol.check_usage(rec, 16)
            self.assertTrue(any(expected in p for p in problems), f'{expected}: {problems}')


    def test_logprob_count_allows_only_a_counted_stop_token(self):
        self.assertTrue(protocol.token_count_verdict(10, 10, 'length')['ok'])
        self.assertTrue(protocol.token_count_verdict(10, 11, 'stop')['ok'])  # the stop token, without a logprob
        self.assertFalse(protocol.token_count_verdict(10, 11, 'length')['ok'])
        self.assertFalse(protocol.token_count_verdict(10, 12, 'stop')['ok'])
        self.assertFalse(protocol.token_count_verdict(10, 9, 'stop')['ok'])


class Requests(unittest.TestCase):
    def test_tag_placement(self):
        w = dict(CHAT, system='SYS', tag='last_user')
        _, body = protocol.build_request(w, w['items'][0], 'T', 'm', 4)
        self.assertEqual(body['messages'][0], {'role': 'system', 'content': 'SYS'})  # shared prefix untouched
        self.assertTrue(body['messages'][1]['content'].startswith('[bench request T]'))
        w['tag'] = 'first_message'
        _, body = protocol.build_request(w, w['items'][0], 'T', 'm', 4)
        self.assertTrue(body['messages'][0]['content'].startswith('[bench request T]'))
        self.assertEqual(CHAT['items'][0]['messages'][0]['content'], 'question 0')  # items not mutated
        path, body = protocol.build_request(COMPLETION, COMPLETION['items'][0], 'T', 'm', 4)
        self.assertEqual((path, body['prompt']), ('/v1/completions', '# T\ndef f():\n'))
        self.assertEqual((body['temperature'], body['stream'], body['stream_options']), (0, True, {'include_usage': True}))

    def test_haystack_needle_lands_between_sentences(self):
        words = 'One two. Three four. Five six.'.split()
        prompt = protocol.haystack_prompt(words, {'depth': 0.5, 'needle': 'NEEDLE.', 'question': 'Q?'})
        self.assertIn('One two. Three four. NEEDLE. Five six.', prompt)
        self.assertTrue(prompt.endswith('Q?'))

    def test_committed_workloads_load_and_build(self):
        workloads = protocol.load_workloads(os.path.join(ROOT, 'bench', 'workloads'))
        names = [w['name'] for w in workloads]
        for name in ['code_completion', 'code_edit', 'chat_prose', 'agent_loop', 'repeated_prefix', 'retrieval_4k',
                     'retrieval_16k', 'retrieval_32k']:
            self.assertIn(name, names)
        for w in workloads:
            self.assertGreaterEqual(len(w['items']), 8, w['name'])
            for item in w['items']:
                protocol.build_request(w, item, 't', 'm', w['max_tokens'])

    def test_generator_is_deterministic(self):
        import gen_workloads
        with tempfile.TemporaryDirectory() as out:
            sys.argv = ['gen_workloads.py', '--out', out]
            gen_workloads.main()
            for f in sorted(os.listdir(out)):
                with open(os.path.join(out, f)) as a, open(os.path.join(ROOT, 'bench', 'workloads', f)) as b:
                    self.assertEqual(a.read(), b.read(), f'{f} differs from the committed workload')


class AgainstFakeServer(unittest.TestCase):
    def test_stream_is_counted(self):
        with FakeServer(num_tokens=6) as server:
            path, body = protocol.build_request(CHAT, CHAT['items'][0], 't', 'fake-model', 16)
            rec = client.stream_request(server.url + '/v1', path, body)
        self.assertEqual((rec['status'], rec['error']), (200, None))
        self.assertEqual(rec['num_output_chunks'], 6)
        self.assertEqual(rec['text'], ''.join(f'tok{i} ' for i in range(6)))
        self.assertEqual(rec['usage']['completion_tokens'], 6)
        self.assertEqual(rec['finish_reason'], 'stop')
        self.assertLessEqual(rec['ttft_s'], rec['last_output_s'])

    def test_honest_server_passes(self):
        with FakeServer(num_tokens=6) as server:
            for w in (CHAT, COMPLETION):
                out = protocol.run_workload(server.url, w, [1, 2], 2, 'fake-model', log=quiet)
                self.assertEqual(out['usage_problems'], [], w['name'])
                self.assertEqual(out['token_count_check'], {'checked': True, 'logprob_tokens': 4,
                                                            'completion_tokens': 4, 'finish_reason': 'length',
                                                            'ok': True})
                level = out['levels']['2']
                self.assertEqual(len(level['runs']), 2)
                self.assertEqual(len(level['runs'][0]['requests']), 2)
                self.assertEqual(level['figures']['completion_tokens'], 4)  # max_tokens 4 < 6 streamed
        # warm-up + 2 runs at each of 2 levels (1 + 2 requests each) + 1 logprob verification, per workload
        self.assertEqual(len(server.bodies), 2 * (3 * 1 + 3 * 2 + 1))
        tags = [b['messages'][0]['content'].split(']')[0] for b in server.bodies if 'messages' in b]
        self.assertEqual(len(tags), len(set(tags)), 'every request carries its own tag')

    def test_overcounting_server_is_flagged(self):
        with FakeServer(num_tokens=3, completion_lie=+2) as server:  # stops early, claims two tokens more
            out = protocol.run_workload(server.url, CHAT, [1], 1, 'fake-model', log=quiet)
        self.assertTrue(any('counted through logprobs' in p for p in out['usage_problems']), out['usage_problems'])
        with FakeServer(num_tokens=6, completion_lie=+2) as server:  # hits max_tokens, claims more
            out = protocol.run_workload(server.url, CHAT, [1], 1, 'fake-model', log=quiet)
        self.assertTrue(any('> max_tokens' in p for p in out['usage_problems']), out['usage_problems'])

    def test_undercounting_server_is_flagged(self):
        with FakeServer(num_tokens=6, completion_lie=-2) as server:
            out = protocol.run_workload(server.url, COMPLETION, [1], 1, 'fake-model', log=quiet)
        self.assertTrue(any('streamed chunks carried text' in p for p in out['usage_problems']), out['usage_problems'])
        result = fake_result(out)
        self.assertIn('USAGE CHECK FAILED', report.result_markdown(result))
        self.assertIn('inconsistent', report.readme_section(result, 'x'))

    def test_missing_usage_is_flagged(self):
        with FakeServer(include_usage=False) as server:
            out = protocol.run_workload(server.url, CHAT, [1], 1, 'fake-model', log=quiet)
        self.assertTrue(any('no usage' in p for p in out['usage_problems']))

    def test_prompt_over_context_is_skipped_not_fatal(self):
        long = dict(CHAT, name='too_long', items=[{'id': 'x', 'messages': [{'role': 'user', 'content': 'x' * 500}]}])
        with FakeServer(max_prompt_chars=200) as server:
            out = protocol.run_workload(server.url, long, [1, 2], 1, 'fake-model', log=quiet)
            ok = protocol.run_workload(server.url, CHAT, [1], 1, 'fake-model', log=quiet)
        self.assertIn('maximum context length', out['skipped'])
        self.assertEqual(out['levels'], {})
        self.assertIsNone(ok['skipped'])
        self.assertIn('too_long', report.result_markdown(fake_result(out, ok)))

    def test_levels_above_max_concurrency_are_skipped(self):
        with FakeServer() as server:
            out = protocol.run_workload(server.url, CHAT, [1, 8], 1, 'fake-model', log=quiet)
        self.assertIn('figures', out['levels']['1'])
        self.assertIn('skipped', out['levels']['8'])

    def test_over_cap_runs_those_levels_with_a_tag_per_request(self):
        with FakeServer() as server:
            out = protocol.run_workload(server.url, CHAT, [8], 1, 'fake-model', log=quiet, over_cap=True)
            bodies = list(server.bodies)
        self.assertIn('figures', out['levels']['8'])
        self.assertEqual(out['levels']['8']['errors'], 0)
        # 8 clients on 3 items: the items repeat, but every request of a run carries its own tag.
        measured = [b['messages'][0]['content'] for b in bodies if '[bench request r1c8s' in b['messages'][0]['content']]
        self.assertEqual(len(measured), 8)
        self.assertEqual(len(set(measured)), 8)

    def test_cli_run_compare_readme(self):
        with tempfile.TemporaryDirectory() as tmp, FakeServer() as server:
            wdir = os.path.join(tmp, 'workloads')
            os.makedirs(wdir)
            for w in (CHAT, COMPLETION):
                with open(os.path.join(wdir, w['name'] + '.json'), 'w') as f:
                    json.dump(w, f)
            common = ['--url', server.url, '--workload-dir', wdir, '--levels', '1,2', '--runs', '1',
                      '--out-dir', tmp, '--no-plots', '--fail-on-usage-mismatch']
            self.assertEqual(serve_bench.main(['run', *common, '--name', 'a']), 0)
            self.assertEqual(serve_bench.main(['run', *common, '--name', 'b']), 0)
            with open(os.path.join(tmp, 'a.json')) as f:
                result = json.load(f)
            self.assertEqual(result['engine']['name'], 'fake')
            self.assertEqual(result['model'], 'fake-model')
            self.assertTrue(result['usage_ok'])
            self.assertEqual([w['name'] for w in result['workloads']], ['tiny_chat', 'tiny_completion'])
            with open(os.path.join(tmp, 'a.md')) as f:
                self.assertIn('| tiny_chat | 2 |', f.read())
            self.assertEqual(serve_bench.main(['compare', os.path.join(tmp, 'a.json'), os.path.join(tmp, 'b.json'),
                                               '--out-dir', tmp, '--name', 'ab', '--no-plots']), 0)
            with open(os.path.join(tmp, 'ab.md')) as f:
                self.assertIn('| tiny_completion | 1 |', f.read())
            readme = os.path.join(tmp, 'README.md')
            with open(readme, 'w') as f:
                f.write('# x\n\n## Measured performance\n\nhand-written.\n\n## Developer notes\n\nnotes\n')
            for _ in range(2):  # the second rewrite replaces the section instead of adding another
                serve_bench.main(['readme', os.path.join(tmp, 'a.json'), '--readme', readme])
            with open(readme) as f:
                text = f.read()
            self.assertEqual(text.count(report.README_BEGIN), 1)
            self.assertLess(text.index('hand-written'), text.index(report.README_BEGIN))
            self.assertLess(text.index(report.README_END), text.index('## Developer notes'))

        with tempfile.TemporaryDirectory() as tmp, FakeServer(completion_lie=-3) as server:
            wdir = os.path.join(tmp, 'workloads')
            os.makedirs(wdir)
            with open(os.path.join(wdir, 'c.json'), 'w') as f:
                json.dump(CHAT, f)
            code = serve_bench.main(['run', '--url', server.url, '--workload-dir', wdir, '--levels', '1', '--runs', '1',
                                     '--out-dir', tmp, '--no-plots', '--fail-on-usage-mismatch', '--name', 'liar'])
            self.assertEqual(code, 3)

    def test_plots_are_written(self):
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            self.skipTest('python3-matplotlib not installed')
        import plots
        with FakeServer() as server:
            result = fake_result(protocol.run_workload(server.url, CHAT, [1, 2], 1, 'fake-model', log=quiet))
        with tempfile.TemporaryDirectory() as tmp:
            for fn in (plots.plot_throughput, plots.plot_ttft):
                path = os.path.join(tmp, fn.__name__ + '.png')
                fn([result, result], path)
                with open(path, 'rb') as f:
                    self.assertEqual(f.read(8), b'\x89PNG\r\n\x1a\n')


def fake_result(*workloads):
    return {'engine': {'name': 'fake', 'version': '0'}, 'model': 'fake-model', 'started': 'now', 'note': None,
            'machine': {'cpu': 'cpu', 'cpus': 1, 'memory_gib': 1, 'gpus': [], 'loadavg_start': 0, 'loadavg_end': 0},
            'protocol': {'runs': 1, 'warmup_runs': 1}, 'workloads': list(workloads)}


if __name__ == '__main__':
    unittest.main()
