// Shared set-up for the end-to-end tests: the official SDK clients pointed at the server
// that run_e2e.mjs started (TACHYON_URL, TACHYON_API_KEY, TACHYON_MODEL), and the official
// Hugging Face `tokenizers` library for counting tokens independently of the server.
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

export const baseUrl = process.env.TACHYON_URL;
export const apiKey = process.env.TACHYON_API_KEY;
export const model = process.env.TACHYON_MODEL;
export const maxContext = Number(process.env.TACHYON_CTX);
export const maxBody = Number(process.env.TACHYON_MAX_BODY);
export const maxQueue = Number(process.env.TACHYON_MAX_QUEUE);

export { OpenAI, Anthropic };
export const openai = new OpenAI({ baseURL: `${baseUrl}/v1`, apiKey, maxRetries: 0, timeout: 60000 });
export const anthropic = new Anthropic({ baseURL: baseUrl, apiKey, maxRetries: 0, timeout: 60000 });

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

// A `tachyon serve` of the test's own (for flags the shared server must not have), on a free
// port; killed when the test process exits, whatever ends it. Resolves to { server, port }.
export async function startOwnServer(flags) {
  const server = spawn(process.env.TACHYON_BIN, ['serve', process.env.TACHYON_MODEL_DIR, '--host', '127.0.0.1',
    '--port', '0', ...flags], { stdio: ['ignore', 'ignore', 'pipe'] });
  process.on('exit', () => server.kill('SIGKILL'));
  let log = '';
  const port = await new Promise((resolve, reject) => {
    server.stderr.on('data', (chunk) => {
      log += chunk;
      const m = log.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
      if (m) resolve(Number(m[1]));
    });
    server.on('exit', (code, signal) => reject(new Error(`tachyon serve exited (${code ?? signal}):\n${log}`)));
  });
  return { server, port };
}
