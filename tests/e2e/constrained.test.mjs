// Constrained decoding through the official SDKs: response_format json_object (chat and
// Responses), forced tool calls (OpenAI tool_choice "required" / named, Anthropic "any" /
// "tool"), streaming and not, and a follow-up turn with the tool's result. The demo model is
// a tiny code model: without the grammar it would not write JSON or call tools on demand.
// Also: a non-streaming client that disconnects cancels its request.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { openai, anthropic, model, baseUrl, apiKey, banEos, collectChatStream, weatherTool } from './helpers.mjs';

const timeTool = {
  name: 'get_time',
  description: 'Current time in a timezone',
  parameters: { type: 'object', properties: { tz: { type: 'string' } } },
};
const openaiTools = [weatherTool, timeTool].map((f) => ({ type: 'function', function: f }));
const anthropicTools = [weatherTool, timeTool].map((f) => ({ name: f.name, description: f.description,
  input_schema: f.parameters }));
// A prompt the demo model (greedy) answers with a short object; on others it can repeat keys
// until max_tokens, which is valid JSON so far but never closed.
const jsonPrompt = 'def f():\n    return {"a": 1}';

function assertJsonObject(text) {
  const value = JSON.parse(text);
  assert.equal(typeof value, 'object');
  assert.ok(value !== null && !Array.isArray(value), text);
  return value;
}

// --- response_format json_object ------------------------------------------------------------

test('json_object: the chat answer parses as a JSON object, streamed and not, greedy and sampled', async () => {
  const params = { model, messages: [{ role: 'user', content: jsonPrompt }], max_tokens: 400,
    response_format: { type: 'json_object' } };
  const full = await openai.chat.completions.create({ ...params, temperature: 0 });
  const choice = full.choices[0];
  assert.equal(choice.finish_reason, 'stop', choice.message.content);
  assertJsonObject(choice.message.content);
  const streamed = await collectChatStream({ ...params, temperature: 0 });
  assert.equal(streamed.finish, 'stop');
  assert.equal(streamed.text, choice.message.content);
  assertJsonObject(streamed.text);
  for (const seed of [1, 2, 3]) {
    const sampled = await openai.chat.completions.create({ ...params, temperature: 1, seed, frequency_penalty: 1 });
    if (sampled.choices[0].finish_reason === 'stop') assertJsonObject(sampled.choices[0].message.content);
    else assert.equal(sampled.choices[0].finish_reason, 'length');  // a long string may run out of tokens
  }
});

test('json_object: the Responses API text.format', async () => {
  const resp = await openai.responses.create({ model, input: jsonPrompt, temperature: 0, max_output_tokens: 400,
    text: { format: { type: 'json_object' } } });
  assert.equal(resp.status, 'completed');
  assertJsonObject(resp.output_text);
  const stream = await openai.responses.create({ model, input: jsonPrompt, temperature: 0, max_output_tokens: 400,
    text: { format: { type: 'json_object' } }, stream: true });
  let text = '';
  for await (const event of stream) if (event.type === 'response.output_text.delta') text += event.delta;
  assert.equal(text, resp.output_text);
});

// --- forced tool calls: OpenAI ----------------------------------------------------------------

function checkOpenAICall(choice, names) {
  assert.equal(choice.finish_reason, 'tool_calls');
  assert.equal(choice.message.tool_calls.length, 1);
  const call = choice.message.tool_calls[0];
  assert.equal(call.type, 'function');
  assert.ok(names.includes(call.function.name), call.function.name);
  assertJsonObject(call.function.arguments);
  return call;
}

async function streamedToolCalls(params) {
  const stream = await openai.chat.completions.create({ ...params, stream: true });
  const calls = [];
  let finish = null;
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      for (const tc of c.delta.tool_calls ?? []) {
        if (!calls[tc.index]) calls[tc.index] = { id: tc.id, name: '', arguments: '' };
        if (tc.function?.name) calls[tc.index].name += tc.function.name;
        if (tc.function?.arguments) calls[tc.index].arguments += tc.function.arguments;
      }
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  return { calls, finish };
}

