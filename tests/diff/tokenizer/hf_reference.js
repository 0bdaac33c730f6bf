// Reference side of the tokenizer differential test: the official Hugging Face
// `tokenizers` library (npm package, Rust core). Reads JSON requests, one a line, from
// stdin and writes one JSON answer a line to stdout, in order:
//   {"encode": "<text>"}                -> {"no_special": [ids], "with_special": [ids],
//                                           "skip": decode(with_special, skip=true),
//                                           "keep": decode(with_special, skip=false)}
//   {"encode_b64": "<base64 bytes>"}     -> same; bytes become a JS string the WHATWG way
//                                           (each maximal invalid UTF-8 subsequence -> U+FFFD)
//   {"decode": [ids]}                    -> {"skip": "<text>", "keep": "<text>"}
//   {"vocab_size": true}                 -> {"with_added": n, "without_added": m}
// Usage: node hf_reference.js NODE_MODULES_DIR TOKENIZER_JSON < requests > answers
'use strict';
const path = require('path');
const readline = require('readline');

const [nodeModules, tokenizerPath] = process.argv.slice(2);
if (!nodeModules || !tokenizerPath) {
  process.stderr.write('usage: node hf_reference.js NODE_MODULES_DIR TOKENIZER_JSON\n');
  process.exit(2);
}
const { Tokenizer } = require(path.resolve(nodeModules, 'tokenizers'));
const tokenizer = Tokenizer.fromFile(tokenizerPath);

// All requests are answered in four batch calls (encodeBatch / decodeBatch), which keeps
// a 10,000-string run to a few seconds.
async function main() {
  const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  const requests = [];
  for await (const line of lines) if (line) requests.push(JSON.parse(line));
  const texts = [], decodes = [];
  for (const r of requests) {
    if ('encode' in r) texts.push(r.encode);
    else if ('encode_b64' in r) texts.push(Buffer.from(r.encode_b64, 'base64').toString('utf8'));
    else if ('decode' in r) decodes.push(r.decode);
    else if (!('vocab_size' in r)) throw new Error('unknown request: ' + JSON.stringify(r));
  }
  const plain = await tokenizer.encodeBatch(texts, { addSpecialTokens: false });
  const special = await tokenizer.encodeBatch(texts, { addSpecialTokens: true });
  const specialIds = special.map((e) => e.getIds());
  const roundTripSkip = await tokenizer.decodeBatch(specialIds, true);
  const roundTripKeep = await tokenizer.decodeBatch(specialIds, false);
  const decodeSkip = await tokenizer.decodeBatch(decodes, true);
  const decodeKeep = await tokenizer.decodeBatch(decodes, false);
  const out = [];
  let t = 0, d = 0;
  for (const r of requests) {
    if ('decode' in r) {
      out.push({ skip: decodeSkip[d], keep: decodeKeep[d] });
      ++d;
    } else if ('vocab_size' in r) {
      out.push({ with_added: tokenizer.getVocabSize(true), without_added: tokenizer.getVocabSize(false) });
    } else {
      out.push({ no_special: plain[t].getIds(), with_special: specialIds[t], skip: roundTripSkip[t],
                 keep: roundTripKeep[t] });
      ++t;
    }
  }
  process.stdout.write(out.map((o) => JSON.stringify(o)).join('\n') + (out.length ? '\n' : ''));
}
main().catch((e) => { process.stderr.write(String(e.stack || e) + '\n'); process.exit(1); });
