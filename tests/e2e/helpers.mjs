// Shared set-up for the end-to-end tests: the official SDK clients (openai,
// @anthropic-ai/sdk, ollama) pointed at the server that run_e2e.mjs started (TACHYON_URL,
// TACHYON_API_KEY, TACHYON_MODEL), and the official Hugging Face `tokenizers` library for
// counting tokens independently of the server.
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import path from 'node:path';

const modules = process.env.TACHYON_NODE_MODULES;
if (!modules) throw new Error('TACHYON_NODE_MODULES is not set (run through run_e2e.mjs)');
const require = createRequire(path.join(modules, 'noop.js'));
const OpenAI = require('openai');
const Anthropic = require('@anthropic-ai/sdk');
const { Tokenizer } = require('tokenizers');
const { Ollama } = require('ollama');

export const baseUrl = process.env.TACHYON_URL;
export const apiKey = process.env.TACHYON_API_KEY;
export const model = process.env.TACHYON_MODEL;
export const maxContext = Number(process.env.TACHYON_CTX);
export const maxBody = Number(process.env.TACHYON_MAX_BODY);
export const maxQueue = Number(process.env.TACHYON_MAX_QUEUE);

export { OpenAI, Anthropic, Ollama };
export const openai = new OpenAI({ baseURL: `${baseUrl}/v1`, apiKey, maxRetries: 0, timeout: 60000 });
export const anthropic = new Anthropic({ baseURL: baseUrl, apiKey, maxRetries: 0, timeout: 60000 });
export const ollama = new Ollama({ host: baseUrl, headers: { Authorization: `Bearer ${apiKey}` } });

const tokenizer = Tokenizer.fromFile(path.join(process.env.TACHYON_MODEL_DIR, 'tokenizer.json'));
export async function countTokens(text) {
  const encoding = await tokenizer.encode(text, null, { addSpecialTokens: false });
  return encoding.getIds().length;
}

// The Qwen3 chat format of the demo model (its tokenizer_config.json chat_template), written
// out by hand for plain user/assistant turns, to check the server's prompt token counts.
export function qwen3Prompt(messages) {
  let out = '';
  for (const m of messages) out += `<|im_start|>${m.role}\n${m.content}<|im_end|>\n`;
  return out + '<|im_start|>assistant\n';
}

// The tool of the tool-call tests, in OpenAI's function shape.
export const weatherTool = {
  name: 'get_weather',
  description: 'Current weather of a city',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
};

// Python json.dumps (what the template's `tojson` writes): ", " and ": " separators.
export function pyJson(value) {
  if (Array.isArray(value)) return `[${value.map(pyJson).join(', ')}]`;
  if (value && typeof value === 'object')
    return `{${Object.entries(value).map(([k, v]) => `${JSON.stringify(k)}: ${pyJson(v)}`).join(', ')}}`;
  return JSON.stringify(value);
}

// The demo model's (Qwen3) template for: [system tools] user, assistant tool call, tool result.
export function toolPrompt({ user, call, result }) {
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

// Raw HTTP for what SDKs cannot send (malformed JSON, oversized bodies, wrong keys).
export async function post(route, body, { headers = {}, raw = false } = {}) {
  const response = await fetch(`${baseUrl}${route}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${apiKey}`, ...headers },
    body: raw ? body : JSON.stringify(body),
  });
  const text = await response.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* left null: the test says what it expected */ }
  return { status: response.status, json, text };
}

export async function collectChatStream(params, client = openai) {
  const stream = await client.chat.completions.create({ ...params, stream: true, stream_options: { include_usage: true } });
  let text = '', finish = null, usage = null, role = null, chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    if (chunk.usage) usage = chunk.usage;
    for (const choice of chunk.choices) {
      if (choice.delta.role) role = choice.delta.role;
      if (choice.delta.content) text += choice.delta.content;
      if (choice.finish_reason) finish = choice.finish_reason;
    }
  }
  return { text, finish, usage, role, chunks };
}

// logit_bias that bans the model's end-of-sequence tokens (generation_config.json), so a
// request runs to max_tokens: for tests that need a request to stay busy.
export function banEos() {
  const { eos_token_id: eos } = JSON.parse(readFileSync(path.join(process.env.TACHYON_MODEL_DIR, 'generation_config.json'), 'utf8'));
  return Object.fromEntries([eos].flat().map((id) => [String(id), -100]));
}

// A `tachyon serve` of the test's own (for flags or a model folder the shared server must not
// have), on a free port; killed when the test process exits, whatever ends it. Resolves to
// { server, port }.
export async function startOwnServer(flags, modelDir = process.env.TACHYON_MODEL_DIR) {
  const server = spawn(process.env.TACHYON_BIN, ['serve', modelDir, '--host', '127.0.0.1',
    '--port', '0', ...flags], { stdio: ['ignore', 'pipe', 'pipe'] });
  process.on('exit', () => server.kill('SIGKILL'));
  let log = '';
  server.stdout.on('data', (chunk) => { log += chunk; });  // the log a test reads is both streams
  const port = await new Promise((resolve, reject) => {
    server.stderr.on('data', (chunk) => {
      log += chunk;
      const m = log.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
      if (m) resolve(Number(m[1]));
    });
    server.on('exit', (code, signal) => reject(new Error(`tachyon serve exited (${code ?? signal}):\n${log}`)));
  });
  // A server that dies while its tests run shows up as "fetch failed" in the next test: print
  // its log, the only evidence of why (a clean exit after the tests' SIGTERM is code 0).
  server.on('exit', (code, signal) => {
    if (code !== 0 && signal !== 'SIGKILL' && signal !== 'SIGTERM')
      process.stderr.write(`tachyon serve ${flags.join(' ')} exited (${code ?? signal}); its log:\n${log.slice(-20000)}\n`);
  });
  return { server, port, log: () => log };
}
