// /v1/embeddings through the official `openai` client, on a server of the test's own serving the
// tiny Qwen3-Embedding-shaped fixture (last-token pooling, normalized; golden.json from
// transformers), and the 400 a generation model answers.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { openai, OpenAI, Ollama, ollama, model, startOwnServer } from './helpers.mjs';

const fixture = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../fixtures/embedding/qwen3_embedding');
const golden = JSON.parse(readFileSync(path.join(fixture, 'golden.json'), 'utf8'));

function relativeError(a, b) {
  let diff = 0, ref = 0;
  for (let i = 0; i < b.length; i++) { diff += (a[i] - b[i]) ** 2; ref += b[i] ** 2; }
  return Math.sqrt(diff / ref);
}
const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));

test('a generation model refuses /v1/embeddings with a 400 naming the model (Ollama: 501)', async () => {
  await assert.rejects(openai.embeddings.create({ model, input: 'hello' }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === 'model' && /embedding/.test(e.message));
  await assert.rejects(ollama.embed({ model, input: 'hello' }), (e) => e.status_code === 501);
});

test('embeddings: token-id inputs match transformers; strings, lists, base64 and dimensions', async (t) => {
  const { server, port } = await startOwnServer(['--ctx-size', '256', '--kv-blocks', '64'], fixture);
  t.after(() => server.kill('SIGTERM'));
  const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'none', maxRetries: 0, timeout: 60000 });
  const name = path.basename(fixture);

  // Token ids, as transformers saw them; the SDK asks for base64 by default and decodes it.
  const byIds = await client.embeddings.create({ model: name, input: golden.inputs });
  assert.equal(byIds.object, 'list');
  assert.equal(byIds.data.length, golden.inputs.length);
  byIds.data.forEach((d, i) => {
    assert.equal(d.index, i);
    assert.equal(d.embedding.length, 64);
    assert.ok(relativeError(d.embedding, golden.last_token[i]) < 1e-2, `input ${i}`);
    assert.ok(Math.abs(norm(d.embedding) - 1) < 1e-4);
  });
  assert.equal(byIds.usage.prompt_tokens, golden.inputs.reduce((n, ids) => n + ids.length, 0));

  // Floats in JSON are the same numbers as the base64 bytes.
  const floats = await client.embeddings.create({ model: name, input: golden.inputs[2], encoding_format: 'float' });
  assert.deepEqual(floats.data[0].embedding.map((x) => Math.fround(x)), Array.from(byIds.data[2].embedding));

  // Strings: one, and a list (each its own vector, the same as alone).
  const one = await client.embeddings.create({ model: name, input: 'The quick brown fox', encoding_format: 'float' });
  const many = await client.embeddings.create({ model: name, input: ['The quick brown fox', 'jumps over'],
    encoding_format: 'float' });
  assert.equal(many.data.length, 2);
  assert.ok(relativeError(many.data[0].embedding, one.data[0].embedding) < 1e-6);
  assert.ok(relativeError(many.data[1].embedding, one.data[0].embedding) > 1e-3, 'different texts, different vectors');

  // Matryoshka: the first d values, normalized again.
  const cut = await client.embeddings.create({ model: name, input: 'The quick brown fox', dimensions: 16,
    encoding_format: 'float' });
  const head = one.data[0].embedding.slice(0, 16);
  const n = norm(head);
  assert.equal(cut.data[0].embedding.length, 16);
  assert.ok(relativeError(cut.data[0].embedding, head.map((x) => x / n)) < 1e-5);

  for (const bad of [{ input: '' }, { input: 'x', encoding_format: 'int8' }, { input: 'x', dimensions: 65 },
    { input: [[1, 99999]] }])
    await assert.rejects(client.embeddings.create({ model: name, ...bad }), OpenAI.BadRequestError, JSON.stringify(bad));
  // Ollama's /api/embed and /api/embeddings give the same vectors.
  const ol = new Ollama({ host: `http://127.0.0.1:${port}` });
  const viaOllama = await ol.embed({ model: name, input: ['The quick brown fox', 'jumps over'] });
  assert.equal(viaOllama.embeddings.length, 2);
  assert.ok(relativeError(viaOllama.embeddings[0], one.data[0].embedding) < 1e-6);
  assert.ok(viaOllama.prompt_eval_count > 0);
  const legacy = await ol.embeddings({ model: name, prompt: 'jumps over' });
  assert.ok(relativeError(legacy.embedding, many.data[1].embedding) < 1e-6);
  assert.deepEqual((await ol.show({ model: name })).capabilities, ['embedding']);

  // Generation on an embedding model is refused.
  await assert.rejects(client.completions.create({ model: name, prompt: 'x', max_tokens: 2 }),
    (e) => e instanceof OpenAI.BadRequestError && /embedding model/.test(e.message));
});
