"""The benchmark protocol: workloads -> requests, runs at each concurrency level, figures, usage checks.

The same for every engine: temperature 0, each workload's fixed max_tokens, streaming with
stream_options.include_usage, a discarded warm-up run then `runs` measured runs per concurrency level, and the
median over runs of every figure. A run sends `concurrency` requests at once (distinct items of the workload),
each tagged with a string unique to (run, slot) so that no run reuses another's prompt from a prefix cache,
except where the workload puts the tag after a prefix it means to share (repeated_prefix).

Per request (from the stream): TTFT (request sent -> first output chunk), prefill tok/s (prompt tokens / TTFT),
decode tok/s (completion tokens after the first / time from the first output chunk to the last), end-to-end
tok/s (completion tokens / total time). Token counts come from the server's usage, which check_usage() tests
against what was streamed; verify_token_count() counts tokens independently through logprobs.
"""
import copy
import json
import os
import statistics
import threading
import time

import client

FIGURES = ['ttft_ms', 'prefill_tps', 'decode_tps', 'e2e_tps', 'output_tps', 'prompt_tokens', 'completion_tokens',
           'cached_tokens', 'recall']
# Columns of the compact per-request rows kept in the results file.
REQUEST_FIELDS = ['item', 'prompt_tokens', 'completion_tokens', 'cached_tokens', 'ttft_ms', 'decode_tps', 'e2e_s',
                  'num_output_chunks', 'finish_reason', 'correct', 'dropped_tokens']


def median(values):
    """Median of the values that are not None; None when there are none."""
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def load_workloads(directory, names=None):
    """The workloads in `directory` (all, or those named, in the order named), haystacks resolved."""
    files = sorted(f for f in os.listdir(directory) if f.endswith('.json'))
    workloads = {}
    for f in files:
        with open(os.path.join(directory, f)) as fh:
            w = json.load(fh)
        if 'haystack' in w:
            with open(os.path.join(directory, w['haystack']['file'])) as fh:
                w['haystack_words'] = fh.read().split()[:w['haystack']['words']]
        workloads[w['name']] = w
    if names:
        missing = [n for n in names if n not in workloads]
        if missing:
            raise SystemExit(f'unknown workload(s) {", ".join(missing)}; have {", ".join(workloads)}')
        return [workloads[n] for n in names]
    order = ['code_completion', 'code_edit', 'chat_prose', 'agent_loop', 'repeated_prefix', 'repeated_prefix_cold']
    return sorted(workloads.values(), key=lambda w: (order.index(w['name']) if w['name'] in order else len(order),
                                                     w.get('nominal_prompt_tokens', 0), w['name']))


def haystack_prompt(words, item):
    """The haystack with the item's needle after the sentence nearest its depth, then the question."""
    cut = int(len(words) * item['depth'])
    while cut < len(words) and not words[cut - 1].endswith('.'):
        cut += 1
    text = ' '.join(words[:cut] + [item['needle']] + words[cut:])
    return f'Read the following notes.\n\n{text}\n\n{item["question"]}'


def build_request(workload, item, tag, model, max_tokens):
    """(path, body) of one streamed request; `tag` is placed where the workload says."""
    tag_text = workload.get('tag_format', '[bench request {tag}]\n').format(tag=tag)
    body = {'model': model, 'stream': True, 'stream_options': {'include_usage': True}, 'max_tokens': max_tokens,
            'temperature': 0}
    if workload['api'] == 'completions':
        body['prompt'] = tag_text + item['prompt']
        return '/v1/completions', body
    messages = copy.deepcopy(item.get('messages', []))
    if 'needle' in item:
        messages = [{'role': 'user', 'content': haystack_prompt(workload['haystack_words'], item)}]
    if workload.get('system'):
        messages.insert(0, {'role': 'system', 'content': workload['system']})
    if workload.get('tag', 'first_message') == 'last_user':
        target = [m for m in messages if m['role'] == 'user'][-1]
    else:
        target = messages[0]
    target['content'] = tag_text + (target['content'] or '')
    body['messages'] = messages
    if workload.get('tools'):
        body['tools'] = workload['tools']
    return '/v1/chat/completions', body


