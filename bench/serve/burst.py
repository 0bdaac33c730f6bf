#!/usr/bin/python3
"""Connection bursts: N clients send a streaming request at the same instant, R rounds back to back.

Counts failed requests by kind and the kernel's TCP counters over the run (system-wide, from
/proc/net/netstat and /proc/net/snmp): ListenOverflows/ListenDrops (accept queue full), SyncookiesSent/
SyncookiesFailed (SYN queue full, cookie fallback), OutRsts (resets sent). This is how issue #5 (resets
at 32 clients, bench/results/serve-resets-a584a6b.md) was reproduced; it is probabilistic, the
deterministic check is tests/e2e/connection_burst.test.mjs.

  /usr/bin/python3 bench/serve/burst.py --url http://127.0.0.1:8000 --clients 32 --rounds 3
  /usr/bin/python3 bench/serve/burst.py --url http://127.0.0.1:8000 --clients 8 --rounds 7 --keep-alive
"""
import argparse
import collections
import http.client
import json
import os
import threading
import time

import client
import protocol

HERE = os.path.dirname(os.path.abspath(__file__))
COUNTERS = ['ListenOverflows', 'ListenDrops', 'SyncookiesSent', 'SyncookiesFailed', 'OutRsts']


def tcp_counters():
    """{name: value} of the TcpExt (netstat) and Tcp (snmp) counters in COUNTERS."""
    values = {}
    for path in ('/proc/net/netstat', '/proc/net/snmp'):
        lines = open(path).read().splitlines()
        for names, numbers in zip(lines[::2], lines[1::2]):
            for name, number in zip(names.split()[1:], numbers.split()[1:]):
                if name in COUNTERS:
                    values[name] = int(number)
    return values


def send_on(conn, body):
    """One streaming request on a kept-alive http.client connection (as a client that pools connections)."""
    rec = {'status': 0, 'error': None}
    try:
        conn.request('POST', '/v1/chat/completions', body=json.dumps(body), headers={'Content-Type': 'application/json'})
        res = conn.getresponse()
        rec['status'] = res.status
        data = res.read().decode('utf-8', 'replace')
        for line in data.splitlines():
            if line.startswith('data:') and '"error"' in line:
                rec['error'] = client.error_message(line[5:])
    except (OSError, http.client.HTTPException) as e:
        rec['error'] = f'{type(e).__name__}: {e}'
        conn.close()  # the next request opens a new connection
    return rec


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--url', required=True)
    ap.add_argument('--model', help='model name (default: the first of /v1/models)')
    ap.add_argument('--workload', default='repeated_prefix_cold', help='bench/workloads/NAME.json (~2k-token prompts)')
    ap.add_argument('--clients', type=int, default=32)
    ap.add_argument('--rounds', type=int, default=1)
    ap.add_argument('--max-tokens', type=int, default=64)
    ap.add_argument('--keep-alive', action='store_true', help='each client reuses one connection across rounds')
    args = ap.parse_args()
    model = args.model or client.get_json(args.url, '/v1/models')['data'][0]['id']
    workload = json.load(open(os.path.join(HERE, '..', 'workloads', args.workload + '.json')))
    _, host, port, _ = client.split_base_url(args.url)
    conns = {slot: http.client.HTTPConnection(host, port, timeout=600) for slot in range(args.clients)}
    errors, lock, num_ok, failed_after = collections.Counter(), threading.Lock(), [0], []
    before = tcp_counters()
    for rnd in range(args.rounds):
        gate = threading.Barrier(args.clients)

        def worker(slot):
            item = workload['items'][slot % len(workload['items'])]
            _, body = protocol.build_request(workload, item, f'burst{time.time_ns()}r{rnd}s{slot}', model, args.max_tokens)
            gate.wait()
            start = time.perf_counter()
            if args.keep_alive:
                rec = send_on(conns[slot], body)
            else:
                rec = client.stream_request(args.url, '/v1/chat/completions', body)
            with lock:
                if rec['status'] != 200 or rec['error']:
                    errors[f"HTTP {rec['status']}: {rec['error']}"] += 1
                    failed_after.append(round(time.perf_counter() - start, 2))
                else:
                    num_ok[0] += 1

        threads = [threading.Thread(target=worker, args=(s,)) for s in range(args.clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    after = tcp_counters()
    print(f'{num_ok[0]} ok, {sum(errors.values())} failed of {args.clients * args.rounds}')
    for error, n in errors.most_common():
        print(f'  {n}x {error}')
    if failed_after:
        print(f'  failed after (s): {sorted(failed_after)}')
    print('TCP counters over the run (system-wide): ' + ', '.join(f'{k} {after[k] - before[k]}' for k in COUNTERS))


if __name__ == '__main__':
    main()
