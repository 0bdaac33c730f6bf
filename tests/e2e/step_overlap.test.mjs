// `--step-overlap on` (forced on the CPU, where the default, auto, leaves it off): the engine issues
// each plain decode step before the last one's tokens are read. Through the server and the official
// client, four chat completions at once (greedy and seeded sampled, one cut by a stop sequence) give
// the same text as with `--step-overlap off`, and the metrics show the steps were overlapped.
// Speculation is off on both servers (with it, steps verify drafts and are never overlapped).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { OpenAI, collectChatStream, model, startOwnServer } from './helpers.mjs';

const flags = ['--no-pld', '--no-drafter', '--no-mtp', '--max-concurrent', '4', '--ctx-size', '512', '--kv-blocks', '128'];
const servers = {};
for (const mode of ['on', 'off']) servers[mode] = await startOwnServer([...flags, '--step-overlap', mode]);
after(() => { for (const { server } of Object.values(servers)) server.kill('SIGTERM'); });

const subjects = ['a stack', 'binary search', 'fizzbuzz', 'a prime sieve'];
const request = (i) => ({
  model, max_tokens: 20 + 4 * i, temperature: i % 2 ? 0.8 : 0, seed: 100 + i,
  ...(i === 2 ? { stop: ['\n\n'] } : {}),
  messages: [{ role: 'user', content: `Write a Python function for ${subjects[i]}.` }],
});

async function run(mode) {
  const client = new OpenAI({ baseURL: `http://127.0.0.1:${servers[mode].port}/v1`, apiKey: 'none', maxRetries: 0,
    timeout: 120000 });
  return Promise.all(subjects.map((_, i) => collectChatStream(request(i), client)));
}

async function overlappedSteps(mode) {
  const text = await (await fetch(`http://127.0.0.1:${servers[mode].port}/metrics`)).text();
  const m = text.match(/^tachyon_overlapped_steps_total\{[^}]*\} (\d+)/m);
  assert.ok(m, 'tachyon_overlapped_steps_total is missing from /metrics');
  return Number(m[1]);
}

test('overlapped decode steps give the text of steps read one by one', { timeout: 120000 }, async () => {
  const on = await run('on'), off = await run('off');
  for (let i = 0; i < subjects.length; ++i) {
    assert.equal(on[i].text, off[i].text, `request ${i}`);
    assert.equal(on[i].finish, off[i].finish, `request ${i}`);
    assert.equal(on[i].usage.completion_tokens, off[i].usage.completion_tokens, `request ${i}`);
  }
  assert.ok(await overlappedSteps('on') > 0, 'no step was overlapped');
  assert.equal(await overlappedSteps('off'), 0);
});
