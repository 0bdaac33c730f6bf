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
# a .gguf file's own tokenizer: llama-tokenize's ids for this text (tests/fixtures/gguf/*.tokenize.json)
gguf="$root/tests/fixtures/gguf/demo-q4_k_m.gguf"
ids="$(printf '%s\n' '"<|im_start|>system\nYou are helpful.<|im_end|>"' | "$tachyon" tokenize "$gguf")"
[[ "$ids" == "[8180,82,3426,198,6827,653,3151,2705,13,8181]" ]] || fail "gguf tokenize printed '$ids'"
text="$(printf '%s\n' "$ids" | "$tachyon" detokenize "$gguf" --skip-special)"
[[ "$text" == '"system\nYou are helpful."' ]] || fail "gguf detokenize printed '$text'"

# a .gguf model (weights, config and tokenizer from the file): logits, greedy run, info's tensor-type
# mix; a truncated file is refused naming it. The reference backend runs every weight format.
"$tachyon" logits "$gguf" --ids 8180,82,3426 --device reference --out "$tmp/g.safetensors" 2> /dev/null
header_len=$(od -An -t u8 -N 8 "$tmp/g.safetensors" | tr -d ' ')
head -c $((8 + header_len)) "$tmp/g.safetensors" | tail -c "$header_len" | grep '"shape":\[3,8192\]' > /dev/null || fail "gguf logits header"
out="$("$tachyon" run "$gguf" -p "def fibonacci(n):" -n 6 --temperature 0 --device reference 2> /dev/null)"
[[ -n "$out" ]] || fail "gguf run printed nothing"
"$tachyon" info "$gguf" --json > "$tmp/ginfo.json" 2> /dev/null
grep -q '"runs_as": "Affine 4-bit g32 F32"' "$tmp/ginfo.json" || fail "gguf info: $(cat "$tmp/ginfo.json")"
head -c 5000000 "$gguf" > "$tmp/cut.gguf"
if "$tachyon" info "$tmp/cut.gguf" 2> "$tmp/err" > /dev/null; then fail "a truncated GGUF file was accepted"; fi
grep -q "cut.gguf: tensor '.*' .*truncated" "$tmp/err" || fail "truncated GGUF: $(cat "$tmp/err")"

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
head -c $((8 + header_len)) "$tmp/l.safetensors" | tail -c "$header_len" | grep '"shape":\[3,512\]' > /dev/null || fail "logits header"
if "$tachyon" logits "$root/tests/fixtures/hf/qwen2" --ids 1,x --out "$tmp/x" 2> "$tmp/err"; then fail "bad --ids accepted"; fi
grep -q "'x' is not a token id" "$tmp/err" || fail "bad --ids message: $(cat "$tmp/err")"

