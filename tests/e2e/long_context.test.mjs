// A model whose context does not fit the KV pool of earlier releases (a fixed 1 GiB): the demo's
// weights with max_position_embeddings 524288. Its f32 KV takes 6 layers x 2 KV heads x 64 x
// (K, V) x 4 bytes = 6 KiB a token, 3 GiB for one full context (1.5 GiB in bf16). `tachyon serve`
// without any KV flag sizes the pool from the machine (half the available memory, at most
// --max-concurrent full contexts), keeps the model's whole context, and answers requests that
// give no max_tokens: generation may run to the end of the context; only a prompt longer than
// the context is refused.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';

import { OpenAI, Ollama, countTokens, qwen3Prompt, startOwnServer } from './helpers.mjs';

const kContext = 524288;
const demoDir = process.env.TACHYON_MODEL_DIR;
const longDir = path.join(mkdtempSync(path.join(os.tmpdir(), 'tachyon-longctx-')), 'longctx');
mkdirSync(longDir);
for (const f of readdirSync(demoDir))
  if (f !== 'config.json') symlinkSync(path.join(demoDir, f), path.join(longDir, f));
const config = JSON.parse(readFileSync(path.join(demoDir, 'config.json'), 'utf8'));
config.max_position_embeddings = kContext;
writeFileSync(path.join(longDir, 'config.json'), JSON.stringify(config));
const bytesPerToken = config.num_hidden_layers * config.num_key_value_heads * config.head_dim * 2 * 4;
assert.ok(bytesPerToken * kContext > 2 ** 30, 'the fixture must not fit the old 1 GiB pool');

const { server, port, log } = await startOwnServer(['--max-concurrent', '2'], longDir);
const base = `http://127.0.0.1:${port}`;
const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'none', maxRetries: 0, timeout: 120000 });
const ollama = new Ollama({ host: base });
const model = 'longctx';

test.after(() => server.kill('SIGTERM'));

test('the pool is sized from the machine and holds the whole context', () => {
  assert.match(log(), /longctx: KV pool \d+ blocks of 16 tokens/);
  const context = Number(log().match(/longctx: context (\d+) tokens/)[1]);
  assert.equal(context, kContext, log());
});

test('chat without max_tokens: accepted, runs until something ends it (here a stop string)', async () => {
  const messages = [{ role: 'user', content: 'Name three colours.' }];
  const reference = await openai.chat.completions.create({ model, messages, temperature: 0, max_tokens: 8 });
  const text = reference.choices[0].message.content;
  assert.ok(text.length >= 2, `reference: ${JSON.stringify(text)}`);
  const stop = text.slice(-2);
  const reply = await openai.chat.completions.create({ model, messages, temperature: 0, stop: [stop] });
  assert.equal(reply.choices[0].finish_reason, 'stop');
  assert.equal(reply.usage.prompt_tokens, await countTokens(qwen3Prompt(messages)));
  assert.ok(reply.usage.completion_tokens >= 1 && reply.usage.completion_tokens <= 8, JSON.stringify(reply.usage));
  assert.ok(text.startsWith(reply.choices[0].message.content), `${reply.choices[0].message.content} vs ${text}`);
});

test('ollama without num_predict generates to the end of the context (num_ctx bounds this request)', async () => {
  const reply = await ollama.chat({ model, messages: [{ role: 'user', content: 'Count to one hundred.' }],
    options: { temperature: 0, num_ctx: 64 } });
  assert.equal(reply.done_reason, 'length');
  assert.equal(reply.prompt_eval_count + reply.eval_count, 64);
});

test('only a prompt longer than the context is refused, naming both numbers', async () => {
  const response = await fetch(`${base}/api/chat`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model, stream: false, messages: [{ role: 'user', content: 'Count to one hundred.' }],
      options: { num_ctx: 8 } }),
  });
  assert.equal(response.status, 400);
  const body = await response.json();
  assert.match(body.error, /maximum context length is 8 tokens; the prompt has \d+ tokens/);
});
