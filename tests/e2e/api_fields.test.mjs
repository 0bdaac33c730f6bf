// The rest of the OpenAI surface, through the official `openai` client: n > 1 (shared prompt,
// seeded choices, streamed by index), Responses logprobs, fill-in-the-middle `suffix`,
// reasoning effort, previous_response_id, and the llama-server / vLLM /tokenize endpoints.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { openai, OpenAI, model, maxContext, countTokens, qwen3Prompt, banEos, post } from './helpers.mjs';

const question = [{ role: 'user', content: 'Write a Python function `add(a, b)` that returns the sum of a and b.' }];

// A prompt no earlier test sent, so the prefix cache holds none of it before the first choice.
function freshMessages(tag) {
  return [{ role: 'user', content: `Request ${tag} ${Date.now()}: ` + 'Explain what a Python list comprehension is. '.repeat(6) }];
}

test('chat n=3: seeded choices are reproducible, differ, share the prompt, and count it once', async () => {
  const messages = freshMessages('n3');
  // 16 tokens: the demo model is confident enough at the start of an answer that three
  // seeded choices of 8 tokens can coincide by chance.
  const params = { model, messages, n: 3, seed: 1234, temperature: 1.0, max_tokens: 16, logit_bias: banEos() };
  const first = await openai.chat.completions.create(params);
  assert.equal(first.choices.length, 3);
  assert.deepEqual(first.choices.map((c) => c.index), [0, 1, 2]);
  const texts = first.choices.map((c) => c.message.content);
  assert.ok(new Set(texts).size > 1, `independent samples differ: ${JSON.stringify(texts)}`);
  const promptTokens = await countTokens(qwen3Prompt(messages));
  assert.equal(first.usage.prompt_tokens, promptTokens, 'the prompt is counted once');
  assert.equal(first.usage.completion_tokens, 3 * 16);
  // The forks found the first choice's full prompt blocks in the prefix cache.
  assert.ok(first.usage.prompt_tokens_details.cached_tokens >= promptTokens - 32, JSON.stringify(first.usage));

  const again = await openai.chat.completions.create(params);
  assert.deepEqual(again.choices.map((c) => c.message.content), texts, 'the same seed gives the same choices');

  // Streamed: chunks carry the choice index; each index's text is that choice's.
  const stream = await openai.chat.completions.create({ ...params, stream: true, stream_options: { include_usage: true } });
  const streamed = ['', '', ''];
  const finishes = [null, null, null];
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      if (c.delta.content) streamed[c.index] += c.delta.content;
      if (c.finish_reason) finishes[c.index] = c.finish_reason;
    }
  }
  assert.deepEqual(streamed, texts);
  assert.deepEqual(finishes, ['length', 'length', 'length']);
  assert.equal(usage.prompt_tokens, promptTokens);
  assert.equal(usage.completion_tokens, 3 * 16);
});