# run --ids is deterministic at temperature 0, with and without speculation
a="$("$tachyon" run --ids 1,2,3,4 -n 12 --show-ids --no-pld --no-drafter --no-mtp 2> /dev/null)"
b="$("$tachyon" run --ids 1,2,3,4 -n 12 --show-ids --speculative-config '{"method":"mtp"}' 2> /dev/null)"
[[ -n "$a" && "$a" == "$b" ]] || fail "run: '$a' vs '$b'"
# the default holds every drafter the demo has (ngram, draft, mtp, dflash, the merged tree over ngram, draft and mtp;
# suffix only by method) and chooses per request
b="$("$tachyon" run --ids 1,2,3,4 -n 12 --show-ids 2> "$tmp/err")"
[[ "$a" == "$b" ]] || fail "run with the default drafter set: '$a' vs '$b'"
grep -q "speculative decoding: ngram (k 6), draft (k 4), mtp (k 4), dflash (k 7), merged (k 4) held" "$tmp/err" || fail "default drafter set: $(cat "$tmp/err")"
# --drafter takes a model name too (here the alias of the embedded model)
b="$("$tachyon" run --ids 1,2,3,4 -n 12 --show-ids --speculative-config '{"method":"draft"}' --drafter tachyon-demo 2> /dev/null)"
[[ "$a" == "$b" ]] || fail "run --drafter ALIAS: '$a' vs '$b'"
# --kv-cache-dtype: every format runs (f32 and the default bf16 agree on this short greedy run),
# --tensor-parallel 2 on the CPU (two ranks of the demo model, KV heads split) gives the same greedy
# ids, with and without speculation; a split that does not divide is refused naming the field
tp="$("$tachyon" run --ids 1,2,3,4 -n 12 --show-ids --no-pld --no-drafter --no-mtp --device cpu --tensor-parallel 2 2> /dev/null)"
[[ "$tp" == "$a" ]] || fail "run --tensor-parallel 2: '$tp' vs '$a'"
tp="$("$tachyon" run --ids 1,2,3,4 -n 12 --show-ids --speculative-config '{"method":"mtp"}' --device cpu --tensor-parallel 2 2> /dev/null)"
[[ "$tp" == "$a" ]] || fail "run --tensor-parallel 2 with mtp: '$tp' vs '$a'"
if "$tachyon" run --ids 1,2 -n 2 --device cpu --tensor-parallel 4 > /dev/null 2> "$tmp/tp_err"; then fail "--tensor-parallel 4 accepted"; fi
grep -q "num_attention_heads (6) divisible by 4" "$tmp/tp_err" || fail "--tensor-parallel 4: $(cat "$tmp/tp_err")"

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
"$tachyon" info --json > "$tmp/info.json" 2> /dev/null
grep -q '"kv_formats"' "$tmp/info.json" || fail "info --json: kv_formats"
# each drafter's default depth: prompt lookup 6, the model drafters 4, DFlash its block - 1
/usr/bin/python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["speculation"]; sys.exit(0 if [s[m]["max_drafts"] for m in ("ngram","suffix","draft","mtp","dflash")] == [6,6,4,4,7] else 1)' "$tmp/info.json" ||
  fail "info --json: max_drafts"

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
"$tachyon" info tachyon-demo --json | grep '"source": "alias"' > /dev/null || fail "info by alias"
# --quantize: info shows the weight bytes per format; run generates (the reference backend runs
# every format); a quantized checkpoint's method and formats are shown
"$tachyon" info --quantize int4 --device reference --json | grep '"Affine 4-bit g64 F16"' > /dev/null || fail "info --quantize int4"
"$tachyon" run --quantize fp8 --device reference --prompt "def add(a, b):" -n 4 > /dev/null 2>&1 || fail "run --quantize fp8"
"$tachyon" info "$root/tests/fixtures/quant/mlx_qwen3" --device reference 2> /dev/null |
  grep -q '^quantization *mlx' || fail "info: quantization method of an MLX checkpoint"
"$tachyon" run --quantize int3 --prompt x > /dev/null 2>&1 && fail "run --quantize int3 is refused"
# --quantize-decode: info shows the decode copies' bytes per format beside the bf16 weights, and the
# footprint; run generates; fp8, both flags at once and a quantized checkpoint are refused by name
"$tachyon" info --quantize-decode int4 --json 2> /dev/null > "$tmp/qd.json"
grep -A1 '"decode_copy_bytes"' "$tmp/qd.json" | grep '"Affine 4-bit g64 F16"' > /dev/null || fail "info --quantize-decode: $(cat "$tmp/qd.json")"
grep -q '"weight_footprint_bytes"' "$tmp/qd.json" || fail "info --quantize-decode: no footprint"
"$tachyon" info --quantize-decode int8 2> /dev/null | grep '^decode copies .* MiB (decode and verify rows read these; footprint' > /dev/null ||
  fail "info --quantize-decode text"
"$tachyon" run --quantize-decode int8 --prompt "def add(a, b):" -n 4 > /dev/null 2>&1 || fail "run --quantize-decode int8"
"$tachyon" run --quantize-decode fp8 --prompt x > /dev/null 2> "$tmp/err" && fail "run --quantize-decode fp8 is refused"
grep -q -- "--quantize-decode" "$tmp/err" || fail "--quantize-decode fp8: $(cat "$tmp/err")"
"$tachyon" run --quantize int8 --quantize-decode int4 --prompt x > /dev/null 2> "$tmp/err" && fail "both quantize flags"
grep -q -- "--quantize int8 and --quantize-decode int4" "$tmp/err" || fail "both flags: $(cat "$tmp/err")"
"$tachyon" info "$root/tests/fixtures/quant/mlx_qwen3" --quantize-decode int8 > /dev/null 2> "$tmp/err" &&
  fail "--quantize-decode of an MLX checkpoint"
