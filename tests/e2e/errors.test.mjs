// Bad input answers with each API's own error shape and status, and never takes the
// server down.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { OpenAI, Anthropic, openai, anthropic, baseUrl, apiKey, model, maxContext, maxBody, maxQueue, post, banEos } from './helpers.mjs';

function assertOpenAIError(res, status, param) {
  assert.equal(res.status, status, res.text);
  assert.equal(typeof res.json?.error?.message, 'string', res.text);
  assert.equal(typeof res.json.error.type, 'string');
  if (param !== undefined) assert.equal(res.json.error.param, param, res.text);
}

function assertAnthropicError(res, status, type) {
  assert.equal(res.status, status, res.text);
  assert.equal(res.json?.type, 'error', res.text);
  assert.equal(res.json.error.type, type, res.text);
  assert.equal(typeof res.json.error.message, 'string');
}

const chat = (extra) => ({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 4, ...extra });

test('malformed JSON and wrong types are 400 in both shapes', async () => {
  assertOpenAIError(await post('/v1/chat/completions', '{"model": "x", "messages": [', { raw: true }), 400);
  assertOpenAIError(await post('/v1/completions', '[1, 2]', { raw: true }), 400);
  assertOpenAIError(await post('/v1/chat/completions', chat({ temperature: 'hot' })), 400, 'temperature');
  assertOpenAIError(await post('/v1/chat/completions', chat({ messages: 'hi' })), 400, 'messages');
  assertOpenAIError(await post('/v1/chat/completions', chat({ messages: [{ role: 'wizard', content: 'x' }] })), 400);
  assertOpenAIError(await post('/v1/chat/completions', chat({ stop: [1] })), 400);
  assertOpenAIError(await post('/v1/chat/completions', chat({ top_p: 0 })), 400, 'top_p');
  assertOpenAIError(await post('/v1/chat/completions', chat({ logit_bias: { 999999: 5 } })), 400);
  assertAnthropicError(await post('/v1/messages', '{"model":', { raw: true }), 400, 'invalid_request_error');
  assertAnthropicError(await post('/v1/messages', { model, max_tokens: 'many', messages: [{ role: 'user', content: 'x' }] }),
    400, 'invalid_request_error');
});

test('JSON nested deeper than the server accepts is 400, not a crash', async () => {
  const deep = '{"a": '.repeat(20000) + '1' + '}'.repeat(20000);
  const body = `{"model": "${model}", "max_tokens": 2, "messages": [{"role": "user", "content": "x"}], ` +
    `"tools": [{"type": "function", "function": {"name": "f", "parameters": ${deep}}}]}`;
  assertOpenAIError(await post('/v1/chat/completions', body, { raw: true }), 400);
  assertAnthropicError(await post('/v1/messages', '['.repeat(50000) + ']'.repeat(50000), { raw: true }), 400,
    'invalid_request_error');
  assert.equal((await fetch(`${baseUrl}/health`)).status, 200);
});

test('unknown fields, empty messages and unsupported options are rejected clearly', async () => {
  assertOpenAIError(await post('/v1/chat/completions', chat({ frobnicate: true })), 400, 'frobnicate');
  assertOpenAIError(await post('/v1/chat/completions', chat({ messages: [] })), 400, 'messages');
  assertOpenAIError(await post('/v1/completions', { model, prompt: 'x', best_of: 3 }), 400, 'best_of');
  assertOpenAIError(await post('/v1/chat/completions', chat({ n: 0 })), 400, 'n');
  assertAnthropicError(await post('/v1/messages', { model, max_tokens: 4, messages: [] }), 400, 'invalid_request_error');
  assertAnthropicError(await post('/v1/messages', { model, messages: [{ role: 'user', content: 'x' }] }),
    400, 'invalid_request_error');
  assertAnthropicError(await post('/v1/messages', { model, max_tokens: 4, colour: 1, messages: [{ role: 'user', content: 'x' }] }),
    400, 'invalid_request_error');
  // Through the SDKs: the typed error classes.
  await assert.rejects(openai.chat.completions.create(chat({ messages: [] })), OpenAI.BadRequestError);
  await assert.rejects(anthropic.messages.create({ model, max_tokens: 4, messages: [] }), Anthropic.BadRequestError);
});

test('unknown model is 404', async () => {
  await assert.rejects(openai.chat.completions.create(chat({ model: 'gpt-17' })), (e) => {
    assert.ok(e instanceof OpenAI.NotFoundError);
    assert.equal(e.status, 404);
    assert.equal(e.code, 'model_not_found');
    return true;
  });
  await assert.rejects(anthropic.messages.create({ model: 'claude-9', max_tokens: 4, messages: [{ role: 'user', content: 'x' }] }),
    (e) => e instanceof Anthropic.NotFoundError && e.error?.error?.type === 'not_found_error');
  assertOpenAIError(await post('/v1/completions', { model: 'nope', prompt: 'x' }), 404, 'model');
});

