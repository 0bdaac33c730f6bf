// The official `ollama` npm client against `tachyon serve`: /api/chat and /api/generate
// (NDJSON streams and stream:false), options, think, format, tools, the model listings and
// errors in Ollama's {"error"} shape. Greedy answers must equal the OpenAI API's for the same
// prompt, and prompt token counts the HF tokenizer's count of the Qwen3 chat format.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { openai, ollama, model, maxContext, countTokens, qwen3Prompt, weatherTool, toolPrompt, post }
  from './helpers.mjs';

const question = 'Write a Python function `is_prime(n)` that returns True if n is a prime number.';
const greedy = (num_predict) => ({ temperature: 0, num_predict });

function assertFinal(chunk, { prompt, completion }) {
  assert.equal(chunk.done, true);
  assert.ok(['stop', 'length'].includes(chunk.done_reason), chunk.done_reason);
  assert.equal(chunk.prompt_eval_count, prompt);
  assert.equal(chunk.eval_count, completion);
  for (const key of ['total_duration', 'load_duration', 'prompt_eval_duration', 'eval_duration'])
    assert.ok(Number.isInteger(chunk[key]) && chunk[key] >= 0, `${key}: ${chunk[key]}`);
  assert.ok(chunk.total_duration >= chunk.prompt_eval_duration + chunk.eval_duration);
  assert.ok(!Number.isNaN(Date.parse(chunk.created_at)), chunk.created_at);
}

test('chat: the answer, counts and done_reason agree with the OpenAI chat answer', async () => {
  const messages = [{ role: 'user', content: question }];
  const reference = await openai.chat.completions.create({ model, messages, temperature: 0, max_tokens: 40 });
  const chat = await ollama.chat({ model, messages, options: greedy(40) });
  assert.equal(chat.message.role, 'assistant');
  assert.equal(chat.message.content, reference.choices[0].message.content);
  assert.equal(chat.done_reason, reference.choices[0].finish_reason === 'length' ? 'length' : 'stop');
  assertFinal(chat, { prompt: await countTokens(qwen3Prompt(messages)),
    completion: reference.usage.completion_tokens });
});

test('chat: the NDJSON stream joins to the non-streamed answer and ends with the counts', async () => {
  const params = { model: `${model}:latest`, messages: [{ role: 'system', content: 'You are terse.' },
    { role: 'user', content: question }], options: greedy(40) };
  const full = await ollama.chat(params);
  let text = '', chunks = 0, last = null;
  for await (const chunk of await ollama.chat({ ...params, stream: true })) {
    chunks++;
    last = chunk;
    if (!chunk.done) assert.equal(chunk.message.role, 'assistant');
    text += chunk.message.content;
  }
  assert.ok(chunks > 2, `${chunks} chunks`);
  assert.equal(text, full.message.content);
  assertFinal(last, { prompt: full.prompt_eval_count, completion: full.eval_count });
  assert.equal(last.message.content, '');
  assert.equal(last.done_reason, full.done_reason);
});

test('generate: streamed and not, templated like chat, system and raw prompts', async () => {
  const chat = await ollama.chat({ model, messages: [{ role: 'system', content: 'You are terse.' },
    { role: 'user', content: question }], options: greedy(32) });
  const params = { model, prompt: question, system: 'You are terse.', options: greedy(32) };
  const full = await ollama.generate(params);
  assert.equal(full.response, chat.message.content);
  assertFinal(full, { prompt: chat.prompt_eval_count, completion: chat.eval_count });
  let text = '', last = null;
  for await (const chunk of await ollama.generate({ ...params, stream: true })) {
    text += chunk.response;
    last = chunk;
  }
  assert.equal(text, full.response);
  assertFinal(last, { prompt: full.prompt_eval_count, completion: full.eval_count });
  // raw: the prompt goes to the model as written, so the chat format written by hand gives the same answer.
  const raw = await ollama.generate({ model, raw: true, options: greedy(32),
    prompt: qwen3Prompt([{ role: 'system', content: 'You are terse.' }, { role: 'user', content: question }]) });
  assert.equal(raw.response, full.response);
  assert.equal(raw.prompt_eval_count, full.prompt_eval_count);
});

