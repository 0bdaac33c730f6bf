// HF side of the tokenizer benchmark: single-thread encode throughput of the official
// `tokenizers` npm package on the corpus (one JSON string per line), and load time.
// Run with TOKENIZERS_PARALLELISM=false and RAYON_NUM_THREADS=1 so encodeBatch stays on
// one thread; one batch call per run keeps JS<->Rust call overhead out of the figure.
// Protocol: one warm-up run discarded, then the median of three. Prints one JSON line.
// Usage: node hf_bench.js NODE_MODULES_DIR TOKENIZER_JSON CORPUS
'use strict';
const fs = require('fs');
const path = require('path');
const [nodeModules, tokenizerPath, corpusPath] = process.argv.slice(2);
const { Tokenizer } = require(path.resolve(nodeModules, 'tokenizers'));

const docs = fs.readFileSync(corpusPath, 'utf8').split('\n').filter((l) => l).map((l) => JSON.parse(l));
const bytes = docs.reduce((n, d) => n + Buffer.byteLength(d, 'utf8'), 0);

async function main() {
  // Wall time, and process CPU time (the figures to trust on a shared, loaded machine).
  const cpuSeconds = (u) => (u.user + u.system) / 1e6;
  const loads = [], loadCpu = [];
  let tokenizer;
  for (let i = 0; i < 3; ++i) {
    const t0 = process.hrtime.bigint();
    const c0 = process.cpuUsage();
    tokenizer = Tokenizer.fromFile(tokenizerPath);
    loadCpu.push(cpuSeconds(process.cpuUsage(c0)));
    loads.push(Number(process.hrtime.bigint() - t0) / 1e9);
  }
  const times = [], cpuTimes = [];
  let tokens = 0;
  for (let run = 0; run < 4; ++run) {
    const t0 = process.hrtime.bigint();
    const c0 = process.cpuUsage();
    const encodings = await tokenizer.encodeBatch(docs, { addSpecialTokens: false });
    const cpu = cpuSeconds(process.cpuUsage(c0));
    const dt = Number(process.hrtime.bigint() - t0) / 1e9;
    if (run > 0) {
      times.push(dt);
      cpuTimes.push(cpu);
    }
    tokens = encodings.reduce((n, e) => n + e.getIds().length, 0);
  }
  const median = (a) => a.sort((x, y) => x - y)[1];
  const seconds = median(times), cpu = median(cpuTimes);
  process.stdout.write(JSON.stringify({ bytes, tokens, seconds, mb_per_s: bytes / 1e6 / seconds, cpu_seconds: cpu,
                                        cpu_mb_per_s: bytes / 1e6 / cpu, load_seconds: median(loads),
                                        load_cpu_seconds: median(loadCpu) }) + '\n');
}
main().catch((e) => { console.error(e); process.exit(1); });
