// The official `openai` client against `tachyon serve`: models, chat (plain, streamed,
// logprobs, stop), completions (text, token ids, echo, logprobs, stream) and responses.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { openai, model, countTokens, qwen3Prompt, collectChatStream } from './helpers.mjs';

const question = [{ role: 'user', content: 'Write a Python function `add(a, b)` that returns the sum of a and b.' }];

test('GET /v1/models lists the served model', async () => {
  const list = await openai.models.list();
  assert.deepEqual(list.data.map((m) => m.id), [model]);
  const one = await openai.models.retrieve(model);
  assert.equal(one.id, model);
});

test('chat: streamed text joins to the non-streamed text; usage matches the tokenizer', async () => {
  const params = { model, messages: question, temperature: 0, max_tokens: 48 };
  const full = await openai.chat.completions.create(params);
  const choice = full.choices[0];
  assert.equal(full.object, 'chat.completion');
  assert.equal(choice.message.role, 'assistant');
  assert.ok(choice.message.content.length > 0, 'the demo model answers something');
  assert.ok(['stop', 'length'].includes(choice.finish_reason));
  // Prompt tokens: the official tokenizer on the chat format written out by hand.
  assert.equal(full.usage.prompt_tokens, await countTokens(qwen3Prompt(question)));
  assert.equal(full.usage.total_tokens, full.usage.prompt_tokens + full.usage.completion_tokens);
  if (choice.finish_reason === 'length') assert.equal(full.usage.completion_tokens, 48);

  const streamed = await collectChatStream(params);
  assert.equal(streamed.role, 'assistant');
  assert.equal(streamed.text, choice.message.content);
  assert.equal(streamed.finish, choice.finish_reason);
  assert.deepEqual(streamed.usage.prompt_tokens, full.usage.prompt_tokens);
  assert.deepEqual(streamed.usage.completion_tokens, full.usage.completion_tokens);
  assert.ok(streamed.chunks > 3, 'the answer arrives in several chunks');
});

test('chat: logprobs count the generated tokens, and the top alternatives are sorted', async () => {
  const full = await openai.chat.completions.create({
    model, messages: question, temperature: 0, max_tokens: 12, logprobs: true, top_logprobs: 3,
  });
  const choice = full.choices[0];
  const entries = choice.logprobs.content;
  // The end-of-turn token is counted in usage but is not text, so it has no entry.
  const expected = full.usage.completion_tokens - (choice.finish_reason === 'stop' ? 1 : 0);
  assert.equal(entries.length, expected);
  // The tokens spell the raw output: the answer, after an (empty) <think></think> block the
  // reasoning parser moves out of `content`.
  const raw = entries.map((e) => e.token).join('');
  assert.equal(raw.replace(/^<think>[\s\S]*?<\/think>\s*/, ''), choice.message.content);
  for (const e of entries) {
    assert.equal(e.top_logprobs.length, 3);
    assert.ok(e.logprob <= 0);
    // Greedy: the chosen token is the most likely one.
    assert.equal(e.top_logprobs[0].token, e.token);
    for (let i = 1; i < 3; i++) assert.ok(e.top_logprobs[i - 1].logprob >= e.top_logprobs[i].logprob);
  }
});

test('chat: a stop string ends the text right before it (plain and streamed)', async () => {
  const params = { model, messages: question, temperature: 0, max_tokens: 48 };
  const reference = (await openai.chat.completions.create(params)).choices[0].message.content;
  // A stop string from the middle of the answer that does not occur earlier.
  let at = Math.floor(reference.length / 2), stop = null;
  for (; at < reference.length - 3 && stop === null; at++) {
    const candidate = reference.slice(at, at + 3);
    if (candidate.trim().length === 3 && reference.indexOf(candidate) === at) stop = candidate;
  }
  assert.ok(stop, `no usable stop string in ${JSON.stringify(reference)}`);
  const expected = reference.slice(0, reference.indexOf(stop));
  const stopped = await openai.chat.completions.create({ ...params, stop: [stop, 'never-generated-xyz'] });
  assert.equal(stopped.choices[0].message.content, expected);
  assert.equal(stopped.choices[0].finish_reason, 'stop');
  const streamed = await collectChatStream({ ...params, stop });
  assert.equal(streamed.text, expected);
  assert.equal(streamed.finish, 'stop');
});