grep -q "is quantized already (mlx)" "$tmp/err" || fail "--quantize-decode of MLX: $(cat "$tmp/err")"

# info prints KV bytes per token per format (demo: 6 layers x 2 KV heads x 64 x K,V) and the longest context
"$tachyon" info 2> /dev/null > "$tmp/info_kv.txt"
grep -q '^KV per token *bf16 3072 B, f16 3072 B, f32 6144 B, fp8 1632 B, int4 960 B, int8 1728 B, turbo 1296 B$' "$tmp/info_kv.txt" || fail "info KV: $(grep KV "$tmp/info_kv.txt")"
grep -q '^longest context  bf16 [0-9]*, f16 [0-9]*, f32 [0-9]*, fp8 [0-9]*, int4 [0-9]*, int8 [0-9]*, turbo [0-9]* tokens (CPU default pool' "$tmp/info_kv.txt" ||
  fail "info longest context: $(grep longest "$tmp/info_kv.txt")"
# the KV sizing flags: byte suffixes, the older --kv-memory GiB, and clear errors
"$tachyon" run --ids 1,2,3 -n 3 --kv-cache-memory 8M > /dev/null 2>&1 || fail "run --kv-cache-memory 8M"
"$tachyon" run --ids 1,2,3 -n 3 --kv-memory 0.01 > /dev/null 2>&1 || fail "run --kv-memory 0.01 (GiB)"
if "$tachyon" run --ids 1,2,3 -n 3 --kv-cache-memory lots 2> "$tmp/err" > /dev/null; then fail "--kv-cache-memory lots"; fi
grep -q "'lots' is not a byte size" "$tmp/err" || fail "--kv-cache-memory error: $(cat "$tmp/err")"
if "$tachyon" run --ids 1,2,3 -n 3 --kv-cache-memory 1K 2> "$tmp/err" > /dev/null; then fail "--kv-cache-memory 1K"; fi
grep -q "holds no block" "$tmp/err" || fail "--kv-cache-memory 1K error: $(cat "$tmp/err")"

# info --json names the speculation methods
"$tachyon" info --json | grep '"MTP heads: 1, all 15 tensors verified"' > /dev/null || fail "info --json"
"$tachyon" info --json | grep -A3 '"dflash"' | grep '"eligible": true' > /dev/null || fail "info --json: dflash"
"$tachyon" info --json | grep -A6 '"merged"' | grep -q 'one tree from ngram + draft + mtp' || fail "info --json: merged"
# info --json says where draft trees apply: not on a hybrid (recurrent-state) model
"$tachyon" info --json | grep -A1 '"draft_trees"' | grep '"eligible": true' > /dev/null || fail "info --json: draft trees"
"$tachyon" info --json "$root/tests/fixtures/hf/qwen3_next" 2> /dev/null | grep -A1 '"draft_trees"' |
  grep -q '"eligible": false' || fail "info --json: draft trees on a hybrid model"
# info shows generation_config.json's sampling defaults (a copy of the qwen2 fixture with some)
mkdir "$tmp/sampled"
for f in config.json model.safetensors; do ln -s "$root/tests/fixtures/hf/qwen2/$f" "$tmp/sampled/$f"; done
printf '{"do_sample": true, "temperature": 0.6, "top_p": 0.95, "top_k": 20, "min_p": 0.05}' > "$tmp/sampled/generation_config.json"
"$tachyon" info "$tmp/sampled" 2> /dev/null > "$tmp/info.txt"
grep -q '^sampling .*min_p 0.05, temperature 0.6, top_k 20, top_p 0.95 (generation_config.json' "$tmp/info.txt" ||
  fail "info sampling: $(grep sampling "$tmp/info.txt")"
"$tachyon" info "$root/tests/fixtures/hf/qwen2" 2> /dev/null | grep '^sampling *none' > /dev/null || fail "info: no sampling defaults"
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
