// --max-queue above --http-threads: every request beyond the queue still gets its 429. Each
// queued or running generation request holds a connection thread, so with only
// --http-threads threads the excess requests waited unseen in httplib's task queue and no 429
// was ever sent (the server now sizes its pool to max-queue + 16). Own server: 8 threads,
// a queue of 12, a burst of 20 streams that cannot finish (end of sequence banned).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { banEos, model, startOwnServer } from './helpers.mjs';

const maxQueue = 12, burst = 20;
const { server, port } = await startOwnServer(['--max-concurrent', '2', '--max-queue', String(maxQueue),
  '--http-threads', '8', '--ctx-size', '1024', '--kv-blocks', '256']);
after(() => server.kill('SIGTERM'));

test('a queue larger than the HTTP thread count still answers 429 beyond it', { timeout: 60000 }, async () => {
  const controller = new AbortController();
  const responses = await Promise.all(Array.from({ length: burst }, (_, i) => fetch(`http://127.0.0.1:${port}/v1/completions`, {
    method: 'POST', signal: controller.signal, headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model, prompt: `def g${i}(y):\n`, max_tokens: 900, temperature: 0, stream: true,
      logit_bias: banEos() }),
  })));
  const statuses = responses.map((r) => r.status);
  controller.abort();
  assert.equal(statuses.filter((s) => s === 200).length, maxQueue, statuses.join(','));
  assert.equal(statuses.filter((s) => s === 429).length, burst - maxQueue, statuses.join(','));
});