test('tool_choice required: a parseable call to a declared tool, streamed and not', async () => {
  const params = { model, temperature: 0, max_tokens: 200, tools: openaiTools, tool_choice: 'required',
    messages: [{ role: 'user', content: 'What is the weather in Paris?' }] };
  const full = await openai.chat.completions.create(params);
  const call = checkOpenAICall(full.choices[0], ['get_weather', 'get_time']);
  const streamed = await streamedToolCalls(params);
  assert.equal(streamed.finish, 'tool_calls');
  assert.equal(streamed.calls.length, 1);
  assert.equal(streamed.calls[0].name, call.function.name);
  assert.equal(streamed.calls[0].arguments, call.function.arguments);
});

test('tool_choice named: the call is to that tool; the follow-up turn with its result answers', async () => {
  for (const name of ['get_weather', 'get_time']) {
    const params = { model, temperature: 0, max_tokens: 200, tools: openaiTools,
      tool_choice: { type: 'function', function: { name } },
      messages: [{ role: 'user', content: 'What is the weather in Paris?' }] };
    const call = checkOpenAICall((await openai.chat.completions.create(params)).choices[0], [name]);
    const streamed = await streamedToolCalls(params);
    assert.equal(streamed.calls[0]?.name, name);
    if (name !== 'get_weather') continue;
    const followUp = await openai.chat.completions.create({
      model, temperature: 0, max_tokens: 24, tools: openaiTools,
      messages: [
        { role: 'user', content: 'What is the weather in Paris?' },
        { role: 'assistant', content: null, tool_calls: [call] },
        { role: 'tool', tool_call_id: call.id, content: '{"temperature_c": 21, "sky": "clear"}' },
      ],
    });
    assert.ok(['stop', 'length', 'tool_calls'].includes(followUp.choices[0].finish_reason));
    assert.ok(followUp.choices[0].message.content !== undefined);
  }
});

test('tool_choice: the Responses API forces a function_call item', async () => {
  const tools = [weatherTool, timeTool].map((f) => ({ type: 'function', name: f.name, description: f.description,
    parameters: f.parameters, strict: false }));
  const resp = await openai.responses.create({ model, temperature: 0, max_output_tokens: 200, tools,
    tool_choice: { type: 'function', name: 'get_time' }, input: 'What time is it in Tokyo?' });
  const calls = resp.output.filter((o) => o.type === 'function_call');
  assert.equal(calls.length, 1);
  assert.equal(calls[0].name, 'get_time');
  assertJsonObject(calls[0].arguments);
  const required = await openai.responses.create({ model, temperature: 0, max_output_tokens: 200, tools,
    tool_choice: 'required', input: 'What time is it in Tokyo?' });
  assert.equal(required.output.filter((o) => o.type === 'function_call').length, 1);
});

test('tool_choice errors: a named tool that is not declared, or no tools at all', async () => {
  await assert.rejects(openai.chat.completions.create({ model, max_tokens: 8, tools: openaiTools,
    tool_choice: { type: 'function', function: { name: 'nope' } }, messages: [{ role: 'user', content: 'x' }] }),
  (e) => e.status === 400 && /nope/.test(e.message));
  await assert.rejects(openai.chat.completions.create({ model, max_tokens: 8, tool_choice: 'required',
    messages: [{ role: 'user', content: 'x' }] }), (e) => e.status === 400);
  await assert.rejects(anthropic.messages.create({ model, max_tokens: 8, tools: anthropicTools,
    tool_choice: { type: 'tool', name: 'nope' }, messages: [{ role: 'user', content: 'x' }] }),
  (e) => e.status === 400);
});

// --- forced tool calls: Anthropic -------------------------------------------------------------