test('prompt longer than the context and max_tokens out of range are 400', async () => {
  const long = 'def f(x):\n    return x\n'.repeat(Math.ceil(maxContext / 4));
  const tooLong = await post('/v1/completions', { model, prompt: long, max_tokens: 4 });
  assertOpenAIError(tooLong, 400);
  assert.equal(tooLong.json.error.code, 'context_length_exceeded');
  assertOpenAIError(await post('/v1/chat/completions', chat({ max_tokens: 0 })), 400, 'max_tokens');
  assertOpenAIError(await post('/v1/chat/completions', chat({ max_tokens: maxContext })), 400, 'max_tokens');
  assertOpenAIError(await post('/v1/completions', { model, prompt: 'x', max_tokens: -3 }), 400, 'max_tokens');
  assertAnthropicError(await post('/v1/messages', { model, max_tokens: maxContext * 2, messages: [{ role: 'user', content: 'x' }] }),
    400, 'invalid_request_error');
  assertOpenAIError(await post('/v1/completions', { model, prompt: [999999], max_tokens: 2 }), 400, 'prompt');
});

test('a body over the size limit is 413', async () => {
  const huge = 'x'.repeat(maxBody + 1024);
  assertOpenAIError(await post('/v1/chat/completions', chat({ messages: [{ role: 'user', content: huge }] })), 413);
  assertAnthropicError(await post('/v1/messages', { model, max_tokens: 4, messages: [{ role: 'user', content: huge }] }),
    413, 'request_too_large');
});

test('a missing or wrong API key is 401 in both shapes', async () => {
  const badOpenAI = new OpenAI({ baseURL: `${baseUrl}/v1`, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(badOpenAI.chat.completions.create(chat()), OpenAI.AuthenticationError);
  const badAnthropic = new Anthropic({ baseURL: baseUrl, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(badAnthropic.messages.create({ model, max_tokens: 4, messages: [{ role: 'user', content: 'x' }] }),
    Anthropic.AuthenticationError);
  const res = await fetch(`${baseUrl}/v1/models`);
  assertOpenAIError({ status: res.status, json: await res.json(), text: '' }, 401);
  assertAnthropicError(await post('/v1/messages', {}, { headers: { authorization: 'Bearer nope' } }), 401, 'authentication_error');
});

test('more requests than the queue holds get 429', async () => {
  // Long streams hold their slots while the burst arrives; once every answer's status is
  // known the streams are dropped (which cancels them).
  const burst = maxQueue + 8;
  // End-of-sequence banned, so no stream can finish early and free its slot.
  const logit_bias = banEos();
  const controller = new AbortController();
  const responses = await Promise.all(Array.from({ length: burst }, (_, i) => fetch(`${baseUrl}/v1/completions`, {
    method: 'POST', signal: controller.signal,
    headers: { 'content-type': 'application/json', authorization: `Bearer ${apiKey}` },
    body: JSON.stringify({ model, prompt: `def f${i}(x):\n`, max_tokens: 900, temperature: 0, stream: true, logit_bias }),
  })));
  const statuses = responses.map((r) => r.status);
  const limited = responses.filter((r) => r.status === 429);
  const bodies = await Promise.all(limited.map((r) => r.json()));
  controller.abort();
  assert.equal(statuses.filter((s) => s === 200).length, maxQueue, statuses.join(','));
  assert.equal(limited.length, burst - maxQueue, statuses.join(','));
  for (const json of bodies) assertOpenAIError({ status: 429, json, text: JSON.stringify(json) }, 429);
});

test('CORS preflight is answered for browser clients', async () => {
  const res = await fetch(`${baseUrl}/v1/chat/completions`, { method: 'OPTIONS',
    headers: { origin: 'http://example.test', 'access-control-request-method': 'POST' } });
  assert.equal(res.status, 204);
  assert.equal(res.headers.get('access-control-allow-origin'), '*');
  assert.match(res.headers.get('access-control-allow-headers'), /Authorization/);
});

test('the server is still healthy after all of the above', async () => {
  const res = await fetch(`${baseUrl}/health`);
  assert.equal(res.status, 200);
  const metrics = await (await fetch(`${baseUrl}/metrics`)).text();
  for (const name of ['tachyon_requests_finished_total', 'tachyon_prompt_tokens_total', 'tachyon_generation_tokens_total',
    'tachyon_time_to_first_token_seconds_bucket', 'tachyon_inter_token_latency_seconds_count', 'tachyon_queue_depth',
    'tachyon_kv_blocks_used', 'tachyon_kv_blocks_free', 'tachyon_prefix_cache_hit_tokens_total'])
    assert.ok(metrics.includes(name), `/metrics lacks ${name}`);
  assert.match(metrics, /tachyon_http_requests_total\{route="\/v1\/chat\/completions",status="4xx"\} [1-9]/);
  for (const gate of ['prompt_gate', 'payoff_gate', 'acceptance_gate', 'throughput_gate', 'choice_gate'])
    assert.match(metrics, new RegExp(`tachyon_spec_gated_requests_total\\{model="[^"]+",gate="${gate}"\\} \\d+`));
});
