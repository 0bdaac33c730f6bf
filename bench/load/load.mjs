// Load benchmark for `tachyon serve` (loopback only, bounded): for each concurrency level N
// (default 1, 8, 32, 64), N clients stream chat completions until a fixed number of
// requests is done. Reports output throughput (tokens/s), TTFT and inter-token latency
// percentiles (p50/p99), errors, and the server's peak RSS (VmHWM). Results go to
// bench/results/load-<date>.json and .md.
//
//   node bench/load/load.mjs --tachyon build/tachyon [--levels 1,8,32,64] [--requests 64]
//        [--max-tokens 64] [--model models/tachyon-demo] [--serve-args "--max-concurrent 64"]
//
// A warm-up round (not recorded) runs first. Each request asks for max_tokens at
// temperature 0.8 with a fixed seed, so lengths do not depend on where the model stops.
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const args = Object.fromEntries(process.argv.slice(2).reduce((pairs, a, i, all) =>
  (a.startsWith('--') ? [...pairs, [a.slice(2), all[i + 1]]] : pairs), []));
const tachyon = args.tachyon ?? path.join(here, '../../build/tachyon');
const modelDir = path.resolve(args.model ?? path.join(here, '../../models/tachyon-demo'));
const levels = (args.levels ?? '1,8,32,64').split(',').map(Number);
const numRequests = Number(args.requests ?? 64);
const maxTokens = Number(args['max-tokens'] ?? 64);
const serveArgs = (args['serve-args'] ?? '--max-concurrent 64').split(' ').filter(Boolean);
const modelName = path.basename(modelDir);

const server = spawn(tachyon, ['serve', modelDir, '--host', '127.0.0.1', '--port', '0', '--max-queue', '1024',
  '--http-threads', '160', ...serveArgs], { stdio: ['ignore', 'ignore', 'pipe'] });
process.on('exit', () => { if (server.exitCode === null) server.kill('SIGKILL'); });
let log = '';
const port = await new Promise((resolve, reject) => {
  server.stderr.on('data', (c) => {
    log += c;
    const m = log.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
    if (m) resolve(Number(m[1]));
  });
  server.on('exit', (code) => reject(new Error(`server exited (${code}):\n${log}`)));
});
const base = `http://127.0.0.1:${port}`;

const prompts = [
  'Write a Python function that returns the n-th Fibonacci number.',
  'Write a Python class for a stack with push and pop.',
  'Write a Python function that checks whether a string is a palindrome.',
  'Write a Python function that merges two sorted lists.',
  'Write a Python function that counts the words in a text.',
  'Write a Python function that flattens a nested list.',
  'Write a Python function that computes the mean of a list of numbers.',
  'Write a Python function that reverses a linked list.',
];

