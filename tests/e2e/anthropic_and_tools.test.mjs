// The official `@anthropic-ai/sdk` client against `tachyon serve` (messages, streaming
// events, stop sequences, system prompts), and the tool-call round trip in both APIs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { openai, anthropic, model, countTokens, qwen3Prompt, weatherTool, toolPrompt } from './helpers.mjs';

const question = 'Write a Python function `is_prime(n)` that returns True if n is a prime number.';

test('messages: text, usage and stop reason agree with the OpenAI chat answer', async () => {
  const chat = await openai.chat.completions.create({
    model, messages: [{ role: 'user', content: question }], temperature: 0, max_tokens: 40,
  });
  const message = await anthropic.messages.create({
    model, max_tokens: 40, temperature: 0, messages: [{ role: 'user', content: question }],
  });
  assert.equal(message.type, 'message');
  assert.equal(message.role, 'assistant');
  const text = message.content.filter((b) => b.type === 'text').map((b) => b.text).join('');
  assert.equal(text, chat.choices[0].message.content);
  assert.equal(message.usage.input_tokens + (message.usage.cache_read_input_tokens ?? 0), chat.usage.prompt_tokens);
  assert.equal(message.usage.output_tokens, chat.usage.completion_tokens);
  assert.equal(message.stop_reason, chat.choices[0].finish_reason === 'length' ? 'max_tokens' : 'end_turn');
});

test('messages/count_tokens counts the prompt that messages would run', async () => {
  const params = { model, system: 'You are terse.', messages: [{ role: 'user', content: question }] };
  const counted = await anthropic.messages.countTokens(params);
  const message = await anthropic.messages.create({ ...params, max_tokens: 4, temperature: 0 });
  assert.equal(counted.input_tokens, message.usage.input_tokens + (message.usage.cache_read_input_tokens ?? 0));
  assert.equal(counted.input_tokens,
    await countTokens(qwen3Prompt([{ role: 'system', content: 'You are terse.' }, { role: 'user', content: question }])));
});

test('messages: streamed events join to the non-streamed message', async () => {
  const params = { model, max_tokens: 40, temperature: 0, system: 'You are terse.',
    messages: [{ role: 'user', content: [{ type: 'text', text: question }] }] };
  const full = await anthropic.messages.create(params);
  assert.equal(full.usage.input_tokens + (full.usage.cache_read_input_tokens ?? 0),
    await countTokens(qwen3Prompt([{ role: 'system', content: 'You are terse.' }, { role: 'user', content: question }])));

  const events = [];
  let text = '';
  const raw = await anthropic.messages.create({ ...params, stream: true });
  for await (const event of raw) {
    events.push(event.type);
    if (event.type === 'content_block_delta' && event.delta.type === 'text_delta') text += event.delta.text;
  }
  assert.equal(events[0], 'message_start');
  assert.equal(events.at(-1), 'message_stop');
  assert.equal(events.at(-2), 'message_delta');
  assert.ok(events.includes('content_block_start') && events.includes('content_block_stop'));
  assert.equal(text, full.content.map((b) => b.text ?? '').join(''));

  // The SDK's stream helper assembles the same message.
  const helper = anthropic.messages.stream(params);
  const final = await helper.finalMessage();
  assert.deepEqual(final.content, full.content);
  assert.equal(final.stop_reason, full.stop_reason);
  assert.equal(final.usage.output_tokens, full.usage.output_tokens);
});

test('messages: stop_sequences end the text and are reported', async () => {
  const params = { model, max_tokens: 48, temperature: 0, messages: [{ role: 'user', content: question }] };
  const reference = (await anthropic.messages.create(params)).content.map((b) => b.text ?? '').join('');
  const at = reference.indexOf('(');
  assert.ok(at > 0, `expected a '(' in ${JSON.stringify(reference)}`);
  const stopped = await anthropic.messages.create({ ...params, stop_sequences: ['('] });
  assert.equal(stopped.stop_reason, 'stop_sequence');
  assert.equal(stopped.stop_sequence, '(');
  assert.equal(stopped.content.map((b) => b.text ?? '').join(''), reference.slice(0, at));
});

// --- tools -------------------------------------------------------------------------------

test('tools: a full tool-call round trip renders identically through both APIs', async () => {
  const user = 'What is the weather in Paris?';
  // Turn 1: tools offered. The prompt carries the tool definitions exactly as the template
  // writes them; any tool call the model makes comes back in the API's tool-call shape.
  const first = await openai.chat.completions.create({
    model, temperature: 0, max_tokens: 32, tools: [{ type: 'function', function: weatherTool }],
    messages: [{ role: 'user', content: user }],
  });
  assert.equal(first.usage.prompt_tokens, await countTokens(toolPrompt({ user })));
  const firstChoice = first.choices[0];
  if (firstChoice.message.tool_calls?.length) {
    assert.equal(firstChoice.finish_reason, 'tool_calls');
    for (const call of firstChoice.message.tool_calls) JSON.parse(call.function.arguments);
  } else {
    assert.ok(['stop', 'length'].includes(firstChoice.finish_reason));
  }

  // Turn 2: the client ran the tool and sends back the call and its result.
  const call = { name: 'get_weather', arguments: { city: 'Paris' } };
  const result = '{"temperature_c": 21, "sky": "clear"}';
  const expectedPrompt = await countTokens(toolPrompt({ user, call, result }));
  const second = await openai.chat.completions.create({
    model, temperature: 0, max_tokens: 24, tools: [{ type: 'function', function: weatherTool }],
    messages: [
      { role: 'user', content: user },
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function',
        function: { name: call.name, arguments: JSON.stringify(call.arguments) } }] },
      { role: 'tool', tool_call_id: 'call_1', content: result },
    ],
  });
  assert.equal(second.usage.prompt_tokens, expectedPrompt);

  const anth = await anthropic.messages.create({
    model, temperature: 0, max_tokens: 24,
    tools: [{ name: weatherTool.name, description: weatherTool.description, input_schema: weatherTool.parameters }],
    messages: [
      { role: 'user', content: user },
      { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: call.name, input: call.arguments }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: result }] },
    ],
  });
  assert.equal(anth.usage.input_tokens + (anth.usage.cache_read_input_tokens ?? 0), expectedPrompt);
  // Same prompt, greedy: the same answer in both APIs.
  assert.equal(anth.content.filter((b) => b.type === 'text').map((b) => b.text).join(''),
    second.choices[0].message.content ?? '');

  // The Responses API form of the same conversation.
  const resp = await openai.responses.create({
    model, temperature: 0, max_output_tokens: 24,
    tools: [{ type: 'function', name: weatherTool.name, description: weatherTool.description,
      parameters: weatherTool.parameters, strict: false }],
    input: [
      { role: 'user', content: user },
      { type: 'function_call', call_id: 'call_1', name: call.name, arguments: JSON.stringify(call.arguments) },
      { type: 'function_call_output', call_id: 'call_1', output: result },
    ],
  });
  assert.equal(resp.usage.input_tokens, expectedPrompt);
  assert.equal(resp.output_text, second.choices[0].message.content ?? '');
});
