// The response cache (--response-cache) and the prefix cache's disk tier (--prefix-cache-dir),
// each on a server of its own.
//  - Response cache: a repeated greedy request is answered from the cache on every API (OpenAI
//    chat, streaming and not, completions, Responses; Anthropic; Ollama), with the same text and
//    usage saying so; sampled requests without a seed never are, seeded ones are; a changed
//    parameter misses; /metrics counts it.
//  - Disk tier: a server answers a request and is stopped; a new server on the same folder gives
//    the same output for the same request with cached_tokens > 0, and its /metrics show the
//    blocks were read from disk.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { OpenAI, collectChatStream, model, startOwnServer } from './helpers.mjs';

const common = ['--max-concurrent', '4', '--ctx-size', '1024', '--kv-blocks', '256'];
const servers = [];
after(() => { for (const s of servers) s.server.kill('SIGTERM'); });

async function post(port, route, body) {
  const response = await fetch(`http://127.0.0.1:${port}${route}`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body),
  });
  assert.equal(response.status, 200, `${route}: ${await response.clone().text()}`);
  return response.json();
}

async function metric(port, name) {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const m = text.match(new RegExp(`^${name}\\{[^}]*\\} (\\d+)`, 'm'));
  assert.ok(m, `${name} is missing from /metrics`);
  return Number(m[1]);
}

const question = (topic) => [{ role: 'user', content: `Write a short Python function about ${topic}.` }];

test('the response cache answers exact repeats of deterministic requests on every API', { timeout: 180000 }, async () => {
  const own = await startOwnServer([...common, '--response-cache', '16M']);
  servers.push(own);
  const { port } = own;
  const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'none', maxRetries: 0, timeout: 120000 });
  let hits = 0;

  // OpenAI chat, not streamed.
  const chat = { model, messages: question('sorting'), max_tokens: 24, temperature: 0 };
  const a = await client.chat.completions.create(chat);
  const b = await client.chat.completions.create(chat);
  assert.equal(a.usage.cached_response, undefined);
  assert.equal(b.usage.cached_response, true);
  assert.equal(b.choices[0].message.content, a.choices[0].message.content);
  assert.equal(b.choices[0].finish_reason, a.choices[0].finish_reason);
  assert.equal(b.usage.prompt_tokens_details.cached_tokens, b.usage.prompt_tokens);
  assert.equal(b.usage.completion_tokens, a.usage.completion_tokens);
  hits += 1;

  // Streamed: the replay comes as the same chunks.
  const streamed = { ...chat, messages: question('queues') };
  const s1 = await collectChatStream(streamed, client), s2 = await collectChatStream(streamed, client);
  assert.equal(s1.usage.cached_response, undefined);
  assert.equal(s2.usage.cached_response, true);
  assert.equal(s2.text, s1.text);
  assert.equal(s2.chunks, s1.chunks);
  assert.equal(s2.finish, s1.finish);
  hits += 1;
  // The same request not streamed is the same answer: the cache holds tokens, not API shapes.
  const s3 = await client.chat.completions.create(streamed);
  assert.equal(s3.usage.cached_response, true);
  assert.equal(s3.choices[0].message.content, s1.text);
  hits += 1;

  // A changed parameter is another request.
  const longer = await client.chat.completions.create({ ...chat, max_tokens: 25 });
  assert.equal(longer.usage.cached_response, undefined);
  const stopped = await client.chat.completions.create({ ...chat, stop: ['\n'] });
  assert.equal(stopped.usage.cached_response, undefined);

  // Sampling without a seed is never cached; with a seed it is.
  const sampled = { ...chat, messages: question('graphs'), temperature: 0.9 };
  for (let i = 0; i < 2; ++i)
    assert.equal((await client.chat.completions.create(sampled)).usage.cached_response, undefined);
  const seeded = { ...sampled, seed: 1234 };
  const x = await client.chat.completions.create(seeded), y = await client.chat.completions.create(seeded);
  assert.equal(x.usage.cached_response, undefined);
  assert.equal(y.usage.cached_response, true);
  assert.equal(y.choices[0].message.content, x.choices[0].message.content);
  hits += 1;

  // OpenAI completions.
  const completion = { model, prompt: 'def fibonacci(n):', max_tokens: 16, temperature: 0 };
  const c1 = await post(port, '/v1/completions', completion), c2 = await post(port, '/v1/completions', completion);
  assert.equal(c2.usage.cached_response, true);
  assert.equal(c2.choices[0].text, c1.choices[0].text);
  hits += 1;

  // OpenAI Responses.
  const responses = { model, input: 'Name three sorting algorithms.', max_output_tokens: 16, temperature: 0 };
  const r1 = await post(port, '/v1/responses', responses), r2 = await post(port, '/v1/responses', responses);
  assert.equal(r2.usage.cached_response, true);
  assert.equal(r2.usage.input_tokens_details.cached_tokens, r2.usage.input_tokens);
  const text = (r) => r.output.flatMap((item) => item.content ?? []).map((c) => c.text).join('');
  assert.ok(text(r1).length > 0);
  assert.equal(text(r2), text(r1));
  hits += 1;

  // Anthropic messages.
  const messages = { model, max_tokens: 16, temperature: 0, messages: question('stacks') };
  const m1 = await post(port, '/v1/messages', messages), m2 = await post(port, '/v1/messages', messages);
  assert.equal(m2.usage.cached_response, true);
  assert.equal(m2.usage.input_tokens, 0);
  assert.equal(m2.usage.cache_read_input_tokens, m1.usage.input_tokens + m1.usage.cache_read_input_tokens);
  assert.deepEqual(m2.content, m1.content);
  hits += 1;

  // Ollama chat.
  const ollama = { model, messages: question('trees'), stream: false, options: { temperature: 0, num_predict: 16 } };
  const o1 = await post(port, '/api/chat', ollama), o2 = await post(port, '/api/chat', ollama);
  assert.equal(o1.cached_response, undefined);
  assert.equal(o2.cached_response, true);
  assert.equal(o2.message.content, o1.message.content);
  hits += 1;

  assert.equal(await metric(port, 'tachyon_response_cache_hits_total'), hits);
  assert.ok(await metric(port, 'tachyon_response_cache_entries') >= 8);
  assert.ok(await metric(port, 'tachyon_response_cache_bytes') > 0);
});

