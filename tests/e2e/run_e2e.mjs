// Starts `tachyon serve` on a free loopback port with the demo model, runs the node:test
// files of this folder against it with the official SDKs (openai, @anthropic-ai/sdk, ollama),
// and always stops the server.
//
//   node tests/e2e/run_e2e.mjs --tachyon build/tachyon --node-modules .cache/npm-assets/node/node_modules
import { spawn } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const args = Object.fromEntries(process.argv.slice(2).reduce((pairs, a, i, all) =>
  (a.startsWith('--') ? [...pairs, [a.slice(2), all[i + 1]]] : pairs), []));
const tachyon = args.tachyon;
const nodeModules = path.resolve(args['node-modules']);
const modelDir = path.resolve(args.model ?? path.join(here, '../../models/tachyon-demo'));
const only = args.only;  // a single test file name, for debugging

for (const dep of ['openai', '@anthropic-ai/sdk', 'ollama', 'tokenizers', 'ajv', 'ajv-formats', 'zod'])
  if (!existsSync(path.join(nodeModules, dep))) {
    console.error(`e2e: ${dep} is missing from ${nodeModules}; run scripts/fetch_test_assets.sh`);
    process.exit(1);
  }

const config = { ctx: 1024, maxBody: 256 * 1024, maxQueue: 24, apiKey: 'e2e-test-key' };
const server = spawn(tachyon, ['serve', modelDir, '--host', '127.0.0.1', '--port', '0', '--api-key', config.apiKey,
  '--ctx-size', String(config.ctx), '--max-concurrent', '16', '--max-queue', String(config.maxQueue),
  '--max-body-bytes', String(config.maxBody), '--kv-blocks', '1024'], { stdio: ['ignore', 'pipe', 'pipe'] });

let serverLog = '';
let stopping = false;
const stopServer = () => {
  stopping = true;
  if (server.exitCode === null && server.signalCode === null) server.kill('SIGTERM');
};
process.on('exit', () => { if (server.exitCode === null) server.kill('SIGKILL'); });
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => { stopServer(); process.exit(1); });
// A hard ceiling below ctest's timeout so the server never outlives the test.
const deadline = setTimeout(() => { console.error('e2e: overall timeout'); stopServer(); process.exit(1); }, 280_000);

const port = await new Promise((resolve, reject) => {
  const onData = (chunk) => {
    serverLog += chunk;
    const m = serverLog.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
    if (m) resolve(Number(m[1]));
  };
  server.stderr.on('data', onData);
  server.stdout.on('data', (chunk) => { serverLog += chunk; });
  server.on('exit', (code, signal) => {
    if (!stopping) reject(new Error(`tachyon serve exited early (${code ?? signal}):\n${serverLog}`));
  });
  setTimeout(() => reject(new Error(`tachyon serve did not start in 120 s:\n${serverLog}`)), 120_000);
}).catch((e) => { console.error(e.message); stopServer(); process.exit(1); });

const files = readdirSync(here).filter((f) => f.endsWith('.test.mjs') && (!only || f === only)).sort()
  .map((f) => path.join(here, f));
const env = {
  ...process.env, TACHYON_URL: `http://127.0.0.1:${port}`, TACHYON_API_KEY: config.apiKey, TACHYON_MODEL: path.basename(modelDir),
  TACHYON_MODEL_DIR: modelDir, TACHYON_NODE_MODULES: nodeModules, TACHYON_CTX: String(config.ctx),
  TACHYON_MAX_BODY: String(config.maxBody), TACHYON_MAX_QUEUE: String(config.maxQueue),
  TACHYON_BIN: path.resolve(tachyon),  // for tests that need a server of their own
};
const runner = spawn(process.execPath, ['--test', '--test-concurrency=1', ...files], { env, stdio: 'inherit' });
const code = await new Promise((resolve) => runner.on('exit', (c, s) => resolve(c ?? (s ? 1 : 0))));
clearTimeout(deadline);
stopServer();
const serverCode = await new Promise((resolve) => {
  if (server.exitCode !== null || server.signalCode !== null) resolve(server.exitCode ?? 0);
  else server.on('exit', (c) => resolve(c ?? 0));
  setTimeout(() => { server.kill('SIGKILL'); resolve(-1); }, 10_000);
});
if (serverCode !== 0) console.error(`e2e: tachyon serve did not shut down cleanly (${serverCode}):\n${serverLog.slice(-4000)}`);
process.exit(code !== 0 ? code : serverCode === 0 ? 0 : 1);
