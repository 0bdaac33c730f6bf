// The official `@anthropic-ai/sdk` client against `tachyon serve` (messages, streaming
// events, stop sequences, system prompts), and the tool-call round trip in both APIs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { openai, anthropic, model, countTokens, qwen3Prompt } from './helpers.mjs';

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

const weatherTool = {
  name: 'get_weather',
  description: 'Current weather of a city',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
};

// Python json.dumps (what the template's `tojson` writes): ", " and ": " separators.
function pyJson(value) {
  if (Array.isArray(value)) return `[${value.map(pyJson).join(', ')}]`;
  if (value && typeof value === 'object')
    return `{${Object.entries(value).map(([k, v]) => `${JSON.stringify(k)}: ${pyJson(v)}`).join(', ')}}`;
  return JSON.stringify(value);
}

// The demo model's (Qwen3) template for: [system tools] user, assistant tool call, tool result.
function toolPrompt({ user, call, result }) {
  let out = '<|im_start|>system\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n' +
    'You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n' +
    pyJson({ type: 'function', function: weatherTool }) +
    '\n</tools>\n\nFor each function call, return a json object with function name and arguments within ' +
    '<tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n' +
    '</tool_call><|im_end|>\n';
  out += `<|im_start|>user\n${user}<|im_end|>\n`;
  if (call) {
    out += `<|im_start|>assistant\n<tool_call>\n{"name": "${call.name}", "arguments": ${pyJson(call.arguments)}}\n</tool_call><|im_end|>\n`;
    out += `<|im_start|>user\n<tool_response>\n${result}\n</tool_response><|im_end|>\n`;
  }
  return out + '<|im_start|>assistant\n';
}

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