// One streamed request; returns {ttft, gaps[], tokens} or throws.
async function one(i) {
  const start = performance.now();
  const res = await fetch(`${base}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: modelName, stream: true, stream_options: { include_usage: true },
      max_tokens: maxTokens, temperature: 0.8, seed: i, messages: [{ role: 'user', content: prompts[i % prompts.length] }] }),
  });
  if (res.status !== 200) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
  const decoder = new TextDecoder();
  let buffer = '', ttft = null, last = null, tokens = 0;
  const gaps = [];
  for await (const bytes of res.body) {
    buffer += decoder.decode(bytes, { stream: true });
    let cut;
    while ((cut = buffer.indexOf('\n\n')) >= 0) {
      const event = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      if (!event.startsWith('data: ') || event === 'data: [DONE]') continue;
      const chunk = JSON.parse(event.slice(6));
      if (chunk.error) throw new Error(chunk.error.message);
      if (chunk.usage) tokens = chunk.usage.completion_tokens;
      if (chunk.choices?.[0]?.delta?.content) {
        const now = performance.now();
        if (ttft === null) ttft = now - start;
        else gaps.push(now - last);
        last = now;
      }
    }
  }
  if (ttft === null) throw new Error('no content');
  return { ttft, gaps, tokens };
}

async function level(concurrency, requests) {
  let next = 0, errors = 0;
  const ttfts = [], gaps = [];
  let tokens = 0;
  const errorMessages = new Set();
  const start = performance.now();
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (next < requests) {
      const i = next++;
      try {
        const r = await one(i);
        ttfts.push(r.ttft);
        gaps.push(...r.gaps);
        tokens += r.tokens;
      } catch (e) {
        errors++;
        errorMessages.add(String(e.message).slice(0, 200));
      }
    }
  }));
  const seconds = (performance.now() - start) / 1000;
  const pct = (xs, p) => {
    if (!xs.length) return null;
    const s = [...xs].sort((a, b) => a - b);
    return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
  };
  return { concurrency, requests, errors, error_messages: [...errorMessages], seconds, completion_tokens: tokens,
    throughput_tok_s: tokens / seconds, requests_per_s: requests / seconds,
    ttft_ms: { p50: pct(ttfts, 50), p99: pct(ttfts, 99) }, itl_ms: { p50: pct(gaps, 50), p99: pct(gaps, 99) } };
}

function peakRssMiB() {
  const status = readFileSync(`/proc/${server.pid}/status`, 'utf8');
  return Number(status.match(/VmHWM:\s+(\d+) kB/)[1]) / 1024;
}

await level(Math.min(4, Math.max(...levels)), 8);  // warm-up, not recorded
const results = [];
for (const n of levels) {
  const r = await level(n, Math.max(numRequests, n));
  r.peak_rss_mib = peakRssMiB();
  results.push(r);
  console.log(`N=${String(n).padStart(2)}  ${r.throughput_tok_s.toFixed(1).padStart(8)} tok/s  ` +
    `TTFT p50 ${r.ttft_ms.p50?.toFixed(1)} p99 ${r.ttft_ms.p99?.toFixed(1)} ms  ` +
    `ITL p50 ${r.itl_ms.p50?.toFixed(2)} p99 ${r.itl_ms.p99?.toFixed(2)} ms  errors ${r.errors}  RSS ${r.peak_rss_mib.toFixed(0)} MiB`);
  for (const m of r.error_messages) console.log(`  error: ${m}`);
}
server.kill('SIGTERM');

const stamp = new Date().toISOString().replace(/[:]/g, '-').slice(0, 16);
const machine = { cpus: os.cpus().length, cpu_model: os.cpus()[0]?.model, load_avg_at_start: os.loadavg(),
  memory_gib: os.totalmem() / 2 ** 30 };
const record = { date: new Date().toISOString(), model: modelName, max_tokens: maxTokens, serve_args: serveArgs,
  machine, results };
const outDir = path.join(here, '../results');
mkdirSync(outDir, { recursive: true });
writeFileSync(path.join(outDir, `load-${stamp}.json`), JSON.stringify(record, null, 2) + '\n');
const note = 'tok/s counts generated tokens (usage) over the wall time of a level; TTFT is request start to the ' +
  'first content chunk; ITL is the gap between content chunks (a chunk carries every token the engine delivered in ' +
  'one step, several with speculative decoding); peak RSS is the server\'s high-water mark so far (VmHWM).';
let md = `# Load: tachyon serve, ${modelName}, ${record.date}\n\n` +
  `Machine: ${machine.cpus} CPUs (${machine.cpu_model}), load average at start ${machine.load_avg_at_start.map((x) => x.toFixed(1)).join(' ')}.\n` +
  `Streaming chat completions, max_tokens ${maxTokens}, temperature 0.8 (seeded), serve args: ${serveArgs.join(' ')}.\n` +
  `${note}\n\n` +
  '| clients | requests | tok/s | req/s | TTFT p50 ms | TTFT p99 ms | ITL p50 ms | ITL p99 ms | errors | peak RSS MiB |\n' +
  '|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n';
for (const r of results)
  md += `| ${r.concurrency} | ${r.requests} | ${r.throughput_tok_s.toFixed(1)} | ${r.requests_per_s.toFixed(2)} | ` +
    `${r.ttft_ms.p50?.toFixed(1)} | ${r.ttft_ms.p99?.toFixed(1)} | ${r.itl_ms.p50?.toFixed(2)} | ${r.itl_ms.p99?.toFixed(2)} | ` +
    `${r.errors} | ${r.peak_rss_mib.toFixed(0)} |\n`;
writeFileSync(path.join(outDir, `load-${stamp}.md`), md);
console.log(`wrote bench/results/load-${stamp}.{json,md}`);
process.exit(results.some((r) => r.errors > 0) ? 1 : 0);
