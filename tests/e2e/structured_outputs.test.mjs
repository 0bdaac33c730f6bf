// Structured outputs through the official SDKs: a corpus of JSON Schemas
// (fixtures/json_schemas.json: recursion, anyOf of objects, enums with escapes, nested arrays
// with bounds, formats, patterns, numeric bounds, ...) sent as response_format json_schema,
// greedy and sampled; every answer that finishes ("stop") must validate with ajv. Also the
// SDK helpers (zod through openai/helpers/zod and chat.completions.parse, zod tools), the
// Responses API's text.format, completions, llama-server's and vLLM's fields, Anthropic tools
// with tool_choice any / tool, and fuzzed schemas: refused with a 400 naming the keyword,
// never a crash.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { openai, anthropic, model, post } from './helpers.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(process.env.TACHYON_NODE_MODULES, 'noop.js'));
const Ajv = require('ajv/dist/2020').default;
const addFormats = require('ajv-formats').default;
const { z } = require('zod');
const { zodResponseFormat, zodFunction } = require('openai/helpers/zod');

// multipleOfPrecision: ajv checks multipleOf by dividing doubles (0.07 / 0.01 is 7.000000000000001),
// which refuses exact decimal multiples without it.
const ajv = new Ajv({ strict: false, allErrors: true, multipleOfPrecision: 9 });
addFormats(ajv);
// One validator for draft-07 and 2020-12 schemas: ajv's 2020 dialect, without the $schema tag.
const compileSchema = (schema) => {
  const { $schema, ...rest } = schema;
  return ajv.compile(rest);
};
const corpus = JSON.parse(readFileSync(path.join(here, 'fixtures/json_schemas.json'), 'utf8'));
const prompt = 'def config():\n    return {"name": "demo", "size": 3}';

// Runs `jobs` (functions returning promises) with at most `limit` in flight.
async function pool(jobs, limit = 12) {
  const results = new Array(jobs.length);
  let next = 0;
  await Promise.all(Array.from({ length: limit }, async () => {
    while (next < jobs.length) {
      const i = next++;
      results[i] = await jobs[i]();
    }
  }));
  return results;
}

function checkAnswer(entry, finish, text, label) {
  if (finish !== 'stop') {
    assert.equal(finish, 'length', `${entry.name} ${label}: ${finish}`);
    return false;
  }
  let value;
  try {
    value = JSON.parse(text);
  } catch (e) {
    assert.fail(`${entry.name} ${label}: not JSON: ${text}`);
  }
  const validate = compileSchema(entry.schema);
  assert.ok(validate(value), `${entry.name} ${label}: ${text}\n${JSON.stringify(validate.errors)}`);
  return true;
}

test(`json_schema corpus (${corpus.length} schemas): greedy and sampled answers validate with ajv`, async (t) => {
  assert.ok(corpus.length >= 50);
  const jobs = [];
  for (const entry of corpus) {
    for (const [label, sampling] of [['greedy', { temperature: 0 }], ['sampled', { temperature: 1, seed: 7 }]]) {
      jobs.push(async () => {
        const r = await openai.chat.completions.create({
          model, messages: [{ role: 'user', content: prompt }], max_tokens: 160, ...sampling,
          response_format: { type: 'json_schema', json_schema: { name: entry.name, schema: entry.schema, strict: true } },
        });
        return checkAnswer(entry, r.choices[0].finish_reason, r.choices[0].message.content, label);
      });
    }
  }
  const finished = (await pool(jobs)).filter(Boolean).length;
  t.diagnostic(`${finished} of ${jobs.length} answers finished within max_tokens and validated`);
  // Most answers close within the token budget; the rest ran out of tokens inside a long string.
  assert.ok(finished >= jobs.length * 0.6, `only ${finished} of ${jobs.length} answers finished`);
});

