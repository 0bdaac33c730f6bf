// The web chat page in a real browser: starts `tachyon serve` on the demo model (with an API
// key) and Debian's headless chromium, and drives the page over the Chrome DevTools Protocol on
// chromium's --remote-debugging-pipe (fds 3 and 4; no WebSocket client or npm package needed).
// The page must ask for the key, list the model, stream an answer with its stats line, stop a
// second answer on the Stop button (and the server must cancel that request), render code blocks
// and fold reasoning, and load nothing from another origin. Screenshots go to --out.
//
//   node tests/e2e/web_chat_page.mjs --tachyon build/tachyon --chromium /usr/bin/chromium \
//        --out build/test-output/web_chat_page
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const args = Object.fromEntries(process.argv.slice(2).reduce((pairs, a, i, all) =>
  (a.startsWith('--') ? [...pairs, [a.slice(2), all[i + 1]]] : pairs), []));
const modelDir = path.resolve(args.model ?? path.join(here, '../../models/tachyon-demo'));
const outDir = path.resolve(args.out ?? 'build/test-output/web_chat_page');
const apiKey = 'web-page-test-key';
mkdirSync(outDir, { recursive: true });

const children = [];
const profile = mkdtempSync(path.join(tmpdir(), 'tachyon-chromium-'));
process.on('exit', () => {
  for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
  try { rmSync(profile, { recursive: true, force: true, maxRetries: 3 }); } catch { /* chromium may still be writing */ }
});
setTimeout(() => { console.error('web page test: overall timeout'); process.exit(1); }, 240_000).unref();

function fail(message) {
  console.error(`FAIL: ${message}`);
  process.exit(1);
}

// --- the server ---
const server = spawn(args.tachyon, ['serve', modelDir, '--host', '127.0.0.1', '--port', '0', '--api-key', apiKey,
  '--ctx-size', '4096'], { stdio: ['ignore', 'ignore', 'pipe'] });
children.push(server);
let serverLog = '';
const port = await new Promise((resolve, reject) => {
  server.stderr.on('data', (chunk) => {
    serverLog += chunk;
    const m = serverLog.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
    if (m) resolve(Number(m[1]));
  });
  server.on('exit', (code) => reject(new Error(`tachyon serve exited (${code}):\n${serverLog}`)));
}).catch((e) => fail(e.message));
const base = `http://127.0.0.1:${port}`;

// The page is open, typed right and revalidated by ETag; the APIs next to it are unchanged.
const page = await fetch(`${base}/`);
if (page.status !== 200 || page.headers.get('content-type') !== 'text/html; charset=utf-8')
  fail(`GET / answered ${page.status} ${page.headers.get('content-type')}`);
const revalidated = await fetch(`${base}/`, { headers: { 'if-none-match': page.headers.get('etag') } });
if (revalidated.status !== 304) fail(`GET / with its ETag answered ${revalidated.status}`);
if ((await fetch(`${base}/health`)).status !== 200) fail('/health is not 200');
if ((await fetch(`${base}/v1/models`)).status !== 401) fail('/v1/models answered without the key');
if ((await fetch(`${base}/nothing-here`)).status !== 404) fail('an unknown route is not 404');

