"""One streamed OpenAI request (chat or completions) over plain http.client, timed chunk by chunk.

stream_request() never raises on HTTP or stream errors: the returned record says what happened, so one bad
request cannot stop a benchmark. Times are seconds from the moment the request was sent (time.perf_counter).

    rec = stream_request('http://127.0.0.1:8000', '/v1/chat/completions', body)
    rec['status'], rec['ttft_s'], rec['usage'], rec['num_output_chunks'], rec['text']
"""
import http.client
import json
import time
import urllib.parse


def split_base_url(base_url):
    """'http://host:8000/v1' or 'http://host:8000' -> (scheme, host, port, path prefix without /v1)."""
    url = urllib.parse.urlsplit(base_url if '://' in base_url else 'http://' + base_url)
    prefix = url.path.rstrip('/')
    if prefix.endswith('/v1'):
        prefix = prefix[:-3]
    port = url.port or (443 if url.scheme == 'https' else 80)
    return url.scheme, url.hostname, port, prefix


def connect(base_url, timeout):
    scheme, host, port, prefix = split_base_url(base_url)
    cls = http.client.HTTPSConnection if scheme == 'https' else http.client.HTTPConnection
    return cls(host, port, timeout=timeout), prefix


def get_json(base_url, path, api_key=None, timeout=10):
    """GET base_url + path; the decoded JSON body, or None on any failure (used for optional probes)."""
    try:
        conn, prefix = connect(base_url, timeout)
        conn.request('GET', prefix + path, headers=auth_headers(api_key))
        res = conn.getresponse()
        body = res.read()
        conn.close()
        return json.loads(body) if res.status == 200 else None
    except (OSError, ValueError, http.client.HTTPException):
        return None


def auth_headers(api_key):
    return {'Authorization': f'Bearer {api_key}'} if api_key else {}


def error_message(body):
    try:
        err = json.loads(body).get('error')
        if isinstance(err, dict):
            return err.get('message') or json.dumps(err)
        return str(err) if err else body[:300]
    except (ValueError, AttributeError):
        return body[:300]


def chunk_output(chunk):
    """(text carried by this chunk, whether it carries tool-call deltas, its logprob entries)."""
    choices = chunk.get('choices') or []
    if not choices:
        return '', False, 0
    choice = choices[0]
    if 'delta' in choice:  # chat
        delta = choice.get('delta') or {}
        text = (delta.get('content') or '') + (delta.get('reasoning_content') or delta.get('reasoning') or '')
        lp = (choice.get('logprobs') or {}).get('content') or []
        return text, bool(delta.get('tool_calls')), len(lp)
    lp = (choice.get('logprobs') or {}).get('tokens') or []  # completions
    return choice.get('text') or '', False, len(lp)


def stream_request(base_url, path, body, api_key=None, timeout=600, clock=time.perf_counter):
    rec = {'status': 0, 'error': None, 'ttft_s': None, 'last_output_s': None, 'e2e_s': None, 'usage': None,
           'finish_reason': None, 'num_output_chunks': 0, 'num_logprobs': 0, 'text': ''}
    pieces = []
    start = clock()
    try:
        conn, prefix = connect(base_url, timeout)
        headers = {'Content-Type': 'application/json', 'Accept': 'text/event-stream', **auth_headers(api_key)}
        conn.request('POST', prefix + path, body=json.dumps(body), headers=headers)
        res = conn.getresponse()
        rec['status'] = res.status
        if res.status != 200:
            rec['error'] = error_message(res.read().decode('utf-8', 'replace'))
            rec['e2e_s'] = clock() - start
            conn.close()
            return rec
        for raw in res:
            line = raw.decode('utf-8', 'replace').rstrip('\r\n')
            if not line.startswith('data:'):
                continue
            data = line[5:].strip()
            if data == '[DONE]':
                break
            now = clock() - start
            chunk = json.loads(data)
            if chunk.get('error'):
                rec['error'] = error_message(data)
                break
            text, tool_calls, num_logprobs = chunk_output(chunk)
            rec['num_logprobs'] += num_logprobs
            if text or tool_calls:
                if rec['ttft_s'] is None:
                    rec['ttft_s'] = now
                rec['last_output_s'] = now
            if text:
                rec['num_output_chunks'] += 1
                pieces.append(text)
            for choice in chunk.get('choices') or []:
                if choice.get('finish_reason'):
                    rec['finish_reason'] = choice['finish_reason']
            if chunk.get('usage'):
                rec['usage'] = chunk['usage']
        conn.close()
    except (OSError, ValueError, http.client.HTTPException) as e:
        rec['error'] = f'{type(e).__name__}: {e}'
    rec['e2e_s'] = clock() - start
    rec['text'] = ''.join(pieces)
    return rec
