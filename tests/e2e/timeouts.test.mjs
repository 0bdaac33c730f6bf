// Time limits on servers of their own: `--request-timeout` ends a generation with its output so
// far and finish reason "timeout" (streaming and not), freeing its KV
// blocks; SIGTERM with `--shutdown-timeout` ends the generations in flight at the end of the
// grace period the same way, and the server exits 0.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { OpenAI, model, openai as shared, startOwnServer } from './helpers.mjs';

// EOS pushed out of reach, so only a limit ends these generations (the demo's context is 4096).
const endless = { model, max_tokens: 4000, temperature: 0, logit_bias: { 8179: -100, 8181: -100 },
  messages: [{ role: 'user', content: 'Write a long Python module.' }] };

// The time limit the tests set, in seconds: 0.5, or less where the machine would generate all of
// `endless` within it (a GPU writes the 4000 tokens in under half a second): a quarter of the time
// 1000 tokens take at the speed the shared server shows on 256 of them, first token included, so
// the limit ends the generation after some output and long before its end. At least 50 ms.
async function limitSeconds() {
  const t0 = performance.now();
  const r = await shared.chat.completions.create({ ...endless, max_tokens: 256 });
  const perToken = (performance.now() - t0) / 1000 / r.usage.completion_tokens;
  return Math.max(0.05, Math.min(0.5, 250 * perToken)).toFixed(3);
}

// A first short request, so that the timed ones do not carry the new server's first-use costs.
async function warmUp(client) {
  await client.chat.completions.create({ ...endless, max_tokens: 2 });
}
const metric = async (base, name) => Number((await (await fetch(`${base}/metrics`)).text())
  .match(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\d+)`, 'm'))[1]);

test('--request-timeout ends generations with their output so far', async () => {
  const limit = await limitSeconds();
  const { server, port } = await startOwnServer(['--request-timeout', limit, '--kv-blocks', '512']);
  const base = `http://127.0.0.1:${port}`;
  try {
    const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'none', maxRetries: 0 });
    await warmUp(openai);
    const t0 = Date.now();
    const whole = await openai.chat.completions.create(endless);
    assert.equal(whole.choices[0].finish_reason, 'timeout');
    assert.ok(whole.usage.completion_tokens > 0 && whole.usage.completion_tokens < 4000, `${whole.usage.completion_tokens}`);
    assert.ok(whole.choices[0].message.content.length > 0);
    assert.ok(Date.now() - t0 < 10000);

    let text = '', finish = null;
    for await (const chunk of await openai.chat.completions.create({ ...endless, stream: true })) {
      text += chunk.choices[0]?.delta?.content ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    assert.equal(finish, 'timeout');
    assert.ok(text.length > 0);

    // Every block is back in the pool once the requests are gone.
    for (let i = 0; i < 50 && await metric(base, 'tachyon_kv_blocks_used') > 0; ++i)
      await new Promise((r) => setTimeout(r, 100));
    assert.equal(await metric(base, 'tachyon_kv_blocks_used'), 0);
  } finally {
    server.kill('SIGKILL');
  }
});

test('SIGTERM drains within --shutdown-timeout and exits 0', async () => {
  const { server, port } = await startOwnServer(['--shutdown-timeout', await limitSeconds(), '--kv-blocks', '512']);
  const openai = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'none', maxRetries: 0 });
  await warmUp(openai);
  const exited = new Promise((resolve) => server.on('exit', (code) => resolve(code)));
  let text = '', finish = null, sent = false;
  for await (const chunk of await openai.chat.completions.create({ ...endless, stream: true })) {
    text += chunk.choices[0]?.delta?.content ?? '';
    finish = chunk.choices[0]?.finish_reason ?? finish;
    if (!sent && text.length > 0) {
      server.kill('SIGTERM');
      sent = true;
    }
  }
  assert.equal(finish, 'timeout');
  assert.equal(await exited, 0);
});
