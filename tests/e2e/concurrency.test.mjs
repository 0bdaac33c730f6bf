// 16 concurrent streaming requests: each greedy output equals the same request run alone
// (batch invariance through the whole stack: HTTP, engine batching, detokenization).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { model, collectChatStream, openai, banEos } from './helpers.mjs';

const subjects = ['a stack', 'a queue', 'binary search', 'bubble sort', 'fizzbuzz', 'a linked list', 'factorial',
  'gcd', 'palindromes', 'word counts', 'matrix transpose', 'flattening a list', 'a running mean', 'prime sieve',
  'reversing a string', 'merging two dicts'];

test('16 concurrent streams equal the same requests run alone', async () => {
  const requests = subjects.map((s) => ({
    model, temperature: 0, max_tokens: 32,
    messages: [{ role: 'user', content: `Write a Python function for ${s}.` }],
  }));
  const alone = [];
  for (const r of requests) alone.push((await openai.chat.completions.create(r)).choices[0].message.content);
  const together = await Promise.all(requests.map((r) => collectChatStream(r)));
  for (let i = 0; i < requests.length; i++) {
    assert.equal(together[i].text, alone[i], `request ${i} (${subjects[i]}) differs when batched`);
  }
  assert.ok(new Set(alone).size > 1, 'different prompts give different answers');
});

// A client that goes away mid-stream cancels its request in the engine.
test('a disconnected streaming client cancels its request', async () => {
  const { baseUrl, apiKey } = await import('./helpers.mjs');
  const cancelled = async () => {
    const text = await (await fetch(`${baseUrl}/metrics`)).text();
    return Number(text.match(/^tachyon_requests_cancelled_total\{[^}]*\} (\d+)/m)[1]);
  };
  const before = await cancelled();
  const controller = new AbortController();
  const res = await fetch(`${baseUrl}/v1/completions`, {
    method: 'POST', signal: controller.signal,
    headers: { 'content-type': 'application/json', authorization: `Bearer ${apiKey}` },
    body: JSON.stringify({ model, prompt: 'def main():\n', max_tokens: 900, temperature: 0, stream: true, logit_bias: banEos() }),
  });
  const reader = res.body.getReader();
  await reader.read();  // the stream has started
  controller.abort();
  let after = before;
  for (let i = 0; i < 50 && after === before; i++) {
    await new Promise((r) => setTimeout(r, 100));
    after = await cancelled();
  }
  assert.equal(after, before + 1, 'the engine counted the request as cancelled');
});
