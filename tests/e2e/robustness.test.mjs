// Answers that stay whole under awkward conditions, on a server of its own:
// - multi-byte characters split across tokens: an emoji's first two bytes are one token of the
//   demo tokenizer (id 801, F0 9F) and its last two are two more; every SSE chunk must be valid
//   UTF-8 on its own, and the streamed text equal the non-streamed one, whether the bytes make an
//   emoji or are cut off (then U+FFFD, never a broken byte);
// - stop strings of several tokens, found across chunk borders and trimmed, streamed and not;
// - a client that reads slowly gets the same stream as one that reads at once (back-pressure);
// - 1,000 simultaneous streaming connections, far past --max-queue: each is served or refused
//   with 429, none is reset or left without an answer.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { model, startOwnServer } from './helpers.mjs';

const maxQueue = 48;
const { server, port } = await startOwnServer(['--max-concurrent', '16', '--max-queue', String(maxQueue),
  '--ctx-size', '1024', '--kv-blocks', '512']);
after(() => server.kill('SIGTERM'));

// Raw streaming POST: resolves to { status, chunks: [Buffer...] } (one per socket read).
function streamPost(route, body, { readDelayMs = 0, agent } = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path: route, method: 'POST', agent,
      headers: { 'content-type': 'application/json' } }, (res) => {
      const chunks = [];
      res.on('data', (c) => {
        chunks.push(c);
        if (readDelayMs) {
          res.pause();
          setTimeout(() => res.resume(), readDelayMs);
        }
      });
      res.on('end', () => resolve({ status: res.statusCode, chunks }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

const strictUtf8 = new TextDecoder('utf-8', { fatal: true });
// The text deltas of an OpenAI completions stream; each SSE event's bytes must be valid UTF-8.
function completionDeltas(chunks) {
  const bytes = Buffer.concat(chunks);
  let text = '', finish = null;
  for (const event of bytes.toString('latin1').split('\n\n')) {
    if (!event.startsWith('data: ') || event === 'data: [DONE]') continue;
    const decoded = strictUtf8.decode(Buffer.from(event, 'latin1'));  // throws on a broken byte
    const choice = JSON.parse(decoded.slice(6)).choices[0];
    text += choice.text;
    finish = choice.finish_reason ?? finish;
  }
  return { text, finish };
}

async function completion(body) {
  const res = await fetch(`http://127.0.0.1:${port}/v1/completions`, { method: 'POST',
    headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ...body, stream: false }) });
  assert.equal(res.status, 200);
  const raw = Buffer.from(await res.arrayBuffer());
  strictUtf8.decode(raw);
  return JSON.parse(raw.toString('utf8')).choices[0];
}

test('emoji bytes split across tokens stream as whole characters', async () => {
  const smile = '\u{1F600}';  // F0 9F 98 80: tokens 801 (F0 9F), 246 (98), 222 (80)
  const cases = [
    // The emoji repeated in the prompt and its three tokens favoured: the model writes emoji.
    { prompt: `s = "${smile.repeat(12)}`, logit_bias: { 801: 8, 246: 8, 222: 8 }, want: smile },
    // Only the first half ever: each half is cut off, and shows as U+FFFD.
    { prompt: 'x = "', logit_bias: { 801: 100 }, want: '\uFFFD' },
  ];
  for (const c of cases) {
    const body = { model, prompt: c.prompt, max_tokens: 24, temperature: 0, logit_bias: c.logit_bias };
    const whole = await completion(body);
    assert.ok(whole.text.includes(c.want), `no ${JSON.stringify(c.want)} in ${JSON.stringify(whole.text)}`);
    const { status, chunks } = await streamPost('/v1/completions', { ...body, stream: true });
    assert.equal(status, 200);
    const streamed = completionDeltas(chunks);
    assert.equal(streamed.text, whole.text);
    assert.equal(streamed.finish, whole.finish_reason);
  }
});

test('stop strings of several tokens are found across chunk borders', async () => {
  const prompt = 'def a():\n    return 1\n\n\ndef b():\n    return 2\n\n\ndef c():\n    return 3\n\n\n';
  const open = await completion({ model, prompt, max_tokens: 40, temperature: 0 });
  // Stop at a string that spans several tokens of what the model writes anyway.
  const at = open.text.indexOf('return');
  assert.ok(at > 0, `the model did not write 'return': ${JSON.stringify(open.text)}`);
  const stop = open.text.slice(at, at + 9);  // 'return' and what follows: several tokens
  const body = { model, prompt, max_tokens: 40, temperature: 0, stop: [stop] };
  const whole = await completion(body);
  assert.equal(whole.finish_reason, 'stop');
  assert.equal(whole.text, open.text.slice(0, at));
  const streamed = completionDeltas((await streamPost('/v1/completions', { ...body, stream: true })).chunks);
  assert.equal(streamed.text, whole.text);
  assert.equal(streamed.finish, 'stop');
});

test('a slow reader gets the same stream as a fast one', async () => {
  const body = { model, prompt: 'def fib(n):\n', max_tokens: 120, temperature: 0, stream: true };
  const fast = completionDeltas((await streamPost('/v1/completions', body)).chunks);
  const slow = completionDeltas((await streamPost('/v1/completions', body, { readDelayMs: 40 })).chunks);
  assert.equal(slow.text, fast.text);
  assert.equal(slow.finish, fast.finish);
  assert.ok(fast.text.length > 0);
});

test('1,000 simultaneous streaming connections are served or refused with 429, never reset', { timeout: 240000 },
  async () => {
    const agent = new http.Agent({ keepAlive: false, maxSockets: Infinity });
    const body = { model, prompt: 'def f(x):\n', max_tokens: 4, temperature: 0, stream: true };
    const results = await Promise.allSettled(Array.from({ length: 1000 }, () => streamPost('/v1/completions', body,
      { agent })));
    const failures = results.filter((r) => r.status === 'rejected').map((r) => r.reason.code ?? r.reason.message);
    assert.deepEqual(failures, [], `connections that failed: ${failures.length}`);
    const statuses = {};
    for (const r of results) statuses[r.value.status] = (statuses[r.value.status] ?? 0) + 1;
    assert.deepEqual(Object.keys(statuses).sort(), ['200', '429'].filter((s) => statuses[s]));
    assert.ok(statuses[200] >= maxQueue, JSON.stringify(statuses));  // at least a full queue was served
    for (const r of results.filter((x) => x.value.status === 200))
      assert.equal(completionDeltas(r.value.chunks).finish, 'length');
  });
