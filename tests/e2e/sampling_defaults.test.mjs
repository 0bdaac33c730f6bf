// A model's generation_config.json sampling defaults reach every API, and a request's own
// values win. Own server on a copy of the demo model (its files linked) whose
// generation_config.json sets top_k 1: a request that leaves top_k out then decodes greedily
// at any temperature, one that sets it samples.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, symlinkSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { OpenAI, Anthropic, Ollama, startOwnServer } from './helpers.mjs';

const demo = process.env.TACHYON_MODEL_DIR;
const dir = mkdtempSync(path.join(tmpdir(), 'tachyon-sampled-'));
const modelDir = path.join(dir, 'sampled-demo');
const model = 'sampled-demo';
mkdirSync(modelDir);
for (const entry of readdirSync(demo))
  if (entry !== 'generation_config.json') symlinkSync(path.join(demo, entry), path.join(modelDir, entry));
const config = JSON.parse(readFileSync(path.join(demo, 'generation_config.json'), 'utf8'));
writeFileSync(path.join(modelDir, 'generation_config.json'),
  JSON.stringify({ ...config, do_sample: true, temperature: 1.0, top_k: 1, top_p: 0.95 }));

const { server, port } = await startOwnServer(['--ctx-size', '1024', '--kv-blocks', '256'], modelDir);
after(() => {
  server.kill('SIGTERM');
  rmSync(dir, { recursive: true, force: true });
});
const url = `http://127.0.0.1:${port}`;
const openai = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'none', maxRetries: 0 });
const anthropic = new Anthropic({ baseURL: url, apiKey: 'none', maxRetries: 0 });
const ollama = new Ollama({ host: url });
const messages = [{ role: 'user', content: 'Write a Python function `is_prime(n)`.' }];

test('a request that leaves top_k out gets the model\'s top_k 1: greedy in every API', async () => {
  const greedy = (await openai.chat.completions.create({ model, messages, max_tokens: 24, temperature: 0 }))
    .choices[0].message.content;
  for (const seed of [1, 2]) {
    const chat = await openai.chat.completions.create({ model, messages, max_tokens: 24, seed });
    assert.equal(chat.choices[0].message.content, greedy);
    const message = await anthropic.messages.create({ model, messages, max_tokens: 24, temperature: 1 });
    assert.equal(message.content.map((b) => b.text ?? '').join(''), greedy);
    const o = await ollama.chat({ model, messages, options: { num_predict: 24, seed } });
    assert.equal(o.message.content, greedy);
  }
});

test('a request\'s own top_k wins over the model\'s', async () => {
  const texts = new Set();
  for (const seed of [1, 2, 3, 4]) {
    const chat = await openai.chat.completions.create({ model, messages, max_tokens: 24, seed, top_k: 0 });
    texts.add(chat.choices[0].message.content);
    const o = await ollama.chat({ model, messages, options: { num_predict: 24, seed, top_k: 0 } });
    texts.add(o.message.content);
  }
  assert.ok(texts.size > 1, 'sampling without the model\'s top_k gave one text for every seed');
});

test('/api/show lists the defaults as Ollama parameters', async () => {
  const show = await ollama.show({ model });
  assert.match(show.parameters, /^temperature +1$/m);
  assert.match(show.parameters, /^top_k +1$/m);
  assert.match(show.parameters, /^top_p +0.95$/m);
  assert.match(show.modelfile, /^PARAMETER top_k +1$/m);
});
