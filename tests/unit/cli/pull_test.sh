#!/usr/bin/env bash
# `tachyon pull / ls / rm` against a fake hub (fake_hub.py: the hub's endpoint paths, redirects to
# another host, ETags, Range), then the pulled model used by name: `run`, `info`, `serve`.
# Checks the cache byte for byte and in the layout huggingface_hub writes; an interrupted download
# resumed with Range; a pre-existing .incomplete resumed; a corrupted download refused, named, and
# kept out of the cache; HF_TOKEN sent to the hub and not to the CDN; unknown names refused.
set -euo pipefail
tachyon="$1"
root="$(cd "$(dirname "$0")/../../.." && pwd)"
tmp="$(mktemp -d)"
hub_pid="" serve_pid=""
cleanup() {
  [[ -n "$serve_pid" ]] && kill "$serve_pid" 2> /dev/null || true
  [[ -n "$hub_pid" ]] && kill "$hub_pid" 2> /dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

repo_id="tachyon-test/tiny-qwen3"
# The served repository: the tiny qwen3 fixture (vocab 512), a byte-level tokenizer that fits
# its vocabulary, files a pull leaves alone by default, and a GGUF for --include.
src="$tmp/repo"
mkdir -p "$src"
cp "$root/tests/fixtures/hf/qwen3/"{config.json,generation_config.json,model.safetensors} "$src/"
python3 - "$src" << 'EOF'
import json, sys
bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
cs, n = bs[:], 0
for b in range(256):
    if b not in bs:
        bs.append(b); cs.append(256 + n); n += 1
vocab = {chr(c): b for b, c in zip(bs, cs)}
tok = {"version": "1.0", "truncation": None, "padding": None,
       "added_tokens": [{"id": 256, "content": "<|endoftext|>", "single_word": False, "lstrip": False,
                         "rstrip": False, "normalized": False, "special": True}],
       "normalizer": None,
       "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
       "post_processor": None, "decoder": {"type": "ByteLevel"},
       "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                 "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "vocab": vocab, "merges": []}}
json.dump(tok, open(sys.argv[1] + "/tokenizer.json", "w"))
json.dump({"eos_token": "<|endoftext|>"}, open(sys.argv[1] + "/tokenizer_config.json", "w"))
open(sys.argv[1] + "/README.md", "w").write("# tiny\n")
open(sys.argv[1] + "/tiny-Q4_K_M.gguf", "wb").write(b"GGUF" + bytes(60))
EOF
mkdir -p "$src/original" && echo '{"dim": 64}' > "$src/original/params.json" && : > "$src/original/empty.txt"

# Separate copies of the same files under other ids, for the fault scenarios.
cp -r "$src" "$tmp/repo-corrupt"
cp -r "$src" "$tmp/repo-resume"

python3 "$root/tests/unit/cli/fake_hub.py" --repo "$repo_id=$src" --repo "tachyon-test/corrupt=$tmp/repo-corrupt" \
  --repo "tachyon-test/resume=$tmp/repo-resume" --port-file "$tmp/port" --log "$tmp/hub.log" \
  --token secret-token --cut-once "$repo_id:model.safetensors" --corrupt tachyon-test/corrupt:model.safetensors &
hub_pid=$!
for _ in $(seq 100); do [[ -f "$tmp/port" ]] && break; sleep 0.1; done
[[ -f "$tmp/port" ]] || fail "the fake hub did not start"
port="$(cat "$tmp/port")"

export HF_ENDPOINT="http://127.0.0.1:$port" HF_TOKEN=secret-token HF_HUB_CACHE="$tmp/cache"
export TACHYON_ALIASES="$tmp/aliases.json" HF_TOKEN_PATH="$tmp/token" NO_PROXY='*' no_proxy='*'
unset HF_HOME http_proxy https_proxy HTTP_PROXY HTTPS_PROXY

