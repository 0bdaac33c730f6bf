// A GGUF file served as it is (issue #45): `tachyon serve demo-q4_k_m.gguf` (written by llama.cpp's
// llama-quantize; weights, tokenizer and chat template from the file) answers the official OpenAI and
// Anthropic SDKs, lists itself as GGUF to Ollama clients, and continues llama.cpp's three reference
// id sequences as llama.cpp did (tests/fixtures/gguf/README.md; llama.cpp rounds activations, so the
// comparison is over the first 16 tokens, before the one measured near-tie of these sequences).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { Anthropic, OpenAI, startOwnServer } from './helpers.mjs';

const fixtures = path.resolve('tests/fixtures/gguf');
const gguf = path.join(fixtures, 'demo-q4_k_m.gguf');
const { server, port } = await startOwnServer(['--kv-cache-dtype', 'f32', '--kv-blocks', '256'], gguf);
const base = `http://127.0.0.1:${port}`;
const name = 'demo-q4_k_m';
test.after(() => server.kill('SIGTERM'));

// The I64 tensors of a safetensors file (the reference's ids).
function readIds(file) {
  const bytes = readFileSync(file);
  const headerLength = Number(bytes.readBigUInt64LE(0));
  const header = JSON.parse(bytes.subarray(8, 8 + headerLength).toString('utf8'));
  const ids = {};
  for (const [key, t] of Object.entries(header)) {
    if (key === '__metadata__' || t.dtype !== 'I64') continue;
    const [begin, end] = t.data_offsets;
    const data = bytes.subarray(8 + headerLength + begin, 8 + headerLength + end);
    ids[key] = Array.from({ length: (end - begin) / 8 }, (_, i) => Number(data.readBigInt64LE(8 * i)));
  }
  return ids;
}
const reference = readIds(path.join(fixtures, 'demo-q4_k_m.reference.safetensors'));
const detokenize = (ids) => JSON.parse(execFileSync(process.env.TACHYON_BIN, ['detokenize', gguf],
  { input: JSON.stringify(ids) }).toString());

test('the file is listed under its name, as GGUF, by every API', async () => {
  const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'none', maxRetries: 0 });
  assert.deepEqual((await openai.models.list()).data.map((m) => m.id), [name]);
  const tags = await (await fetch(`${base}/api/tags`)).json();
  assert.equal(tags.models[0].details.format, 'gguf');
  assert.equal(tags.models[0].details.family, 'qwen3');
});

test("greedy continuations of llama.cpp's id sequences match llama.cpp's", async () => {
  const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'none', maxRetries: 0 });
  for (const i of [0, 1, 2]) {
    const expected = detokenize(reference[`greedy_${i}`].slice(0, 16));
    const out = await openai.completions.create({ model: name, prompt: reference[`input_ids_${i}`], max_tokens: 16,
      temperature: 0 });
    assert.equal(out.usage.completion_tokens, 16);
    assert.equal(out.choices[0].text, expected, `sequence ${i}`);
  }
});

test('chat through the OpenAI and Anthropic SDKs uses the chat template from the file', async () => {
  const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'none', maxRetries: 0 });
  const chat = await openai.chat.completions.create({ model: name, max_tokens: 12, temperature: 0,
    messages: [{ role: 'user', content: 'Write a Python function that adds two numbers.' }] });
  assert.ok(chat.usage.prompt_tokens > 10);
  assert.ok(chat.choices[0].message.content.length > 0);
  let streamed = '';
  for await (const chunk of await openai.chat.completions.create({ model: name, max_tokens: 12, temperature: 0,
    stream: true, messages: [{ role: 'user', content: 'Write a Python function that adds two numbers.' }] }))
    streamed += chunk.choices[0]?.delta?.content ?? '';
  assert.equal(streamed, chat.choices[0].message.content);

  const anthropic = new Anthropic({ baseURL: base, apiKey: 'none', maxRetries: 0 });
  const msg = await anthropic.messages.create({ model: name, max_tokens: 12, temperature: 0,
    messages: [{ role: 'user', content: 'Write a Python function that adds two numbers.' }] });
  // the same rendered prompt: the earlier requests left it in the prefix cache
  assert.equal(msg.usage.input_tokens + msg.usage.cache_read_input_tokens, chat.usage.prompt_tokens);
  assert.equal(msg.content[0].text, chat.choices[0].message.content);
});