def check_usage(rec, max_tokens):
    """Problems with the usage the server reported for one successful request (empty list: consistent)."""
    usage = rec.get('usage')
    if not usage:
        return ['no usage in the stream (stream_options.include_usage ignored)']
    problems = []
    prompt, completion = usage.get('prompt_tokens'), usage.get('completion_tokens')
    if not isinstance(prompt, int) or not isinstance(completion, int):
        return [f'usage lacks integer prompt_tokens/completion_tokens: {json.dumps(usage)}']
    if prompt <= 0:
        problems.append(f'prompt_tokens = {prompt} for a non-empty prompt')
    if usage.get('total_tokens') is not None and usage['total_tokens'] != prompt + completion:
        problems.append(f'total_tokens {usage["total_tokens"]} != prompt {prompt} + completion {completion}')
    if completion > max_tokens:
        problems.append(f'completion_tokens {completion} > max_tokens {max_tokens}')
    if rec.get('finish_reason') == 'length' and completion != max_tokens:
        problems.append(f'finish_reason "length" but completion_tokens {completion} != max_tokens {max_tokens}')
    if rec['num_output_chunks'] > completion:
        problems.append(f'{rec["num_output_chunks"]} streamed chunks carried text but completion_tokens = {completion}')
    cached = (usage.get('prompt_tokens_details') or {}).get('cached_tokens')
    if isinstance(cached, int) and not 0 <= cached <= prompt:
        problems.append(f'cached_tokens {cached} outside [0, prompt_tokens {prompt}]')
    return problems


def request_figures(rec, item, max_tokens):
    """The per-request row (REQUEST_FIELDS) plus its usage problems."""
    usage = rec.get('usage') or {}
    prompt = usage.get('prompt_tokens')
    completion = usage.get('completion_tokens')
    ttft = rec['ttft_s']
    decode = None
    if completion and completion > 1 and ttft is not None and rec['last_output_s'] > ttft:
        decode = (completion - 1) / (rec['last_output_s'] - ttft)
    correct = None
    if 'answer' in item:
        correct = item['answer'].lower() in rec['text'].lower()
    row = {'item': item.get('id'), 'prompt_tokens': prompt, 'completion_tokens': completion,
           'cached_tokens': (usage.get('prompt_tokens_details') or {}).get('cached_tokens'),
           # tachyon's PFlash: prompt tokens compression dropped (None from servers that do not say)
           'dropped_tokens': (usage.get('prompt_tokens_details') or {}).get('dropped_tokens'),
           'ttft_ms': None if ttft is None else ttft * 1e3, 'decode_tps': decode, 'e2e_s': rec['e2e_s'],
           'num_output_chunks': rec['num_output_chunks'], 'finish_reason': rec['finish_reason'], 'correct': correct}
    return row, check_usage(rec, max_tokens)


def run_once(base_url, workload, concurrency, run_index, model, max_tokens, api_key=None, send=None):
    """One run: `concurrency` requests at once. Returns {figures, requests, errors, usage_problems}."""
    send = send or client.stream_request
    items = workload['items']
    results = [None] * concurrency
    gate = threading.Barrier(concurrency)

    def worker(slot):
        item = items[(run_index * concurrency + slot) % len(items)]
        path, body = build_request(workload, item, f'r{run_index}c{concurrency}s{slot}', model, max_tokens)
        gate.wait()
        start = time.perf_counter()
        rec = send(base_url, path, body, api_key=api_key)
        results[slot] = (item, rec, start)

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rows, errors, problems = [], [], []
    for item, rec, _ in results:
        if rec['status'] != 200 or rec['error']:
            errors.append({'status': rec['status'], 'error': rec['error']})
            continue
        row, bad = request_figures(rec, item, max_tokens)
        rows.append(row)
        problems += [f'{item.get("id")}: {p}' for p in bad]
    wall = max(s + r['e2e_s'] for _, r, s in results) - min(s for _, _, s in results)
    total_out = sum(r['completion_tokens'] or 0 for r in rows)
    figures = {
        'ttft_ms': median(r['ttft_ms'] for r in rows),
        'prefill_tps': median(r['prompt_tokens'] / (r['ttft_ms'] / 1e3) if r['prompt_tokens'] and r['ttft_ms']
                              else None for r in rows),
        'decode_tps': median(r['decode_tps'] for r in rows),
        'e2e_tps': median(r['completion_tokens'] / r['e2e_s'] if r['completion_tokens'] else None for r in rows),
        'output_tps': total_out / wall if rows and wall > 0 else None,
        'prompt_tokens': median(r['prompt_tokens'] for r in rows),
        'completion_tokens': median(r['completion_tokens'] for r in rows),
        'cached_tokens': median(r['cached_tokens'] for r in rows),
        'recall': (sum(bool(r['correct']) for r in rows) / len(rows)
                   if rows and rows[0]['correct'] is not None else None),
    }
    return {'figures': figures, 'wall_s': wall, 'requests': [[r[f] for f in REQUEST_FIELDS] for r in rows],
            'errors': errors, 'usage_problems': problems}