# --- a full pull, with the model file cut off once mid-way
"$tachyon" pull "$repo_id" > "$tmp/pull.out" 2> "$tmp/pull.err" || fail "pull: $(cat "$tmp/pull.err")"
grep -q "model.safetensors: interrupted at" "$tmp/pull.err" || fail "no resume reported: $(cat "$tmp/pull.err")"
grep -q "tachyon serve $repo_id" "$tmp/pull.out" || fail "pull's last line: $(cat "$tmp/pull.out")"
repo="$tmp/cache/models--tachyon-test--tiny-qwen3"
commit="$(cat "$repo/refs/main")"
[[ "$commit" =~ ^[0-9a-f]{40}$ ]] || fail "refs/main holds '$commit'"
snap="$repo/snapshots/$commit"
for f in config.json generation_config.json model.safetensors tokenizer.json tokenizer_config.json; do
  [[ -L "$snap/$f" ]] || fail "$f is not a symlink in the snapshot"
  cmp -s "$snap/$f" "$src/$f" || fail "$f differs from the hub's copy"
done
[[ ! -e "$snap/README.md" && ! -e "$snap/tiny-Q4_K_M.gguf" ]] || fail "pulled files a model does not need"
sha="$(sha256sum "$src/model.safetensors" | cut -d' ' -f1)"
[[ "$(readlink "$snap/model.safetensors")" == "../../blobs/$sha" ]] || fail "LFS link: $(readlink "$snap/model.safetensors")"
git_sha1="$(python3 -c 'import hashlib,sys; d=open(sys.argv[1],"rb").read(); print(hashlib.sha1(b"blob %d\0" % len(d) + d).hexdigest())' "$src/config.json")"
[[ "$(readlink "$snap/config.json")" == "../../blobs/$git_sha1" ]] || fail "config link: $(readlink "$snap/config.json")"
[[ -z "$(find "$repo" -name '*.incomplete')" ]] || fail ".incomplete left behind"
# The resume asked for the rest of the file; the token went to the hub, never to the CDN host.
python3 - "$tmp/hub.log" << 'EOF' || fail "hub log: $(cat "$tmp/hub.log")"
import json, sys
reqs = [json.loads(l) for l in open(sys.argv[1])]
cdn = [r for r in reqs if r["path"].startswith("/cdn/")]
assert any(r["range"].startswith("bytes=") and r["range"] != "bytes=0-" for r in cdn), "no Range request to resume"
assert all(r["authorization"] == "" for r in cdn), "HF_TOKEN leaked to the CDN host"
assert all(r["host"].startswith("localhost:") for r in cdn), "redirect not followed to the CDN host"
hub = [r for r in reqs if not r["path"].startswith("/cdn/")]
assert hub and all(r["authorization"] == "Bearer secret-token" for r in hub), "HF_TOKEN not sent to the hub"
assert any(r["method"] == "HEAD" and "/resolve/" in r["path"] for r in hub), "no HEAD for the ETag"
EOF

# On a terminal: one redrawn progress line with bytes, rate and ETA (script(1) gives it a pty).
HF_HUB_CACHE="$tmp/cache-tty" script -qec "'$tachyon' pull '$repo_id'" /dev/null > "$tmp/tty.out" 2>&1 ||
  fail "pull on a terminal: $(cat "$tmp/tty.out")"
grep -q $'\r\033\[K\[2/[0-9]*\] .*\[#*\.*\] .* / .*/s  ETA ' "$tmp/tty.out" || fail "no progress bar: $(cat -A "$tmp/tty.out")"

# A second pull downloads nothing.
"$tachyon" pull "$repo_id" > /dev/null 2> "$tmp/pull2.err" || fail "second pull: $(cat "$tmp/pull2.err")"
grep -q "(0 downloaded" "$tmp/pull2.err" || fail "second pull downloaded again: $(cat "$tmp/pull2.err")"

# --- no token: the hub's 401, explained
if HF_TOKEN= "$tachyon" pull "$repo_id" 2> "$tmp/err"; then fail "pull without HF_TOKEN succeeded"; fi
grep -q "HTTP 401" "$tmp/err" && grep -q "HF_TOKEN" "$tmp/err" || fail "401 message: $(cat "$tmp/err")"
# The token file huggingface_hub's login writes stands in for HF_TOKEN.
printf 'secret-token\n' > "$tmp/token"
HF_TOKEN= "$tachyon" pull "$repo_id" > /dev/null 2> "$tmp/err" || fail "pull with the token file: $(cat "$tmp/err")"
rm "$tmp/token"
if "$tachyon" pull tachyon-test/absent 2> "$tmp/err"; then fail "pull of an absent repository succeeded"; fi
grep -q "HTTP 404" "$tmp/err" || fail "404 message: $(cat "$tmp/err")"