test('the disk prefix tier carries the prefix cache across a server restart', { timeout: 180000 }, async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'tachyon-prefix-disk-'));
  try {
    const flags = [...common, '--prefix-cache-dir', dir, '--no-pld', '--no-drafter', '--no-mtp'];
    const topic = 'a long list of the planets of the solar system, their moons, their distance from the sun and ' +
      'the time each takes to go around it, written as a table with a header row';
    const request = { model, messages: question(topic), max_tokens: 24, temperature: 0 };

    const first = await startOwnServer(flags);
    servers.push(first);
    const client1 = new OpenAI({ baseURL: `http://127.0.0.1:${first.port}/v1`, apiKey: 'none', maxRetries: 0 });
    const cold = await client1.chat.completions.create(request);
    assert.equal(cold.usage.prompt_tokens_details.cached_tokens, 0);
    assert.ok(cold.usage.prompt_tokens >= 32, `a prompt of ${cold.usage.prompt_tokens} tokens holds no full block`);
    const exited = new Promise((resolve) => first.server.on('exit', resolve));
    first.server.kill('SIGTERM');
    await exited;
    assert.match(first.log(), /disk prefix cache: wrote [1-9]\d* cached blocks/);
    const folders = readdirSync(dir);
    assert.equal(folders.length, 1, 'one folder per model fingerprint');
    assert.ok(readdirSync(path.join(dir, folders[0])).some((f) => f.endsWith('.kvblock')));

    const second = await startOwnServer(flags);
    servers.push(second);
    assert.match(second.log(), /disk prefix cache: .* \([1-9]\d* blocks/);
    const client2 = new OpenAI({ baseURL: `http://127.0.0.1:${second.port}/v1`, apiKey: 'none', maxRetries: 0 });
    const warm = await client2.chat.completions.create(request);
    assert.equal(warm.choices[0].message.content, cold.choices[0].message.content);
    assert.ok(warm.usage.prompt_tokens_details.cached_tokens > 0, 'no prompt token came from the cache');
    const blocks = warm.usage.prompt_tokens_details.cached_tokens / 16;
    assert.equal(await metric(second.port, 'tachyon_prefix_cache_disk_hit_blocks_total'), blocks);
    assert.equal(await metric(second.port, 'tachyon_prefix_cache_disk_rejected_total'), 0);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