test('options: num_predict, stop, seed and num_ctx', async () => {
  const messages = [{ role: 'user', content: question }];
  const five = await ollama.chat({ model, messages, options: greedy(5) });
  assert.equal(five.eval_count, 5);
  assert.equal(five.done_reason, 'length');

  const reference = (await ollama.chat({ model, messages, options: greedy(48) })).message.content;
  const at = reference.indexOf('(');
  assert.ok(at > 0, `expected a '(' in ${JSON.stringify(reference)}`);
  const stopped = await ollama.chat({ model, messages, options: { ...greedy(48), stop: ['('] } });
  assert.equal(stopped.message.content, reference.slice(0, at));
  assert.equal(stopped.done_reason, 'stop');

  const sampled = { temperature: 1, top_k: 50, top_p: 0.95, seed: 1234, num_predict: 24 };
  const a = await ollama.generate({ model, prompt: question, options: sampled });
  const b = await ollama.generate({ model, prompt: question, options: sampled });
  assert.equal(a.response, b.response);

  // num_ctx below the prompt: over this request's context; above the server's: capped to it.
  const prompt = await countTokens(qwen3Prompt(messages));
  await assert.rejects(ollama.chat({ model, messages, options: { num_ctx: prompt - 1 } }),
    (e) => e.status_code === 400 && /context length/.test(e.error));
  const capped = await ollama.chat({ model, messages, options: { ...greedy(4), num_ctx: maxContext * 4 } });
  assert.equal(capped.eval_count, 4);
});

test('think: false renders the template without thinking, as enable_thinking does', async () => {
  const messages = [{ role: 'user', content: question }];
  const off = await ollama.chat({ model, messages, think: false, options: greedy(8) });
  assert.equal(off.prompt_eval_count, await countTokens(qwen3Prompt(messages) + '<think>\n\n</think>\n\n'));
  const reference = await openai.chat.completions.create({ model, messages, temperature: 0, max_tokens: 8,
    chat_template_kwargs: { enable_thinking: false } });
  assert.equal(off.message.content, reference.choices[0].message.content);
  const on = await ollama.chat({ model, messages, think: true, options: greedy(8) });
  assert.equal(on.prompt_eval_count, await countTokens(qwen3Prompt(messages)));
});

test('format: "json" gives a JSON object, a JSON schema an object that follows it', async () => {
  const prompt = 'def f():\n    return {"a": 1}';
  const json = await ollama.generate({ model, prompt, format: 'json', options: greedy(400) });
  assert.equal(json.done_reason, 'stop', json.response);
  assert.equal(typeof JSON.parse(json.response), 'object');
  const schema = { type: 'object', properties: { a: { type: 'integer' } } };
  const chat = await ollama.chat({ model, messages: [{ role: 'user', content: prompt }], format: schema,
    options: greedy(400) });
  assert.equal(chat.done_reason, 'stop', chat.message.content);
  const value = JSON.parse(chat.message.content);
  assert.ok(Object.keys(value).every((k) => k === 'a'), chat.message.content);
  if ('a' in value) assert.ok(Number.isInteger(value.a), chat.message.content);
});