test('zod through openai/helpers/zod: chat.completions.parse returns a parsed, valid object', async () => {
  const Step = z.object({ explanation: z.string().max(20), output: z.string().max(20) });
  const MathReasoning = z.object({ steps: z.array(Step).max(2), final_answer: z.string().max(10),
    kind: z.enum(['arith', 'algebra']), ok: z.boolean(), score: z.number().int().min(0).max(10),
    note: z.string().max(8).nullable() });
  for (const temperature of [0, 1]) {
    const completion = await openai.chat.completions.parse({
      model, messages: [{ role: 'user', content: prompt }], max_tokens: 200, temperature, seed: 3,
      response_format: zodResponseFormat(MathReasoning, 'math_reasoning'),
    });
    const message = completion.choices[0].message;
    if (completion.choices[0].finish_reason !== 'stop') continue;
    assert.ok(message.parsed, message.content);
    assert.deepEqual(MathReasoning.parse(message.parsed), message.parsed);
  }
});

test('zod tools: tool_choice required and named hold the arguments to each tool\'s schema', async () => {
  const tools = [
    zodFunction({ name: 'get_weather', parameters: z.object({ city: z.string().max(16),
      unit: z.enum(['celsius', 'fahrenheit']) }) }),
    zodFunction({ name: 'set_alarm', parameters: z.object({ hour: z.number().int().min(0).max(23),
      minute: z.number().int().min(0).max(59), label: z.string().max(10).nullable() }) }),
  ];
  const schemas = Object.fromEntries(tools.map((t) => [t.function.name, compileSchema(t.function.parameters)]));
  for (const tool_choice of ['required', { type: 'function', function: { name: 'set_alarm' } }]) {
    for (const temperature of [0, 1]) {
      const completion = await openai.chat.completions.parse({
        model, messages: [{ role: 'user', content: 'Wake me at seven' }], tools, tool_choice, max_tokens: 120,
        temperature, seed: 11,
      });
      const choice = completion.choices[0];
      if (choice.finish_reason === 'length') continue;
      assert.equal(choice.finish_reason, 'tool_calls', JSON.stringify(choice.message));
      const call = choice.message.tool_calls[0];
      if (typeof tool_choice === 'object') assert.equal(call.function.name, 'set_alarm');
      assert.ok(schemas[call.function.name](call.function.parsed_arguments), call.function.arguments);
    }
  }
});

test('tool_choice auto: a call the model writes holds to its tool\'s schema', async () => {
  const tools = [{ type: 'function', function: { name: 'lookup', parameters: { type: 'object',
    properties: { id: { type: 'integer', minimum: 1, maximum: 99 } }, required: ['id'], additionalProperties: false } } }];
  const r = await openai.chat.completions.create({ model, tools, tool_choice: 'auto', max_tokens: 60, temperature: 0,
    messages: [{ role: 'user', content: prompt }] });
  const check = (message) => {
    for (const call of message.tool_calls ?? []) {
      assert.equal(call.function.name, 'lookup');
      const args = JSON.parse(call.function.arguments);
      assert.ok(Number.isInteger(args.id) && args.id >= 1 && args.id <= 99, call.function.arguments);
    }
    return (message.tool_calls ?? []).length;
  };
  check(r.choices[0].message);
  // The demo model rarely calls on its own: a bias on the "<tool_call>" token makes it open
  // calls, and every call it opens must come out whole and within the schema (without the
  // grammar it writes "<tool_call><tool_call>..." and no call at all).
  const [open] = (await post('/tokenize', { model, content: '<tool_call>' })).json.tokens;
  let calls = 0;
  for (const seed of [1, 2, 3]) {
    const biased = await openai.chat.completions.create({ model, tools, tool_choice: 'auto', max_tokens: 60,
      temperature: 1, seed, logit_bias: { [open]: 30 }, messages: [{ role: 'user', content: 'Look up record 42.' }] });
    calls += check(biased.choices[0].message);
  }
  assert.ok(calls >= 3, `only ${calls} calls in three answers biased towards calls`);
});

