#!/usr/bin/env bash
# The `tachyon` subcommands as a user runs them: tokenize/detokenize (JSON lines), template,
# parse, logits, run --ids and info (speculation, sampling defaults), on the embedded demo model and an HF fixture.
set -euo pipefail
tachyon="$1"
root="$(cd "$(dirname "$0")/../../.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# tokenize -> detokenize round trip, and the bad-line error
ids="$(printf '%s\n' '"def add(a, b):\n    return a + b"' | "$tachyon" tokenize)"
[[ "$ids" == \[*\] ]] || fail "tokenize printed '$ids'"
text="$(printf '%s\n' "$ids" | "$tachyon" detokenize)"
[[ "$text" == '"def add(a, b):\n    return a + b"' ]] || fail "detokenize printed '$text'"
if printf '42\n' | "$tachyon" tokenize 2> "$tmp/err"; then fail "tokenize accepted a non-string line"; fi
grep -q "line 1: expected a JSON string" "$tmp/err" || fail "no line number in: $(cat "$tmp/err")"
special="$(printf '"<|im_end|>"\n' | "$tachyon" tokenize "$root/models/tachyon-demo" --special)"
[[ "$special" == "[8181]" ]] || fail "special token encoded as $special"

# template (exact, no trailing newline) and parse
printf '%s' '{"messages":[{"role":"user","content":"hi"}],"add_generation_prompt":true,"enable_thinking":false}' > "$tmp/req.json"
"$tachyon" template --request "$tmp/req.json" > "$tmp/prompt.txt"
printf '<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n' > "$tmp/expected.txt"
cmp -s "$tmp/prompt.txt" "$tmp/expected.txt" || fail "template rendered: $(cat -A "$tmp/prompt.txt")"
printf '<think>\nplan\n</think>\n\nok <tool_call>\n{"name": "f", "arguments": {"x": 1}}\n</tool_call>' > "$tmp/out.txt"
"$tachyon" parse --text "$tmp/out.txt" > "$tmp/parsed.json"
grep -q '"reasoning_content": "plan"' "$tmp/parsed.json" || fail "parse: $(cat "$tmp/parsed.json")"
grep -q '"name": "f"' "$tmp/parsed.json" || fail "parse lost the tool call: $(cat "$tmp/parsed.json")"

# logits: one float32 tensor [T, V]
"$tachyon" logits "$root/tests/fixtures/hf/qwen2" --ids 1,2,3 --out "$tmp/l.safetensors" 2> /dev/null
header_len=$(od -An -t u8 -N 8 "$tmp/l.safetensors" | tr -d ' ')
head -c $((8 + header_len)) "$tmp/l.safetensors" | tail -c "$header_len" | grep -q '"shape":\[3,512\]' || fail "logits header"
if "$tachyon" logits "$root/tests/fixtures/hf/qwen2" --ids 1,x --out "$tmp/x" 2> "$tmp/err"; then fail "bad --ids accepted"; fi
grep -q "'x' is not a token id" "$tmp/err" || fail "bad --ids message: $(cat "$tmp/err")"

# run --ids is deterministic at temperature 0, with and without speculation
a="$("$tachyon" run --ids 1,2,3,4 -n 12 --show-ids --no-pld --no-drafter --no-mtp 2> /dev/null)"
b="$("$tachyon" run --ids 1,2,3,4 -n 12 --show-ids --speculative-config '{"method":"mtp"}' 2> /dev/null)"
[[ -n "$a" && "$a" == "$b" ]] || fail "run: '$a' vs '$b'"
# --drafter takes a model name too (here the alias of the embedded model)
b="$("$tachyon" run --ids 1,2,3,4 -n 12 --show-ids --speculative-config '{"method":"draft"}' --drafter tachyon-demo 2> /dev/null)"
[[ "$a" == "$b" ]] || fail "run --drafter ALIAS: '$a' vs '$b'"
# --kv-cache-dtype: every format runs (f32 and the default bf16 agree on this short greedy run),
# speculation stays lossless on a quantized cache, and an unknown name is refused
for f in f32 bf16 f16 fp8 int8 int4 turbo; do
  k="$("$tachyon" run --ids 1,2,3,4 -n 12 --show-ids --no-pld --no-drafter --no-mtp --kv-cache-dtype $f 2> /dev/null)" ||
    fail "run --kv-cache-dtype $f"
  [[ -n "$k" ]] || fail "run --kv-cache-dtype $f: no output"
done
[[ "$("$tachyon" run --ids 1,2,3,4 -n 12 --show-ids --no-pld --no-drafter --no-mtp --kv-cache-dtype f32 2> /dev/null)" == "$a" ]] ||
  fail "run: f32 KV differs from the default on a 12-token greedy run"
a8="$("$tachyon" run --ids 1,2,3,4 -n 12 --show-ids --no-pld --no-drafter --no-mtp --kv-cache-dtype int8 2> /dev/null)"
b8="$("$tachyon" run --ids 1,2,3,4 -n 12 --show-ids --speculative-config '{"method":"mtp"}' --kv-cache-dtype int8 2> /dev/null)"
[[ "$a8" == "$b8" ]] || fail "run int8 KV with mtp: '$a8' vs '$b8'"
if "$tachyon" run --ids 1,2 -n 2 --kv-cache-dtype q5 > /dev/null 2>&1; then fail "--kv-cache-dtype q5 accepted"; fi
"$tachyon" logits "$root/tests/fixtures/hf/qwen2" --ids 1,2,3 --kv-cache-dtype int4 --out "$tmp/l4.safetensors" 2> /dev/null ||
  fail "logits --kv-cache-dtype int4"