# --- a corrupted download: refused, named, nothing of it in the cache
if HF_HUB_CACHE="$tmp/cache-corrupt" "$tachyon" pull tachyon-test/corrupt 2> "$tmp/err"; then fail "corrupt file accepted"; fi
grep -q "tachyon-test/corrupt/model.safetensors: sha256 mismatch" "$tmp/err" || fail "corruption message: $(cat "$tmp/err")"
crepo="$tmp/cache-corrupt/models--tachyon-test--corrupt"
[[ -z "$(find "$crepo/snapshots" -name model.safetensors)" ]] || fail "the corrupt file reached the snapshot"
[[ ! -e "$crepo/blobs/$sha" && -z "$(find "$crepo/blobs" -name '*.incomplete')" ]] || fail "corrupt bytes kept in blobs/"
[[ ! -e "$crepo/refs/main" ]] || fail "refs/main written for a failed pull"
if HF_HUB_CACHE="$tmp/cache-corrupt" "$tachyon" run tachyon-test/corrupt --ids 1 2> /dev/null; then
  fail "a failed pull resolved"
fi

# --- a download left half done by an earlier process resumes from its length
rrepo="$tmp/cache-resume/models--tachyon-test--resume"
mkdir -p "$rrepo/blobs"
size=$(stat -c %s "$src/model.safetensors")
head -c $((size / 3)) "$src/model.safetensors" > "$rrepo/blobs/$sha.incomplete"
HF_HUB_CACHE="$tmp/cache-resume" "$tachyon" pull tachyon-test/resume > /dev/null 2> "$tmp/err" || fail "resume: $(cat "$tmp/err")"
cmp -s "$rrepo/blobs/$sha" "$src/model.safetensors" || fail "resumed file differs"
grep -q "\"range\": \"bytes=$((size / 3))-\"" "$tmp/hub.log" || fail "no Range from the .incomplete length"

# --- GGUF only when asked; resolution hands it to the loader, which validates it (this stand-in
# file is "GGUF" and 60 zero bytes: version 0) and names it
HF_HUB_CACHE="$tmp/cache-gguf" "$tachyon" pull "$repo_id" --include '*.gguf' --include 'original/*' \
  --exclude '*.safetensors' > /dev/null 2>&1 || fail "pull --include"