test('Anthropic tools: tool_choice any, tool and auto enforce the input_schema', async () => {
  const tools = [
    { name: 'get_weather', description: 'Weather', input_schema: { type: 'object', properties: {
      city: { type: 'string', maxLength: 12 }, days: { type: 'integer', minimum: 1, maximum: 7 } },
      required: ['city', 'days'], additionalProperties: false } },
    { name: 'get_time', description: 'Time', input_schema: { type: 'object', properties: {
      tz: { enum: ['UTC', 'CET', 'PST'] } }, required: ['tz'], additionalProperties: false } },
  ];
  const validators = Object.fromEntries(tools.map((t) => [t.name, compileSchema(t.input_schema)]));
  for (const tool_choice of [{ type: 'any' }, { type: 'tool', name: 'get_time' }, { type: 'auto' }]) {
    const msg = await anthropic.messages.create({ model, max_tokens: 100, tools, tool_choice, temperature: 0,
      messages: [{ role: 'user', content: 'What time is it in Paris?' }] });
    if (msg.stop_reason === 'max_tokens') continue;
    if (tool_choice.type === 'auto' && msg.stop_reason !== 'tool_use') continue;  // auto may answer in text
    assert.equal(msg.stop_reason, 'tool_use', JSON.stringify(msg.content));
    const use = msg.content.find((b) => b.type === 'tool_use');
    if (tool_choice.type === 'tool') assert.equal(use.name, 'get_time');
    assert.ok(validators[use.name](use.input), JSON.stringify(use.input));
  }
});

test('Responses text.format json_schema and completions response_format json_schema', async () => {
  const entry = corpus.find((e) => e.name === 'classification');
  const resp = await openai.responses.create({ model, input: prompt, temperature: 0, max_output_tokens: 120,
    text: { format: { type: 'json_schema', name: entry.name, schema: entry.schema, strict: true } } });
  if (resp.status === 'completed') checkAnswer(entry, 'stop', resp.output_text, 'responses');
  const comp = await openai.completions.create({ model, prompt, max_tokens: 120, temperature: 0,
    response_format: { type: 'json_schema', json_schema: { name: entry.name, schema: entry.schema } } });
  checkAnswer(entry, comp.choices[0].finish_reason, comp.choices[0].text, 'completions');
});

test('llama-server and vLLM fields: grammar, json_schema, guided_json / regex / choice / grammar', async () => {
  const base = { model, messages: [{ role: 'user', content: prompt }], max_tokens: 40, temperature: 1, seed: 5 };
  const choice = await openai.chat.completions.create({ ...base, guided_choice: ['alpha', 'beta "quoted"', 'gamma'] });
  assert.ok(['alpha', 'beta "quoted"', 'gamma'].includes(choice.choices[0].message.content));
  assert.equal(choice.choices[0].finish_reason, 'stop');
  const regex = await openai.chat.completions.create({ ...base, guided_regex: '[A-Z]{2}-\\d{3}' });
  assert.match(regex.choices[0].message.content, /^[A-Z]{2}-\d{3}$/);
  const grammar = 'root ::= "answer: " ("yes" | "no") "."';
  for (const field of ['grammar', 'guided_grammar']) {
    const r = await openai.chat.completions.create({ ...base, [field]: grammar });
    assert.match(r.choices[0].message.content, /^answer: (yes|no)\.$/, field);
  }
  const schema = { type: 'object', properties: { n: { type: 'integer', minimum: 5, maximum: 9 } }, required: ['n'],
    additionalProperties: false };
  for (const extra of [{ json_schema: schema }, { guided_json: schema }, { structured_outputs: { json: schema } },
    { response_format: { type: 'json_object', schema } }]) {
    const r = await openai.chat.completions.create({ ...base, max_tokens: 60, ...extra });
    if (r.choices[0].finish_reason !== 'stop') continue;
    const v = JSON.parse(r.choices[0].message.content);
    assert.ok(v.n >= 5 && v.n <= 9, JSON.stringify(extra) + r.choices[0].message.content);
  }
  const structured = await openai.completions.create({ model, prompt, max_tokens: 20, temperature: 1, seed: 2,
    structured_outputs: { choice: ['left', 'right'] } });
  assert.ok(['left', 'right'].includes(structured.choices[0].text));
});

// --- refusals ---------------------------------------------------------------------------------

const unsupported = ['dependentSchemas', 'uniqueItems', 'not', 'oneOf', 'patternProperties', 'propertyNames', 'if',
  'minProperties', 'maxProperties', 'contains', 'dependentRequired', 'unevaluatedProperties', 'prefixItems',
  '$dynamicRef', 'contentEncoding'];