test('tools: the tool-call round trip renders as through the OpenAI API', async () => {
  const user = 'What is the weather in Paris?';
  const tools = [{ type: 'function', function: weatherTool }];
  // Turn 1: tools offered; any tool call comes back with its arguments as an object.
  const first = await ollama.chat({ model, tools, messages: [{ role: 'user', content: user }], options: greedy(32) });
  assert.equal(first.prompt_eval_count, await countTokens(toolPrompt({ user })));
  for (const call of first.message.tool_calls ?? []) {
    assert.equal(typeof call.function.name, 'string');
    assert.equal(typeof call.function.arguments, 'object');
  }

  // Turn 2: the client ran the tool and sends back the call (arguments an object) and its result.
  const call = { name: 'get_weather', arguments: { city: 'Paris' } };
  const result = '{"temperature_c": 21, "sky": "clear"}';
  const second = await ollama.chat({ model, tools, options: greedy(24), messages: [
    { role: 'user', content: user },
    { role: 'assistant', content: '', tool_calls: [{ function: call }] },
    { role: 'tool', content: result, tool_name: call.name },
  ] });
  assert.equal(second.prompt_eval_count, await countTokens(toolPrompt({ user, call, result })));
  const reference = await openai.chat.completions.create({
    model, temperature: 0, max_tokens: 24, tools,
    messages: [
      { role: 'user', content: user },
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function',
        function: { name: call.name, arguments: JSON.stringify(call.arguments) } }] },
      { role: 'tool', tool_call_id: 'call_1', content: result },
    ],
  });
  assert.equal(second.message.content, reference.choices[0].message.content ?? '');
  // Streamed, the same turn gives the same text.
  let text = '';
  for await (const chunk of await ollama.chat({ model, tools, options: greedy(24), stream: true,
    messages: [{ role: 'user', content: user }, { role: 'assistant', content: '', tool_calls: [{ function: call }] },
      { role: 'tool', content: result, tool_name: call.name }] })) text += chunk.message.content;
  assert.equal(text, second.message.content);
});

test('tags, show, ps and version describe the served model', async () => {
  const { models } = await ollama.list();
  assert.equal(models.length, 1);
  assert.equal(models[0].name, `${model}:latest`);
  assert.equal(models[0].details.family, 'qwen3');
  assert.equal(models[0].details.format, 'safetensors');
  assert.ok(models[0].size > 0);
  assert.match(models[0].digest, /^[0-9a-f]{64}$/);

  const show = await ollama.show({ model });
  assert.deepEqual(show.capabilities, ['completion', 'tools', 'thinking']);
  assert.ok(show.template.includes('<|im_start|>'));
  assert.equal(show.model_info['general.architecture'], 'qwen3');
  assert.equal(show.model_info['qwen3.context_length'], maxContext);
  assert.equal(show.details.family, 'qwen3');

  const ps = await ollama.ps();
  assert.equal(ps.models[0].name, `${model}:latest`);
  assert.equal(ps.models[0].context_length, maxContext);
  assert.equal(ps.models[0].digest, models[0].digest);

  assert.match((await ollama.version()).version, /^\d+\.\d+\.\d+$/);
  // Loading is a no-op that says so; pulling the served model succeeds, as it is here.
  const load = await ollama.chat({ model, messages: [] });
  assert.equal(load.done_reason, 'load');
  assert.equal((await ollama.pull({ model, stream: false })).status, 'success');
});

test('errors come back in Ollama\'s shape with the right status', async () => {
  const rejectsWith = (promise, status, pattern) => assert.rejects(promise, (e) => {
    assert.equal(e.name, 'ResponseError', String(e));
    assert.equal(e.status_code, status, e.error);
    assert.match(e.error, pattern);
    return true;
  });
  const messages = [{ role: 'user', content: 'hi' }];
  await rejectsWith(ollama.chat({ model: 'llama3.2', messages }), 404, /model 'llama3.2' not found/);
  await rejectsWith(ollama.chat({ model, messages, options: { mirostat: 2 } }), 400, /mirostat/);
  await rejectsWith(ollama.generate({ model, prompt: 'x', template: '{{ .Prompt }}' }), 400, /template/);
  await rejectsWith(ollama.embed({ model, input: 'x' }), 501, /does not support embeddings/);
  await rejectsWith(ollama.pull({ model: 'llama3.2', stream: false }), 400, /neither a hub id/);
  await rejectsWith(ollama.delete({ model }), 501, /not supported/);
  const malformed = await post('/api/chat', '{"model":', { raw: true });
  assert.equal(malformed.status, 400);
  assert.deepEqual(Object.keys(malformed.json), ['error']);
  // A stream that fails before its first line is an HTTP error, not a broken stream.
  await rejectsWith(ollama.chat({ model, messages, stream: true, options: { num_predict: maxContext * 2 } }), 400,
    /context length/);
});