function checkToolUse(message, names) {
  assert.equal(message.stop_reason, 'tool_use');
  const uses = message.content.filter((b) => b.type === 'tool_use');
  assert.equal(uses.length, 1);
  assert.ok(names.includes(uses[0].name), uses[0].name);
  assert.equal(typeof uses[0].input, 'object');
  assert.ok(uses[0].input !== null && !Array.isArray(uses[0].input));
  return uses[0];
}

test('anthropic tool_choice any / tool: a tool_use block, streamed and not, then the tool_result turn', async () => {
  const base = { model, temperature: 0, max_tokens: 200, tools: anthropicTools,
    messages: [{ role: 'user', content: 'What is the weather in Paris?' }] };
  const any = checkToolUse(await anthropic.messages.create({ ...base, tool_choice: { type: 'any' } }),
    ['get_weather', 'get_time']);
  const named = checkToolUse(await anthropic.messages.create({ ...base, tool_choice: { type: 'tool', name: 'get_weather' } }),
    ['get_weather']);
  const streamed = await anthropic.messages.stream({ ...base, tool_choice: { type: 'tool', name: 'get_weather' } })
    .finalMessage();
  const streamedUse = checkToolUse(streamed, ['get_weather']);
  assert.deepEqual(streamedUse.input, named.input);
  const anyStreamed = checkToolUse(await anthropic.messages.stream({ ...base, tool_choice: { type: 'any' } })
    .finalMessage(), ['get_weather', 'get_time']);
  assert.equal(anyStreamed.name, any.name);

  const followUp = await anthropic.messages.create({
    model, temperature: 0, max_tokens: 24, tools: anthropicTools,
    messages: [
      { role: 'user', content: 'What is the weather in Paris?' },
      { role: 'assistant', content: [named] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: named.id, content: '{"temperature_c": 21}' }] },
    ],
  });
  assert.ok(['end_turn', 'max_tokens', 'tool_use'].includes(followUp.stop_reason));
});

// --- a non-streaming client that disconnects --------------------------------------------------

async function metrics() {
  const text = await (await fetch(`${baseUrl}/metrics`)).text();
  const value = (name) => Number(text.match(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm'))?.[1] ?? NaN);
  return { running: value('tachyon_requests_running'), cancelled: value('tachyon_requests_cancelled_total'),
    free: value('tachyon_kv_blocks_free'), total: value('tachyon_kv_blocks_total') };
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

test('a non-streaming request whose client disconnects is cancelled and frees its KV blocks', async () => {
  // The previous test's last request may still be leaving the engine when its client has its answer.
  let before = await metrics();
  for (let i = 0; i < 80 && before.running !== 0; ++i) {
    await sleep(25);
    before = await metrics();
  }
  assert.equal(before.running, 0);
  const body = JSON.stringify({ model, prompt: 'def main():', max_tokens: 900, temperature: 0, logit_bias: banEos() });
  const url = new URL(`${baseUrl}/v1/completions`);
  const req = http.request({ host: url.hostname, port: url.port, path: url.pathname, method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${apiKey}`,
      'content-length': Buffer.byteLength(body) } });
  req.on('error', () => {});  // the socket is destroyed on purpose
  req.end(body);
  let seen = false;  // the request is running in the engine
  for (let i = 0; i < 100 && !seen; ++i) {
    seen = (await metrics()).running === 1;
    if (!seen) await sleep(10);
  }
  assert.ok(seen, 'the request never showed as running');
  req.destroy();  // the client goes away without reading the answer
  let after = null;
  for (let i = 0; i < 40; ++i) {  // the server polls the socket every 50 ms
    after = await metrics();
    if (after.running === 0 && after.cancelled === before.cancelled + 1) break;
    await sleep(25);
  }
  assert.equal(after.running, 0);
  assert.equal(after.cancelled, before.cancelled + 1, 'the request ran on instead of being cancelled');
  assert.equal(after.free, after.total);
});
