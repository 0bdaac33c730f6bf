// Access control on a server of its own: `--api-key-file` with two keys (either opens the API,
// through the official SDKs too; anything else is a 401 in the API's shape), `--metrics-auth`,
// and `--cors-origins` with a list (a listed origin is echoed, with Vary: Origin; another gets
// no CORS header, so browsers refuse it). No key, good or bad, ever reaches the server's log.
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';

import { OpenAI, model, startOwnServer } from './helpers.mjs';

const keyFile = path.join(mkdtempSync(path.join(os.tmpdir(), 'tachyon-keys-')), 'keys.txt');
writeFileSync(keyFile, '# team keys\nkey-alpha-1\n\n  key-beta-22  \n');
const { server, port, log } = await startOwnServer(['--api-key-file', keyFile, '--metrics-auth', '--cors-origins',
  'https://chat.example.com, http://localhost:3000', '--kv-blocks', '64']);
const base = `http://127.0.0.1:${port}`;
test.after(() => server.kill('SIGTERM'));

const chat = (apiKey) => new OpenAI({ baseURL: `${base}/v1`, apiKey, maxRetries: 0 }).chat.completions.create({
  model, max_tokens: 2, messages: [{ role: 'user', content: 'hi' }] });

test('every key of the file opens the API, trimmed; other keys and none are 401', async () => {
  assert.equal((await chat('key-alpha-1')).usage.completion_tokens, 2);
  assert.equal((await chat('key-beta-22')).usage.completion_tokens, 2);
  for (const bad of ['key-alpha', 'key-alpha-12', '# team keys', 'KEY-BETA-22']) {
    await assert.rejects(chat(bad), (e) => e.status === 401 && e.code === 'invalid_api_key', bad);
  }
  const anon = await fetch(`${base}/v1/models`);
  assert.equal(anon.status, 401);
  const viaHeader = await fetch(`${base}/v1/models`, { headers: { 'x-api-key': 'key-beta-22' } });
  assert.equal(viaHeader.status, 200);
});

test('/metrics needs a key with --metrics-auth; /health does not', async () => {
  assert.equal((await fetch(`${base}/metrics`)).status, 401);
  const ok = await fetch(`${base}/metrics`, { headers: { Authorization: 'Bearer key-alpha-1' } });
  assert.equal(ok.status, 200);
  assert.match(await ok.text(), /^tachyon_/m);
  assert.equal((await fetch(`${base}/health`)).status, 200);
});

test('CORS answers listed origins only', async () => {
  const listed = await fetch(`${base}/v1/models`, { headers: { Origin: 'http://localhost:3000',
    Authorization: 'Bearer key-alpha-1' } });
  assert.equal(listed.headers.get('access-control-allow-origin'), 'http://localhost:3000');
  assert.match(listed.headers.get('vary') ?? '', /Origin/);
  const preflight = await fetch(`${base}/v1/chat/completions`, { method: 'OPTIONS',
    headers: { Origin: 'https://chat.example.com', 'Access-Control-Request-Method': 'POST' } });
  assert.equal(preflight.status, 204);
  assert.equal(preflight.headers.get('access-control-allow-origin'), 'https://chat.example.com');
  const other = await fetch(`${base}/v1/models`, { headers: { Origin: 'https://evil.example',
    Authorization: 'Bearer key-alpha-1' } });
  assert.equal(other.status, 200);
  assert.equal(other.headers.get('access-control-allow-origin'), null);
});

test('no key, accepted or refused, appears in the server log', async () => {
  const secrets = ['key-alpha-1', 'key-beta-22', 'wrong-secret-7f3a', 'bearer-only-91c2'];
  // Every path that could log a request: success, 401, 400 (bad body), 404 (unknown model),
  // a model name and a body carrying the key, and /metrics.
  await chat('key-alpha-1');
  await assert.rejects(chat('wrong-secret-7f3a'), (e) => e.status === 401);
  const auth = { Authorization: 'Bearer key-beta-22', 'Content-Type': 'application/json' };
  assert.equal((await fetch(`${base}/v1/chat/completions`, { method: 'POST', headers: auth, body: '{"model": ' })).status, 400);
  assert.equal((await fetch(`${base}/v1/chat/completions`, { method: 'POST', headers: auth,
    body: JSON.stringify({ model: 'key-beta-22', messages: [{ role: 'user', content: 'x' }] }) })).status, 404);
  assert.equal((await fetch(`${base}/v1/models`, { headers: { 'x-api-key': 'bearer-only-91c2' } })).status, 401);
  assert.equal((await fetch(`${base}/metrics`, { headers: { Authorization: 'Bearer key-alpha-1' } })).status, 200);
  await new Promise((r) => setTimeout(r, 200));  // let the last log lines arrive
  for (const secret of secrets) assert.ok(!log().includes(secret), `the server log holds '${secret}':\n${log()}`);
});