"$tachyon" info --json | grep -q '"kv_formats"' || fail "info --json: kv_formats"

# run's positionals: a lone model-shaped name that does not resolve is an error (never the demo's
# prompt); plain text is the demo's prompt; an alias or path with --prompt is the model.
if HF_HUB_CACHE="$tmp/empty-cache" TACHYON_ALIASES="$tmp/none.json" "$tachyon" run Qwen/Qwen3-8B -n 4 < /dev/null \
    > "$tmp/out" 2> "$tmp/err"; then fail "run Qwen/Qwen3-8B ran without the model"; fi
grep -q "model 'Qwen/Qwen3-8B' not found; searched:" "$tmp/err" || fail "run unknown model: $(cat "$tmp/err")"
grep -q "tachyon pull Qwen/Qwen3-8B" "$tmp/err" || fail "run unknown model gives no pull hint: $(cat "$tmp/err")"
[[ ! -s "$tmp/out" ]] || fail "run generated for an unknown model: $(cat "$tmp/out")"
if "$tachyon" run qwen3-8c -n 4 < /dev/null 2> "$tmp/err"; then fail "run took a misspelt alias as a prompt"; fi
grep -q "did you mean the alias 'qwen3-8b'" "$tmp/err" || fail "misspelt alias: $(cat "$tmp/err")"
"$tachyon" run "def add(a, b):" -n 4 > /dev/null 2>&1 || fail "run PROMPT with the embedded model"
a="$("$tachyon" run tachyon-demo --prompt "def add(a, b):" -n 6 --show-ids 2> /dev/null)"
b="$(printf 'def add(a, b):' | "$tachyon" run "$root/models/tachyon-demo" --prompt - -n 6 --show-ids 2> /dev/null)"
c="$("$tachyon" run "def add(a, b):" -n 6 --show-ids 2> /dev/null)"
[[ -n "$a" && "$a" == "$b" && "$a" == "$c" ]] || fail "run --prompt: '$a' vs '$b' vs '$c'"
"$tachyon" info tachyon-demo --json | grep -q '"source": "alias"' || fail "info by alias"

# info --json names the speculation methods
"$tachyon" info --json | grep -q '"MTP heads: 1, all 15 tensors verified"' || fail "info --json"
# info --json says where draft trees apply: not on a hybrid (recurrent-state) model
"$tachyon" info --json | grep -A1 '"draft_trees"' | grep -q '"eligible": true' || fail "info --json: draft trees"
"$tachyon" info --json "$root/tests/fixtures/hf/qwen3_next" 2> /dev/null | grep -A1 '"draft_trees"' |
  grep -q '"eligible": false' || fail "info --json: draft trees on a hybrid model"
# info shows generation_config.json's sampling defaults (a copy of the qwen2 fixture with some)
mkdir "$tmp/sampled"
for f in config.json model.safetensors; do ln -s "$root/tests/fixtures/hf/qwen2/$f" "$tmp/sampled/$f"; done
printf '{"do_sample": true, "temperature": 0.6, "top_p": 0.95, "top_k": 20, "min_p": 0.05}' > "$tmp/sampled/generation_config.json"
"$tachyon" info "$tmp/sampled" 2> /dev/null > "$tmp/info.txt"
grep -q '^sampling .*min_p 0.05, temperature 0.6, top_k 20, top_p 0.95 (generation_config.json' "$tmp/info.txt" ||
  fail "info sampling: $(grep sampling "$tmp/info.txt")"
"$tachyon" info "$root/tests/fixtures/hf/qwen2" 2> /dev/null | grep -q '^sampling *none' || fail "info: no sampling defaults"
# run applies them too where its flags are left out: a copy of the demo whose generation_config.json sets a
# strong repetition penalty decodes otherwise than the demo, and --repetition-penalty 1 brings the demo's back
mkdir -p "$tmp/penalised"
for f in "$root/models/tachyon-demo"/*; do ln -s "$f" "$tmp/penalised/"; done
rm "$tmp/penalised/generation_config.json"
printf '{"eos_token_id": [8181, 8179], "repetition_penalty": 5.0}' > "$tmp/penalised/generation_config.json"
plain="$("$tachyon" run --ids 1,2,3,4 -n 24 --show-ids --no-pld --no-drafter --no-mtp 2> /dev/null)"
penalised="$("$tachyon" run "$tmp/penalised" --ids 1,2,3,4 -n 24 --show-ids --no-pld --no-drafter --no-mtp 2> /dev/null)"
[[ -n "$plain" && "$penalised" != "$plain" ]] || fail "run ignored generation_config.json's repetition_penalty"
flag="$("$tachyon" run "$tmp/penalised" --ids 1,2,3,4 -n 24 --show-ids --no-pld --no-drafter --no-mtp \
  --repetition-penalty 1 2> /dev/null)"
[[ "$flag" == "$plain" ]] || fail "run: --repetition-penalty did not win over generation_config.json"
echo "cli: all checks passed"