test('completions n=2 with best_of=n; best_of > n is refused naming it', async () => {
  const params = { model, prompt: 'def fibonacci(n):', n: 2, best_of: 2, seed: 99, temperature: 0.9, max_tokens: 6,
    logit_bias: banEos() };
  const a = await openai.completions.create(params);
  const b = await openai.completions.create(params);
  assert.deepEqual(a.choices.map((c) => c.index), [0, 1]);
  assert.deepEqual(a.choices.map((c) => c.text), b.choices.map((c) => c.text));
  assert.equal(a.usage.completion_tokens, 12);
  assert.equal(a.usage.prompt_tokens, await countTokens('def fibonacci(n):'));
  await assert.rejects(openai.completions.create({ model, prompt: 'x', best_of: 3 }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === 'best_of');
});

test('responses: include message.output_text.logprobs with top_logprobs, plain and streamed', async () => {
  const params = { model, input: question[0].content, temperature: 0, max_output_tokens: 12,
    include: ['message.output_text.logprobs'], top_logprobs: 2 };
  const response = await openai.responses.create(params);
  const part = response.output.find((o) => o.type === 'message').content[0];
  assert.ok(part.logprobs.length > 0);
  assert.equal(part.logprobs.map((l) => l.token).join(''), part.text, 'the tokens spell the message text');
  for (const l of part.logprobs) {
    assert.ok(l.logprob <= 0);
    assert.equal(l.top_logprobs.length, 2);
    assert.equal(l.top_logprobs[0].token, l.token, 'greedy: the chosen token is the most likely');
    assert.ok(Array.isArray(l.bytes));
  }
  assert.equal(response.top_logprobs, 2);

  const stream = await openai.responses.create({ ...params, stream: true });
  const tokens = [];
  let text = '', done = null;
  for await (const event of stream) {
    if (event.type === 'response.output_text.delta') {
      text += event.delta;
      for (const l of event.logprobs) tokens.push(l.token);
    }
    if (event.type === 'response.output_text.done') done = event;
  }
  assert.equal(text, part.text);
  assert.equal(tokens.join(''), part.text);
  assert.deepEqual(done.logprobs.map((l) => l.token), part.logprobs.map((l) => l.token));

  const without = await openai.responses.create({ model, input: 'hi', max_output_tokens: 4 });
  assert.deepEqual(without.output.find((o) => o.type === 'message').content[0].logprobs, []);
});

test('completions suffix: fill-in-the-middle with the demo model\'s FIM tokens', async () => {
  const prefix = 'def add(a, b):\n    ';
  const suffix = '\n\nprint(add(1, 2))\n';
  const out = await openai.completions.create({ model, prompt: prefix, suffix, temperature: 0, max_tokens: 12 });
  assert.equal(out.usage.prompt_tokens,
    await countTokens(`<|fim_prefix|>${prefix}<|fim_suffix|>${suffix}<|fim_middle|>`));
  assert.equal(out.choices.length, 1);
  assert.equal(typeof out.choices[0].text, 'string');
  const res = await post('/v1/completions', { model, prompt: 'x', suffix: 'y', echo: true });
  assert.equal(res.status, 400);
  assert.equal(res.json.error.param, 'echo');
});

test('reasoning_effort: validated, and mapped to the demo template\'s enable_thinking', async () => {
  const base = { model, messages: question, temperature: 0, max_tokens: 1 };
  const plain = await openai.chat.completions.create(base);
  const none = await openai.chat.completions.create({ ...base, reasoning_effort: 'none' });
  const high = await openai.chat.completions.create({ ...base, reasoning_effort: 'high' });
  assert.equal(none.usage.prompt_tokens, await countTokens(qwen3Prompt(question) + '<think>\n\n</think>\n\n'));
  assert.equal(high.usage.prompt_tokens, plain.usage.prompt_tokens);
  await assert.rejects(openai.chat.completions.create({ ...base, reasoning_effort: 'extreme' }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === 'reasoning_effort');

  const r = await openai.responses.create({ model, input: question[0].content, max_output_tokens: 1,
    reasoning: { effort: 'minimal' } });
  assert.equal(r.usage.input_tokens, none.usage.prompt_tokens);
  await assert.rejects(openai.responses.create({ model, input: 'x', reasoning: { effort: 'extreme' } }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === 'reasoning.effort');
});

test('responses previous_response_id continues a stored conversation; unknown and unstored ids are 404', async () => {
  const first = await openai.responses.create({ model, input: 'My name is Ada.', temperature: 0, max_output_tokens: 8 });
  assert.equal(first.store, true);
  const next = await openai.responses.create({ model, previous_response_id: first.id, input: 'What is my name?',
    temperature: 0, max_output_tokens: 4 });
  assert.equal(next.previous_response_id, first.id);
  // The template drops the earlier turn's (empty) reasoning; the reply text stays in the prompt.
  const history = [{ role: 'user', content: 'My name is Ada.' }, { role: 'assistant', content: first.output_text },
    { role: 'user', content: 'What is my name?' }];
  assert.equal(next.usage.input_tokens, await countTokens(qwen3Prompt(history)));

  // Streamed responses are stored too, and chain.
  const stream = await openai.responses.create({ model, previous_response_id: next.id, input: 'Thanks.',
    max_output_tokens: 2, stream: true });
  let streamedId = null;
  for await (const event of stream) if (event.type === 'response.created') streamedId = event.response.id;
  const third = await openai.responses.create({ model, previous_response_id: streamedId, input: 'Bye.', max_output_tokens: 2 });
  assert.ok(third.usage.input_tokens > next.usage.input_tokens);

  await assert.rejects(openai.responses.create({ model, previous_response_id: 'resp_doesnotexist', input: 'x' }),
    (e) => e instanceof OpenAI.NotFoundError && e.status === 404 && e.param === 'previous_response_id');
  const unstored = await openai.responses.create({ model, input: 'x', store: false, max_output_tokens: 2 });
  assert.equal(unstored.store, false);
  await assert.rejects(openai.responses.create({ model, previous_response_id: unstored.id, input: 'y' }),
    (e) => e instanceof OpenAI.NotFoundError);
});

test('/tokenize and /detokenize in the llama-server and vLLM shapes', async () => {
  const text = 'Hello world, héllo!';
  const llama = await post('/tokenize', { content: text });
  assert.equal(llama.status, 200, llama.text);
  assert.equal(llama.json.tokens.length, await countTokens(text));
  assert.equal(llama.json.count, llama.json.tokens.length);
  assert.equal(llama.json.max_model_len, maxContext);

  const pieces = await post('/tokenize', { content: text, with_pieces: true });
  assert.deepEqual(pieces.json.tokens.map((t) => t.id), llama.json.tokens);
  const bytes = pieces.json.tokens.flatMap((t) => (typeof t.piece === 'string' ? [...Buffer.from(t.piece)] : t.piece));
  assert.equal(Buffer.from(bytes).toString(), text, 'the pieces spell the text');

  const vllm = await post('/tokenize', { model, prompt: text, return_token_strs: true });
  assert.deepEqual(vllm.json.tokens, llama.json.tokens);  // the demo tokenizer adds no BOS
  assert.equal(vllm.json.token_strs.length, vllm.json.count);

  const chat = await post('/tokenize', { model, messages: question });
  assert.equal(chat.json.count, await countTokens(qwen3Prompt(question)));

  const back = await post('/detokenize', { tokens: llama.json.tokens });
  assert.equal(back.json.content, text);
  assert.equal(back.json.prompt, text);
  assert.equal((await post('/detokenize', { tokens: pieces.json.tokens })).json.content, text);

  assert.equal((await post('/tokenize', { content: 'a', prompt: 'b' })).status, 400);
  const bad = await post('/detokenize', { tokens: [1, 99999999] });
  assert.equal(bad.status, 400);
  assert.equal(bad.json.error.param, 'tokens[1]');
  assert.equal((await post('/tokenize', { model: 'no-such-model', content: 'x' })).status, 404);
});