test('completions: text prompt, token-id prompt, echo and logprobs agree', async () => {
  const prompt = 'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n';
  const plain = await openai.completions.create({ model, prompt, temperature: 0, max_tokens: 20 });
  assert.equal(plain.object, 'text_completion');
  assert.equal(plain.usage.prompt_tokens, await countTokens(prompt));
  assert.equal(plain.choices[0].finish_reason, 'length');
  assert.equal(plain.usage.completion_tokens, 20);

  const withLogprobs = await openai.completions.create({ model, prompt, temperature: 0, max_tokens: 20, logprobs: 2 });
  const lp = withLogprobs.choices[0].logprobs;
  assert.equal(lp.tokens.length, 20);
  assert.equal(lp.tokens.join(''), plain.choices[0].text);
  assert.equal(lp.top_logprobs[0] && Object.keys(lp.top_logprobs[0]).length, 2);

  const echoed = await openai.completions.create({ model, prompt, temperature: 0, max_tokens: 20, echo: true });
  assert.equal(echoed.choices[0].text, prompt + plain.choices[0].text);

  // echo + logprobs: every prompt token (the first has no logprob) and every generated one.
  const echoLp = (await openai.completions.create({ model, prompt, temperature: 0, max_tokens: 20, echo: true,
    logprobs: 1 })).choices[0].logprobs;
  assert.equal(echoLp.tokens.length, plain.usage.prompt_tokens + 20);
  assert.equal(echoLp.tokens.join(''), prompt + plain.choices[0].text);
  assert.equal(echoLp.token_logprobs[0], null);
  assert.ok(echoLp.token_logprobs.slice(1).every((x) => typeof x === 'number' && x <= 0));
  assert.deepEqual(echoLp.token_logprobs.slice(-20), lp.token_logprobs);

  const stream = await openai.completions.create({ model, prompt, temperature: 0, max_tokens: 20, stream: true });
  let text = '';
  for await (const chunk of stream) text += chunk.choices.map((c) => c.text).join('');
  assert.equal(text, plain.choices[0].text);
});

test('completions: a prompt of token ids gives the same text as the string', async () => {
  // 'def add(a, b):' through the server's own tokenization, echoed back as ids.
  const prompt = 'def add(a, b):\n';
  const byText = await openai.completions.create({ model, prompt, temperature: 0, max_tokens: 10, logprobs: 0, echo: true });
  const promptTokens = byText.usage.prompt_tokens;
  assert.equal(promptTokens, await countTokens(prompt));
  const byTextPlain = await openai.completions.create({ model, prompt, temperature: 0, max_tokens: 10 });
  // Token ids for the prompt from the official tokenizer.
  const { createRequire } = await import('node:module');
  const require = createRequire(process.env.TACHYON_NODE_MODULES + '/noop.js');
  const { Tokenizer } = require('tokenizers');
  const tok = Tokenizer.fromFile(process.env.TACHYON_MODEL_DIR + '/tokenizer.json');
  const ids = (await tok.encode(prompt, null, { addSpecialTokens: false })).getIds();
  const byIds = await openai.completions.create({ model, prompt: ids, temperature: 0, max_tokens: 10 });
  assert.equal(byIds.choices[0].text, byTextPlain.choices[0].text);
  assert.equal(byIds.usage.prompt_tokens, ids.length);
});

test('responses: output_text equals the chat answer; streamed deltas join to it', async () => {
  const input = question[0].content;
  const chat = await openai.chat.completions.create({ model, messages: question, temperature: 0, max_tokens: 40 });
  const response = await openai.responses.create({ model, input, temperature: 0, max_output_tokens: 40 });
  assert.equal(response.object, 'response');
  assert.equal(response.output_text, chat.choices[0].message.content);
  assert.equal(response.usage.input_tokens, chat.usage.prompt_tokens);
  assert.equal(response.usage.output_tokens, chat.usage.completion_tokens);
  assert.equal(response.status, chat.choices[0].finish_reason === 'length' ? 'incomplete' : 'completed');

  const stream = await openai.responses.create({ model, input, temperature: 0, max_output_tokens: 40, stream: true });
  let deltas = '', final = null;
  const types = [];
  for await (const event of stream) {
    types.push(event.type);
    if (event.type === 'response.output_text.delta') deltas += event.delta;
    if (event.type === 'response.completed' || event.type === 'response.incomplete') final = event.response;
  }
  assert.equal(types[0], 'response.created');
  assert.ok(types.includes('response.output_item.added') && types.includes('response.output_text.done'));
  assert.equal(deltas, response.output_text);
  assert.ok(final, 'a final response event arrives');
  assert.equal(final.output[0].content[0].text, response.output_text);

  const withInstructions = await openai.responses.create({
    model, instructions: 'You write Python.', input: [{ role: 'user', content: input }], temperature: 0, max_output_tokens: 8,
  });
  assert.equal(withInstructions.usage.input_tokens,
    await countTokens(qwen3Prompt([{ role: 'system', content: 'You write Python.' }, question[0]])));
});

test('a repeated prompt is served from the prefix cache, with the same answer', async () => {
  const system = 'You are a careful Python programmer. '.repeat(12);
  const params = { model, temperature: 0, max_tokens: 16,
    messages: [{ role: 'system', content: system }, { role: 'user', content: 'Write a function that doubles x.' }] };
  const first = await openai.chat.completions.create(params);
  const second = await openai.chat.completions.create(params);
  assert.equal(second.choices[0].message.content, first.choices[0].message.content);
  assert.equal(second.usage.prompt_tokens, first.usage.prompt_tokens);
  // Every full 16-token block but the one holding the last prompt token comes from the cache.
  assert.ok(second.usage.prompt_tokens_details.cached_tokens >= first.usage.prompt_tokens - 32,
    JSON.stringify(second.usage));
});