// A random schema from the corpus with one unsupported keyword planted at a random depth.
function plant(rng, schema, keyword) {
  const copy = structuredClone(schema);
  const objects = [];
  (function walk(s) {
    if (!s || typeof s !== 'object') return;
    if (!Array.isArray(s) && ('type' in s || 'properties' in s || 'enum' in s || '$ref' in s || 'anyOf' in s))
      objects.push(s);
    for (const v of Object.values(s)) walk(v);
  })(copy);
  const target = objects.length ? objects[Math.floor(rng() * objects.length)] : copy;
  target[keyword] = keyword === 'not' || keyword === 'if' ? {} : keyword === 'oneOf' ? [{}] : 1;
  return copy;
}

function mulberry32(seed) {
  return () => {
    seed = (seed + 0x6D2B79F5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

test('fuzzed schemas with unsupported keywords get a 400 naming the keyword', async () => {
  const rng = mulberry32(1234);
  for (let i = 0; i < 60; ++i) {
    const keyword = unsupported[i % unsupported.length];
    const schema = plant(rng, corpus[Math.floor(rng() * corpus.length)].schema, keyword);
    const res = await post('/v1/chat/completions', { model, messages: [{ role: 'user', content: 'x' }], max_tokens: 4,
      response_format: { type: 'json_schema', json_schema: { name: 'f', schema } } });
    assert.equal(res.status, 400, `${keyword}: ${JSON.stringify(schema)}`);
    const body = res.json;
    assert.ok(body.error.message.includes(`'${keyword}'`), `${keyword}: ${body.error.message}`);
  }
});

test('random JSON as a schema: a 200 or a 400, never a crash', async () => {
  const rng = mulberry32(99);
  const atoms = [null, true, false, 0, -1, 2.5, 'string', 'object', 'array', '#', '#/$defs/x', '^a+$', '', 'date-time'];
  const keys = ['type', 'properties', 'items', 'enum', 'const', 'anyOf', '$ref', '$defs', 'required', 'minimum',
    'maxLength', 'pattern', 'format', 'additionalProperties', 'minItems', 'maxItems', 'nullable', 'allOf', 'x'];
  const gen = (depth) => {
    const r = rng();
    if (depth > 3 || r < 0.3) return atoms[Math.floor(rng() * atoms.length)];
    if (r < 0.45) return Array.from({ length: Math.floor(rng() * 3) }, () => gen(depth + 1));
    const o = {};
    for (let k = Math.floor(rng() * 4); k > 0; --k) o[keys[Math.floor(rng() * keys.length)]] = gen(depth + 1);
    return o;
  };
  let ok = 0;
  for (let i = 0; i < 80; ++i) {
    const schema = gen(0);
    const res = await post('/v1/chat/completions', { model, messages: [{ role: 'user', content: 'x' }], max_tokens: 3,
      guided_json: schema });
    assert.ok(res.status === 200 || res.status === 400, `${res.status} for ${JSON.stringify(schema)}`);
    if (res.status === 200) ++ok;
  }
  const health = await openai.models.list();
  assert.ok(health.data.length >= 1);
});

test('structured-output fields are validated: one at a time, the right types', async () => {
  const base = { model, messages: [{ role: 'user', content: 'x' }], max_tokens: 4 };
  const cases = [
    [{ guided_regex: 'a', guided_choice: ['a'] }, 'guided_choice'],
    [{ guided_choice: [] }, 'guided_choice'],
    [{ guided_regex: '(a)\\1' }, 'backreferences'],
    [{ grammar: 'root ::= a\na ::= a "x"' }, 'left-recursive'],
    [{ grammar: 'root ::= undefined' }, 'never defined'],
    [{ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'number', multipleOf: 0.3 } } } },
      "'multipleOf'"],
    [{ response_format: { type: 'json_schema' } }, 'json_schema'],
  ];
  for (const [extra, needle] of cases) {
    const res = await post('/v1/chat/completions', { ...base, ...extra });
    assert.equal(res.status, 400, JSON.stringify(extra));
    const body = res.json;
    assert.ok(body.error.message.includes(needle), `${JSON.stringify(extra)}: ${body.error.message}`);
  }
});
