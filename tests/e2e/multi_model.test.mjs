// Several models on one server: `tachyon serve DEMO ALT --max-loaded-models 1`, where ALT is the
// demo's weights under another folder name with its own generation_config.json (temperature
// 0.5), so that /api/show tells which model answered. Checks the listings, that a request's
// model picks one (by name or by an alias resolving to its folder), the 404 with the served
// names in each API's shape, and that alternating requests unload and reload the models.
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';

import { Anthropic, OpenAI, Ollama, model, startOwnServer } from './helpers.mjs';

const demoDir = process.env.TACHYON_MODEL_DIR;
const altDir = path.join(mkdtempSync(path.join(os.tmpdir(), 'tachyon-multi-')), 'alt');
{
  const { mkdirSync } = await import('node:fs');
  mkdirSync(altDir);
  for (const f of readdirSync(demoDir))
    if (f !== 'generation_config.json') symlinkSync(path.join(demoDir, f), path.join(altDir, f));
  writeFileSync(path.join(altDir, 'generation_config.json'),
    JSON.stringify({ bos_token_id: 8179, eos_token_id: [8181, 8179], temperature: 0.5 }));
}

const { server, port } = await startOwnServer([altDir, '--max-loaded-models', '1', '--kv-blocks', '256']);
const base = `http://127.0.0.1:${port}`;
const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'none', maxRetries: 0 });
const anthropic = new Anthropic({ baseURL: base, apiKey: 'none', maxRetries: 0 });
const ollama = new Ollama({ host: base });
const getJson = async (route) => (await fetch(`${base}${route}`)).json();
const loaded = async () => (await ollama.ps()).models.map((m) => m.name);
const unloads = async () => Number((await (await fetch(`${base}/metrics`)).text())
  .match(/^tachyon_model_unloads_total (\d+)$/m)[1]);
const chat = (name) => openai.chat.completions.create({ model: name, max_tokens: 4,
  messages: [{ role: 'user', content: 'Write a Python function that adds two numbers.' }] });

test.after(() => server.kill('SIGTERM'));

test('both models are listed, the first loaded at start', async () => {
  assert.deepEqual((await openai.models.list()).data.map((m) => m.id), [model, 'alt']);
  assert.deepEqual((await ollama.list()).models.map((m) => m.name), [`${model}:latest`, 'alt:latest']);
  assert.deepEqual(await loaded(), [`${model}:latest`]);
  assert.equal((await openai.models.retrieve('alt')).id, 'alt');
});

test("a request's model picks the model that answers, and one is loaded at a time", async () => {
  const before = await unloads();
  const alt = await chat('alt');
  assert.equal(alt.model, 'alt');
  assert.equal(alt.usage.completion_tokens, 4);
  assert.deepEqual(await loaded(), ['alt:latest']);
  const demo = await chat(model);
  assert.equal(demo.model, model);
  assert.deepEqual(await loaded(), [`${model}:latest`]);
  // Ollama and Anthropic pick the same way; ALT's own generation_config shows through /api/show.
  const show = await ollama.show({ model: 'alt' });
  assert.match(show.parameters, /temperature\s+0\.5/);
  assert.doesNotMatch((await ollama.show({ model })).parameters ?? '', /temperature/);
  const reply = await ollama.chat({ model: 'alt:latest', messages: [{ role: 'user', content: 'hi' }],
    options: { num_predict: 3 } });
  assert.equal(reply.model, 'alt');
  const msg = await anthropic.messages.create({ model, max_tokens: 3, messages: [{ role: 'user', content: 'hi' }] });
  assert.equal(msg.model, model);
  assert.ok(await unloads() >= before + 3);
  assert.deepEqual(await loaded(), [`${model}:latest`]);
});

test('an alias resolving to a served folder picks that model; streaming holds it to the end', async () => {
  const stream = await openai.chat.completions.create({ model: altDir, max_tokens: 6, stream: true,
    messages: [{ role: 'user', content: 'hi' }] });
  let text = '', name = null;
  for await (const chunk of stream) {
    name = chunk.model;
    text += chunk.choices[0]?.delta?.content ?? '';
  }
  assert.equal(name, 'alt');
  assert.ok(text.length > 0);
  assert.deepEqual(await loaded(), ['alt:latest']);
});

test('an unknown model is a 404 listing the served names, in each API\'s shape', async () => {
  const names = new RegExp(`'${model}', 'alt'`);
  await assert.rejects(chat('nope'), (e) => {
    assert.equal(e.status, 404);
    assert.equal(e.code, 'model_not_found');
    assert.match(e.message, names);
    return true;
  });
  await assert.rejects(anthropic.messages.create({ model: 'nope', max_tokens: 3,
    messages: [{ role: 'user', content: 'hi' }] }), (e) => {
    assert.equal(e.status, 404);
    assert.equal(e.error.error.type, 'not_found_error');
    assert.match(e.error.error.message, names);
    return true;
  });
  await assert.rejects(ollama.chat({ model: 'nope', messages: [{ role: 'user', content: 'hi' }] }), (e) => {
    assert.equal(e.status_code, 404);
    assert.match(e.error, /model 'nope' not found/);
    assert.match(e.error, names);
    return true;
  });
  const models = await fetch(`${base}/v1/models/nope`);
  assert.equal(models.status, 404);
  assert.match((await models.json()).error.message, names);
  assert.equal((await getJson('/health')).status, 'ok');
});