def context_refusal(run):
    """The server's message when every request of a run was refused with a 400 (prompt too long for it)."""
    if run['requests'] or not run['errors']:
        return None
    if all(e['status'] == 400 for e in run['errors']):
        return run['errors'][0]['error']
    return None


def verify_token_count(base_url, workload, model, max_tokens, api_key=None, send=None):
    """Counts the generated tokens independently of usage: one untimed request with logprobs on, where every
    token carries one logprob entry. Returns {checked, logprob_tokens, completion_tokens, ok} or why not."""
    send = send or client.stream_request
    path, body = build_request(workload, workload['items'][0], 'verify', model, max_tokens)
    body['logprobs'] = True if workload['api'] == 'chat' else 1
    rec = send(base_url, path, body, api_key=api_key)
    if rec['status'] != 200 or rec['error']:
        return {'checked': False, 'why': f'logprobs request failed: {rec["status"]} {rec["error"]}'}
    completion = (rec.get('usage') or {}).get('completion_tokens')
    if not rec['num_logprobs']:
        return {'checked': False, 'why': 'the server returned no logprobs'}
    return token_count_verdict(rec['num_logprobs'], completion, rec['finish_reason'])


def token_count_verdict(logprob_tokens, completion_tokens, finish_reason):
    """usage.completion_tokens must equal the logprob count, except that a request ended by the model's stop
    token may count that token in usage without a logprob entry for it (it has no text; vLLM lists it, tachyon
    does not)."""
    ok = completion_tokens == logprob_tokens or (finish_reason == 'stop' and completion_tokens == logprob_tokens + 1)
    return {'checked': True, 'logprob_tokens': logprob_tokens, 'completion_tokens': completion_tokens,
            'finish_reason': finish_reason, 'ok': ok}


def run_workload(base_url, workload, levels, runs, model, max_tokens=None, api_key=None, send=None, log=print,
                 over_cap=False):
    """Every concurrency level of one workload: warm-up + `runs` measured runs each, figures = medians.
    Levels above the workload's max_concurrency are skipped unless `over_cap` (its items then repeat within a
    run, each request still with a tag of its own, so none is served from another's prefix)."""
    max_tokens = max_tokens or workload['max_tokens']
    out = {'name': workload['name'], 'api': workload['api'], 'description': workload.get('description', ''),
           'max_tokens': max_tokens, 'levels': {}, 'usage_problems': [], 'skipped': None}
    for c in levels:
        if c > workload.get('max_concurrency', c) and not over_cap:
            out['levels'][str(c)] = {'skipped': f'above the workload\'s max_concurrency {workload["max_concurrency"]}'}
            continue
        warm = run_once(base_url, workload, c, 0, model, max_tokens, api_key, send)
        refusal = context_refusal(warm)
        if refusal:
            out['skipped'] = f'server refused the prompt (HTTP 400): {refusal}'
            log(f'  {workload["name"]}: skipped: {out["skipped"]}')
            break
        measured = [run_once(base_url, workload, c, i + 1, model, max_tokens, api_key, send) for i in range(runs)]
        figures = {f: median(r['figures'][f] for r in measured) for f in FIGURES}
        for r in [warm] + measured:
            out['usage_problems'] += r['usage_problems']
        out['levels'][str(c)] = {'figures': figures, 'runs': measured,
                                 'errors': sum(len(r['errors']) for r in measured)}
        log(f'  {workload["name"]} c={c}: TTFT {fmt(figures["ttft_ms"])} ms, decode {fmt(figures["decode_tps"])} '
            f'tok/s, total {fmt(figures["output_tps"])} tok/s'
            + (f', recall {figures["recall"]:.2f}' if figures['recall'] is not None else '')
            + (f', {out["levels"][str(c)]["errors"]} errors' if out['levels'][str(c)]['errors'] else ''))
    if not out['skipped']:
        out['token_count_check'] = verify_token_count(base_url, workload, model, max_tokens, api_key, send)
        tc = out['token_count_check']
        if tc['checked'] and not tc['ok']:
            out['usage_problems'].append(f'usage.completion_tokens {tc["completion_tokens"]} != '
                                         f'{tc["logprob_tokens"]} tokens counted through logprobs')
    return out


def fmt(value, digits=1):
    return '-' if value is None else f'{value:.{digits}f}'
