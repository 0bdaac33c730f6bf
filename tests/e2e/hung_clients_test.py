#!/usr/bin/env python3
"""Hung clients cannot hold the server's connection threads beyond --client-timeout.

A server of its own with --client-timeout 1 and a thread pool of 17 (--http-threads 4,
--max-queue 1: max_in_flight + 16). Then:
  1. more hung connections than threads: some send nothing at all, some send headers that
     announce a body and never send it. A /health request behind them is answered once the
     server drops them, and every hung connection is closed by the server (with 30 s, the old
     fixed socket timeout, /health would not come within the 20 s this test allows: 20x the
     client timeout, far from any scheduling noise);
  2. a client that stops reading a stream (a 2 KiB receive buffer, never read): the server's
     writes block, it drops the connection after the timeout, the generation is cancelled and
     every KV block comes back (/metrics).

    python3 tests/e2e/hung_clients_test.py build/tachyon models/tachyon-demo
"""
import json
import re
import socket
import subprocess
import sys
import threading
import time

GENEROUS_S = 20.0  # bounds every wait: 20x the client timeout


def start_server(tachyon, model):
    server = subprocess.Popen(
        [tachyon, "serve", model, "--host", "127.0.0.1", "--port", "0", "--client-timeout", "1",
         "--http-threads", "4", "--max-queue", "1", "--kv-blocks", "512"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    log = []
    port = None
    for line in server.stderr:
        log.append(line)
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
        if m:
            port = int(m.group(1))
            break
    if port is None:
        sys.exit("tachyon serve did not start:\n" + "".join(log))
    threading.Thread(target=lambda: [None for _ in server.stderr], daemon=True).start()  # keep draining
    return server, port


def http_get(port, path, timeout):
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body.decode(errors="replace")


def metric(port, name):
    _, body = http_get(port, "/metrics", GENEROUS_S)
    m = re.search(rf"^{name}(?:\{{[^}}]*\}})? (\d+)", body, re.M)
    return int(m.group(1))


def closed_by_server(sock):
    """Reads until the server closes (EOF or reset); False if it is still open after GENEROUS_S."""
    sock.settimeout(GENEROUS_S)
    try:
        while sock.recv(65536):
            pass
        return True
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def hung_connections_are_dropped(port):
    hung = []
    for i in range(24):  # more than the 17 threads
        s = socket.create_connection(("127.0.0.1", port), timeout=GENEROUS_S)
        if i % 2:
            s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      b"Content-Length: 1000\r\n\r\n{\"model\":")
        hung.append(s)
    time.sleep(0.2)  # let them take the threads
    status, body = http_get(port, "/health", GENEROUS_S)
    assert status == 200, (status, body)
    still_open = [i for i, s in enumerate(hung) if not closed_by_server(s)]
    for s in hung:
        s.close()
    assert not still_open, f"connections the server did not close: {still_open}"


def reader_that_stops_is_dropped(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)  # before connecting: the window stays small
    s.connect(("127.0.0.1", port))
    body = json.dumps({"model": "", "stream": True, "max_tokens": 4000, "temperature": 0,
                       "logit_bias": {"8179": -100, "8181": -100},
                       "messages": [{"role": "user", "content": "Write a long Python module."}]}).encode()
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    # Never read. The generation is cancelled once a write has waited past the timeout.
    deadline = time.monotonic() + 6 * GENEROUS_S
    while time.monotonic() < deadline:
        if metric(port, "tachyon_requests_cancelled_total") >= 1 and metric(port, "tachyon_http_requests_in_flight") == 0:
            break
        time.sleep(0.25)
    else:
        raise AssertionError("the stream of a client that stopped reading was not cancelled")
    assert metric(port, "tachyon_kv_blocks_used") == 0
    assert metric(port, "tachyon_requests_running") == 0
    s.close()
    # The server still serves.
    assert http_get(port, "/health", GENEROUS_S)[0] == 200


def main():
    tachyon, model = sys.argv[1], sys.argv[2]
    server, port = start_server(tachyon, model)
    try:
        hung_connections_are_dropped(port)
        print("hung connections dropped: ok")
        reader_that_stops_is_dropped(port)
        print("stopped reader dropped, its generation cancelled, KV freed: ok")
    finally:
        server.terminate()
        server.wait(timeout=60)


if __name__ == "__main__":
    main()