// --- the browser, and a minimal CDP client over its pipe ---
const chromium = spawn(args.chromium ?? 'chromium', ['--headless=new', '--remote-debugging-pipe', '--no-sandbox',
  '--disable-gpu', '--no-first-run', '--no-default-browser-check', '--disable-extensions', `--user-data-dir=${profile}`,
  '--window-size=1100,900', 'about:blank'], { stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe'] });
children.push(chromium);
let chromiumLog = '';
chromium.stderr.on('data', (chunk) => { chromiumLog = (chromiumLog + chunk).slice(-4000); });
chromium.on('exit', (code) => fail(`chromium exited (${code}):\n${chromiumLog}`));

let nextId = 1;
const waiting = new Map();
const listeners = [];
let incoming = Buffer.alloc(0);
chromium.stdio[4].on('data', (chunk) => {
  incoming = Buffer.concat([incoming, chunk]);
  for (let end; (end = incoming.indexOf(0)) >= 0;) {
    const message = JSON.parse(incoming.subarray(0, end).toString('utf8'));
    incoming = incoming.subarray(end + 1);
    if (message.id && waiting.has(message.id)) {
      const { resolve, reject, method } = waiting.get(message.id);
      waiting.delete(message.id);
      if (message.error) reject(new Error(`${method}: ${message.error.message}`));
      else resolve(message.result);
    } else if (message.method) {
      for (const listener of listeners) listener(message);
    }
  }
});
function cdp(method, params = {}, sessionId = undefined) {
  const id = nextId++;
  chromium.stdio[3].write(JSON.stringify({ id, method, params, sessionId }) + '\0');
  return new Promise((resolve, reject) => waiting.set(id, { resolve, reject, method }));
}

const { targetId } = await cdp('Target.createTarget', { url: 'about:blank' });
const { sessionId } = await cdp('Target.attachToTarget', { targetId, flatten: true });
const send = (method, params) => cdp(method, params, sessionId);
const problems = [];
const requested = [];
listeners.push((m) => {
  if (m.sessionId !== sessionId) return;
  if (m.method === 'Runtime.exceptionThrown') problems.push(m.params.exceptionDetails.exception?.description ?? 'exception');
  if (m.method === 'Runtime.consoleAPICalled' && m.params.type === 'error') problems.push(JSON.stringify(m.params.args));
  if (m.method === 'Network.requestWillBeSent') requested.push(m.params.request.url);
});
await send('Runtime.enable');
await send('Network.enable');
await send('Page.enable');
// A headless page never has the focus the clipboard API wants; emulate it and allow the clipboard.
await send('Emulation.setFocusEmulationEnabled', { enabled: true });
await cdp('Browser.grantPermissions', { origin: base, permissions: ['clipboardReadWrite', 'clipboardSanitizedWrite'] });
await send('Page.navigate', { url: `${base}/` });

// Evaluates an expression in the page (awaiting promises) and returns its value.
async function js(expression) {
  const { result, exceptionDetails } = await send('Runtime.evaluate', { expression, awaitPromise: true, returnByValue: true });
  if (exceptionDetails) throw new Error(`${expression}: ${exceptionDetails.exception?.description ?? exceptionDetails.text}`);
  return result.value;
}
async function until(expression, what, timeout = 60_000) {
  const deadline = Date.now() + timeout;
  for (;;) {
    try {
      const value = await js(expression);
      if (value) return value;
    } catch { /* the page may be navigating */ }
    if (Date.now() > deadline) {
      const shown = await js(`document.body.innerText.slice(-600)`).catch((e) => e.message);
      fail(`${what}: not within ${timeout / 1000} s; the page ends with:\n${shown}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}
async function click(selector) {
  const box = await js(`(() => { const e = document.querySelector(${JSON.stringify(selector)});
                                  e.scrollIntoView({ block: 'center' }); const r = e.getBoundingClientRect();
                                  return { x: r.x + r.width / 2, y: r.y + r.height / 2 }; })()`);
  for (const type of ['mousePressed', 'mouseReleased'])
    await send('Input.dispatchMouseEvent', { type, x: box.x, y: box.y, button: 'left', clickCount: 1 });
}
async function type(selector, text) {
  await js(`document.querySelector(${JSON.stringify(selector)}).focus()`);
  await send('Input.insertText', { text });
}
async function screenshot(name) {
  const { data } = await send('Page.captureScreenshot', { format: 'png' });
  const file = path.join(outDir, name);
  writeFileSync(file, Buffer.from(data, 'base64'));
  console.log(`screenshot: ${file}`);
}
const answers = 'document.querySelectorAll("article.assistant")';

// 1. Without a key the page asks for one; with it, the model list loads.
await until(`document.getElementById('settings').open && /API key/.test(document.getElementById('status').textContent)`,
  'the page asking for the API key');
await type('#api-key', apiKey);
await js(`document.getElementById('api-key').dispatchEvent(new Event('change'))`);
for (const [field, value] of [['#max-tokens', '200'], ['#temperature', '0']]) {  // short, reproducible answers
  await type(field, value);
  await js(`document.querySelector('${field}').dispatchEvent(new Event('change'))`);
}
const model = path.basename(modelDir);
await until(`[...document.getElementById('model').options].some((o) => o.value === ${JSON.stringify(model)})`,
  'the model picker listing the model');
await js(`document.getElementById('settings').open = false`);

// 2. An answer streams in (several renders before it is done) and ends with its stats line.
await js(`window.renders = new Set();
  new MutationObserver(() => { const a = ${answers}; const last = a[a.length - 1];
    if (last && last.dataset.state === 'streaming') renders.add(last.querySelector('.content').textContent.length); })
  .observe(document.getElementById('messages'), { childList: true, subtree: true, characterData: true });`);
await type('#prompt', 'Hello! Write a short Python function that adds two numbers.');
await click('#send');
await until(`${answers}.length === 1 && ${answers}[0].dataset.state === 'done'`, 'the first answer finishing');
const first = await js(`({ text: ${answers}[0].querySelector('.content').textContent,
  stats: ${answers}[0].querySelector('.stats').textContent, renders: renders.size,
  user: document.querySelector('article.user').textContent })`);
console.log(`answer: ${JSON.stringify(first.text.slice(0, 200))}\nstats: ${first.stats}`);
if (!first.text.trim()) fail('the answer is empty');
if (first.renders < 2) fail(`the answer appeared in ${first.renders} render(s), not streamed`);
if (!/^\d+ tokens · first token [0-9.]+ s · [0-9.]+ tok\/s · prompt \d+ tokens/.test(first.stats))
  fail(`stats line: ${first.stats}`);
if (!/drafts accepted|no speculation/.test(first.stats)) fail(`no speculation stats: ${first.stats}`);
await screenshot('answer.png');

// 3. A long answer (end-of-sequence banned, as a client may) is stopped by the Stop button.
const { eos_token_id: eos } = JSON.parse(readFileSync(path.join(modelDir, 'generation_config.json'), 'utf8'));
const ban = Object.fromEntries([eos].flat().map((id) => [String(id), -100]));
await js(`(() => { const original = window.fetch;
  window.fetch = (url, init) => {
    if (url === '/v1/chat/completions') init = { ...init,
      body: JSON.stringify({ ...JSON.parse(init.body), max_tokens: 2000, logit_bias: ${JSON.stringify(ban)} }) };
    return original(url, init);
  }; })()`);
const cancelledBefore = await cancelledRequests();
await type('#prompt', 'Write a long story about a robot.');
await click('#send');
await until(`${answers}.length === 2 && ${answers}[1].querySelector('.content').textContent.length > 20`,
  'the second answer streaming');
if (!(await js(`!document.getElementById('stop').hidden && document.getElementById('send').hidden`)))
  fail('Stop is not offered while an answer streams');
await click('#stop');
await until(`${answers}[1].dataset.state === 'stopped'`, 'the answer stopping', 10_000);
const stoppedAt = await js(`${answers}[1].querySelector('.content').textContent.length`);
await new Promise((r) => setTimeout(r, 1000));
const later = await js(`${answers}[1].querySelector('.content').textContent.length`);
if (later !== stoppedAt) fail(`the stopped answer kept growing (${stoppedAt} -> ${later} characters)`);
if (!(await js(`document.getElementById('stop').hidden && !document.getElementById('send').hidden`)))
  fail('Send is not back after Stop');
const deadline = Date.now() + 10_000;
while ((await cancelledRequests()) <= cancelledBefore) {
  if (Date.now() > deadline) fail('the server did not cancel the stopped request');
  await new Promise((r) => setTimeout(r, 100));
}
await screenshot('stopped.png');

// 4. Code blocks and folded reasoning, from the page's own renderer.
const rendered = await js(`(() => {
  const view = new AnswerView();
  view.update('first, a plan', 'Here:\\n\`\`\`python\\nprint("hi")\\n\`\`\`\\nand \`x\` inline.');
  view.end('done', 'test');
  const a = view.article;
  return { code: a.querySelector('pre > code')?.textContent, lang: a.querySelector('.code .bar span')?.textContent,
           copy: !!a.querySelector('.code button.copy'), inline: a.querySelector('.content > code')?.textContent,
           folded: !a.querySelector('details.reasoning').hidden && !a.querySelector('details.reasoning').open,
           reasoning: a.querySelector('details.reasoning .text').textContent };
})()`);
if (rendered.code !== 'print("hi")' || rendered.lang !== 'python' || !rendered.copy || rendered.inline !== 'x')
  fail(`code rendering: ${JSON.stringify(rendered)}`);
if (!rendered.folded || rendered.reasoning !== 'first, a plan') fail(`reasoning: ${JSON.stringify(rendered)}`);
await click('article.assistant:last-of-type button.copy');
await until(`document.querySelector('article.assistant:last-of-type button.copy').textContent === 'Copied'`, 'Copy');
const copied = await js('navigator.clipboard.readText()');
if (copied !== 'print("hi")') fail(`Copy put ${JSON.stringify(copied)} on the clipboard`);
await screenshot('rendering.png');

// 5. Nothing came from elsewhere, and the page threw nothing.
const foreign = requested.filter((url) => !url.startsWith(base));
if (foreign.length) fail(`requests to other origins: ${foreign.join(', ')}`);
if (problems.length) fail(`page errors: ${problems.join('; ')}`);
console.log('web chat page test: ok');
process.exit(0);

async function cancelledRequests() {
  const text = await (await fetch(`${base}/metrics`)).text();
  const m = text.match(/^tachyon_requests_cancelled_total(?:\{[^}]*\})? (\d+)/m);
  if (!m) fail('no tachyon_requests_cancelled_total in /metrics');
  return Number(m[1]);
}
