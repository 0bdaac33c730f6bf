#!/usr/bin/env python3
"""A local stand-in for the Hugging Face hub, for `tachyon pull` tests.

Serves the hub's own endpoint paths over plain HTTP:
  GET  /api/models/{org}/{name}/revision/{rev}[?blobs=true]  -> {"id", "sha", "siblings": [...]}
  HEAD|GET /{org}/{name}/resolve/{rev}/{path}
       *.safetensors and *.gguf are LFS files: 302 to http://localhost:PORT/cdn/... (another host name
       than the endpoint's 127.0.0.1, as the real CDN is), with X-Linked-Etag / X-Linked-Size; other files
       answer 200 with their git blob sha1 as ETag. Every answer carries X-Repo-Commit.
  GET  /cdn/{org}/{name}/{sha256}   the bytes, with Range (206 + Content-Range).
Faults, for the resume and verification tests (FILE is REPO_ID:PATH):
  --cut-once FILE   the first full download of FILE sends its headers and half its bytes, then closes.
  --corrupt FILE    FILE's bytes are served with one byte flipped (size and headers unchanged).
  --token TOKEN     hub endpoints (not the CDN) answer 401 without "Authorization: Bearer TOKEN".
Each request is logged as one JSON line (method, path, range, authorization) to --log.
"""
import argparse
import hashlib
import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit


def git_blob_sha1(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class Repo:
    def __init__(self, repo_id, folder):
        self.repo_id = repo_id
        self.files = {}  # path -> bytes
        for root, _, names in os.walk(folder):
            for name in sorted(names):
                full = os.path.join(root, name)
                with open(full, "rb") as f:
                    self.files[os.path.relpath(full, folder)] = f.read()
        h = hashlib.sha1(repo_id.encode())
        for path in sorted(self.files):
            h.update(path.encode() + hashlib.sha256(self.files[path]).digest())
        self.commit = h.hexdigest()

    @staticmethod
    def is_lfs(path):
        return path.endswith((".safetensors", ".gguf"))

    def sibling(self, path):
        data = self.files[path]
        s = {"rfilename": path, "size": len(data), "blobId": git_blob_sha1(data)}
        if self.is_lfs(path):
            s["lfs"] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 134}
        return s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", action="append", default=[], help="ID=FOLDER")
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--token", default="")
    ap.add_argument("--cut-once", action="append", default=[])
    ap.add_argument("--corrupt", action="append", default=[])
    args = ap.parse_args()

    repos = {}
    for spec in args.repo:
        repo_id, folder = spec.split("=", 1)
        repos[repo_id] = Repo(repo_id, folder)
    blobs = {}  # (repo id, sha256) -> path
    for repo in repos.values():
        for path, data in repo.files.items():
            blobs[(repo.repo_id, hashlib.sha256(data).hexdigest())] = path
    cut_pending = set(args.cut_once)
    lock = threading.Lock()
    log = open(args.log, "a", buffering=1)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def record(self):
            with lock:
                log.write(json.dumps({"method": self.command, "path": self.path, "host": self.headers.get("Host", ""),
                                      "range": self.headers.get("Range", ""),
                                      "authorization": self.headers.get("Authorization", "")}) + "\n")

        def reply(self, status, headers, body=b"", send_body=True):
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            if "Content-Length" not in headers:
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if send_body and self.command != "HEAD":
                self.wfile.write(body)

        def error(self, status, message):
            self.reply(status, {"Content-Type": "application/json", "X-Error-Message": message},
                       json.dumps({"error": message}).encode())

        def authorized(self):
            if args.token and self.headers.get("Authorization", "") != "Bearer " + args.token:
                self.error(401, "Invalid credentials in Authorization header")
                return False
            return True

        def send_bytes(self, key, data, extra):
            data = bytearray(data)
            if key in args.corrupt and data:
                data[len(data) // 2] ^= 0xFF
            start = 0
            rng = self.headers.get("Range", "")
            headers = dict(extra)
            headers["Accept-Ranges"] = "bytes"
            if rng.startswith("bytes=") and rng.endswith("-"):
                start = int(rng[6:-1])
                if start >= len(data):
                    self.reply(416, {"Content-Range": "bytes */%d" % len(data)})
                    return
                headers["Content-Range"] = "bytes %d-%d/%d" % (start, len(data) - 1, len(data))
                status = 206
            else:
                status = 200
            body = bytes(data[start:])
            if self.command == "GET" and start == 0:
                with lock:
                    cut = key in cut_pending
                    cut_pending.discard(key)
                if cut:  # promise the whole file, send half, hang up
                    self.send_response(200)
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body[: len(body) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
            headers["Content-Length"] = str(len(body))
            self.reply(status, headers, body)

        def handle_request(self):
            self.record()
            url = urlsplit(self.path)
            parts = [unquote(p) for p in url.path.split("/")[1:]]
            if parts[:1] == ["cdn"] and len(parts) == 4:
                repo_id, sha = parts[1] + "/" + parts[2], parts[3]
                if (repo_id, sha) not in blobs:
                    return self.error(404, "no such blob")
                path = blobs[(repo_id, sha)]
                return self.send_bytes(repo_id + ":" + path, repos[repo_id].files[path], {"ETag": '"%s"' % sha})
            if not self.authorized():
                return
            if parts[:2] == ["api", "models"] and len(parts) >= 6 and parts[4] == "revision":
                repo = repos.get(parts[2] + "/" + parts[3])
                rev = "/".join(parts[5:])
                if repo is None:
                    return self.error(404, "Repository not found")
                if rev not in ("main", repo.commit):
                    return self.error(404, "Invalid rev id: " + rev)
                body = {"id": repo.repo_id, "sha": repo.commit,
                        "siblings": [repo.sibling(p) if "blobs=true" in url.query else {"rfilename": p}
                                     for p in sorted(repo.files)]}
                return self.reply(200, {"Content-Type": "application/json"}, json.dumps(body).encode())
            if len(parts) >= 5 and parts[2] == "resolve":
                repo = repos.get(parts[0] + "/" + parts[1])
                rev, path = parts[3], "/".join(parts[4:])
                if repo is None or rev not in ("main", repo.commit):
                    return self.error(404, "Repository or revision not found")
                if path not in repo.files:
                    return self.error(404, "Entry not found")
                data = repo.files[path]
                headers = {"X-Repo-Commit": repo.commit}
                if Repo.is_lfs(path):
                    sha = hashlib.sha256(data).hexdigest()
                    port = self.server.server_address[1]
                    headers.update({"Location": "http://localhost:%d/cdn/%s/%s" % (port, repo.repo_id, sha),
                                    "X-Linked-Etag": '"%s"' % sha, "X-Linked-Size": str(len(data)),
                                    "ETag": '"%s"' % git_blob_sha1(b"pointer")})
                    return self.reply(302, headers)
                headers["ETag"] = '"%s"' % git_blob_sha1(data)
                return self.send_bytes(repo.repo_id + ":" + path, data, headers)
            self.error(404, "no route")

        do_GET = handle_request
        do_HEAD = handle_request

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(server.server_address[1]))
    os.rename(tmp, args.port_file)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