gsnap="$(ls -d "$tmp/cache-gguf/models--tachyon-test--tiny-qwen3/snapshots/"*)"
[[ -L "$gsnap/tiny-Q4_K_M.gguf" && ! -e "$gsnap/model.safetensors" ]] || fail "--include/--exclude: $(ls "$gsnap")"
[[ "$(readlink "$gsnap/original/params.json")" == ../../../blobs/* ]] && cmp -s "$gsnap/original/params.json" \
  "$src/original/params.json" || fail "nested file link: $(readlink "$gsnap/original/params.json")"
[[ -L "$gsnap/original/empty.txt" && ! -s "$gsnap/original/empty.txt" ]] || fail "an empty file was not pulled"
if HF_HUB_CACHE="$tmp/cache-gguf" "$tachyon" run "$repo_id" --ids 1 2> "$tmp/err"; then fail "a GGUF snapshot loaded"; fi
grep -q "tiny-Q4_K_M.gguf: GGUF version 0 is not supported" "$tmp/err" || fail "GGUF snapshot message: $(cat "$tmp/err")"
if "$tachyon" run "$src/tiny-Q4_K_M.gguf" --ids 1 2> "$tmp/err"; then fail "a GGUF file loaded"; fi
grep -q "tiny-Q4_K_M.gguf: GGUF version 0 is not supported (supported: 2, 3)" "$tmp/err" || fail "GGUF message: $(cat "$tmp/err")"

# --- a pull by commit hash writes no ref (as huggingface_hub), and resolves by that hash
HF_HUB_CACHE="$tmp/cache-commit" "$tachyon" pull "$repo_id@$commit" > /dev/null 2>&1 || fail "pull @commit"
[[ ! -e "$tmp/cache-commit/models--tachyon-test--tiny-qwen3/refs" ]] || fail "pull @commit wrote a ref"
HF_HUB_CACHE="$tmp/cache-commit" "$tachyon" run "$repo_id@$commit" --ids 1 -n 2 > /dev/null 2>&1 || fail "run @commit"
if HF_HUB_CACHE="$tmp/cache-commit" "$tachyon" run "$repo_id" --ids 1 -n 2 2> /dev/null; then
  fail "main resolved without refs/main"
fi

# --- ls
"$tachyon" ls > "$tmp/ls.txt"
grep -q "$repo_id .*main ${commit:0:8}" "$tmp/ls.txt" || fail "ls: $(cat "$tmp/ls.txt")"
grep -q "qwen3-8b .*Qwen/Qwen3-8B .*no" "$tmp/ls.txt" || fail "ls aliases: $(cat "$tmp/ls.txt")"
"$tachyon" ls --json | python3 -c "
import json, sys
j = json.load(sys.stdin)
m = [x for x in j['models'] if x['name'] == '$repo_id'][0]
assert m['refs'] == {'main': '$commit'} and m['size_on_disk'] > 100000, m
" || fail "ls --json"

# --- the pulled model by name: run (same tokens as the fixture folder), @revision, an alias, info
want="$("$tachyon" run "$root/tests/fixtures/hf/qwen3" --ids 1,2,3 -n 6 --show-ids 2> /dev/null)"
got="$("$tachyon" run "$repo_id" --ids 1,2,3 -n 6 --show-ids 2> /dev/null)" || fail "run $repo_id"
[[ -n "$want" && "$got" == "$want" ]] || fail "run by name: '$got' vs '$want'"
got="$("$tachyon" run "$repo_id@${commit:0:10}" --ids 1,2,3 -n 6 --show-ids 2> /dev/null)" || fail "run @commit"
[[ "$got" == "$want" ]] || fail "run @commit: '$got'"
echo "{\"tiny\": {\"model\": \"$repo_id\", \"drafter\": \"suffix\"}}" > "$TACHYON_ALIASES"
got="$("$tachyon" run tiny --ids 1,2,3 -n 6 --show-ids 2> "$tmp/err")" || fail "run alias: $(cat "$tmp/err")"
[[ "$got" == "$want" ]] || fail "run alias: '$got'"
grep -q "speculative decoding: suffix" "$tmp/err" || fail "the alias's drafter was not used: $(cat "$tmp/err")"
"$tachyon" info tiny --json 2> /dev/null | python3 -c "
import json, sys
r = json.load(sys.stdin)['resolved']
assert r['source'] == 'alias' and r['repo_id'] == '$repo_id' and r['commit'] == '$commit', r
assert r['alias']['drafter'] == 'suffix', r
" || fail "info resolved"

# `tachyon serve MODEL` in the background on a free port: serve_pid, sport.
start_serve() {
  "$tachyon" serve "$1" --port 0 --kv-blocks 64 > /dev/null 2> "$tmp/serve.err" &
  serve_pid=$!
  for _ in $(seq 300); do grep -q "listening on" "$tmp/serve.err" && break; sleep 0.1; done
  sport="$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' "$tmp/serve.err")"
  [[ -n "$sport" ]] || fail "serve did not start: $(cat "$tmp/serve.err")"
}

# --- serve NAME: /v1/models names it, and it completes
start_serve "$repo_id"
python3 - "$sport" "$repo_id" << 'EOF' || fail "serve $repo_id: /v1/models or /v1/completions"
import json, sys, urllib.request
base = "http://127.0.0.1:%s/v1/" % sys.argv[1]
models = json.load(urllib.request.urlopen(base + "models"))
assert [m for m in models["data"] if m["id"] == sys.argv[2]], models
req = urllib.request.Request(base + "completions", headers={"Content-Type": "application/json"},
                             data=json.dumps({"model": sys.argv[2], "prompt": "hi", "max_tokens": 4,
                                              "temperature": 0}).encode())
answer = json.load(urllib.request.urlopen(req))
assert answer["choices"] and answer["usage"]["completion_tokens"] > 0, answer
EOF
kill "$serve_pid"; wait "$serve_pid" 2> /dev/null || true; serve_pid=""

# --- Ollama /api/pull on a running server: progress lines, then the model is listed and answers
HF_HUB_CACHE="$tmp/cache-api" start_serve "$src"
python3 - "$sport" "$repo_id" << 'EOF' || fail "/api/pull: $(cat "$tmp/serve.err")"
import json, sys, urllib.error, urllib.request
base, repo = "http://127.0.0.1:%s/api/" % sys.argv[1], sys.argv[2]
def post(route, body):
    req = urllib.request.Request(base + route, headers={"Content-Type": "application/json"},
                                 data=json.dumps(body).encode())
    try:
        with urllib.request.urlopen(req) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
tags = lambda: [m["name"] for m in json.load(urllib.request.urlopen(base + "tags"))["models"]]
assert repo + ":latest" not in tags()
status, text = post("pull", {"model": repo})
lines = [json.loads(l) for l in text.splitlines()]
statuses = [l["status"] for l in lines]
assert status == 200 and statuses[0] == "pulling manifest" and statuses[-1] == "success", lines
assert statuses[-3:-1] == ["verifying sha256 digest", "writing manifest"], lines
weights = [l for l in lines if l.get("digest") == "model.safetensors"]
assert weights and weights[-1]["completed"] == weights[-1]["total"] > 0, lines
assert all(l["status"] == "pulling " + l["digest"] for l in lines if "digest" in l), lines
assert repo + ":latest" in tags(), tags()
status, text = post("generate", {"model": repo, "prompt": "hi", "raw": True, "stream": False, "options": {"num_predict": 2}})
assert status == 200 and json.loads(text)["eval_count"] > 0, text
# Served now: pulling again is success at once; stream:false answers one object.
assert post("pull", {"model": repo, "stream": False}) == (200, '{"status":"success"}')
status, text = post("pull", {"model": "llama3.2"})
assert status == 400 and "neither a hub id" in json.loads(text)["error"], text
status, text = post("pull", {"model": "acme/not-on-hub", "stream": False})
assert status == 500 and "error" in json.loads(text), text
status, text = post("pull", {"model": "acme/not-on-hub"})
assert status == 200 and "error" in json.loads(text.splitlines()[-1]), text
EOF
kill "$serve_pid"; wait "$serve_pid" 2> /dev/null || true; serve_pid=""

# --- unknown names are errors, never prompts
if "$tachyon" run acme/not-pulled 2> "$tmp/err" > "$tmp/out"; then fail "run of an unknown model succeeded"; fi
grep -q "model 'acme/not-pulled' not found; searched:" "$tmp/err" || fail "unknown model message: $(cat "$tmp/err")"
grep -q "$tmp/cache/models--acme--not-pulled" "$tmp/err" || fail "the cache searched is not named: $(cat "$tmp/err")"
[[ ! -s "$tmp/out" ]] || fail "run generated with an unknown model"
if "$tachyon" serve acme/not-pulled --port 0 2> "$tmp/err"; then fail "serve of an unknown model succeeded"; fi
grep -q "not found; searched" "$tmp/err" || fail "serve unknown: $(cat "$tmp/err")"

# --- rm: asks nothing of a pipe, needs --yes
if "$tachyon" rm "$repo_id" < /dev/null 2> "$tmp/err"; then fail "rm without --yes on a pipe"; fi
grep -q "give --yes" "$tmp/err" || fail "rm message: $(cat "$tmp/err")"
[[ -d "$repo" ]] || fail "rm removed without --yes"
"$tachyon" rm tiny --yes < /dev/null 2> /dev/null || fail "rm --yes via the alias"
[[ ! -e "$repo" ]] || fail "rm left $repo"
"$tachyon" ls --json | python3 -c "
import json, sys
j = json.load(sys.stdin)
assert not [m for m in j['models'] if m['name'] == '$repo_id'], 'still listed'
assert [a for a in j['aliases'] if a['name'] == 'tiny' and not a['available']], 'alias still available'
" || fail "ls after rm"
if "$tachyon" run "$repo_id" --ids 1 2> /dev/null; then fail "a removed model resolved"; fi
echo "pull: all checks passed"
