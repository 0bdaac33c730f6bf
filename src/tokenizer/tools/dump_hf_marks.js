// Prints the code points that Hugging Face's StripAccents normalizer removes (its Unicode
// 9.0 notion of a combining mark) as "first-last" hex ranges, one a line.
// Usage: node dump_hf_marks.js NODE_MODULES_DIR
'use strict';
const path = require('path');
const { stripAccentsNormalizer } = require(path.resolve(process.argv[2], 'tokenizers'));
const n = stripAccentsNormalizer();
const removed = [];
for (let start = 0; start < 0x110000; start += 0x1000) {
  const kept = new Set();
  let s = '';
  for (let cp = start; cp < start + 0x1000; ++cp) if (cp < 0xd800 || cp > 0xdfff) s += String.fromCodePoint(cp);
  for (const ch of n.normalizeString(s)) kept.add(ch.codePointAt(0));
  for (let cp = start; cp < start + 0x1000; ++cp) if ((cp < 0xd800 || cp > 0xdfff) && !kept.has(cp)) removed.push(cp);
}
const ranges = [];
for (const cp of removed) {
  if (ranges.length && ranges[ranges.length - 1][1] === cp - 1) ranges[ranges.length - 1][1] = cp;
  else ranges.push([cp, cp]);
}
for (const [a, b] of ranges) process.stdout.write(a.toString(16) + '-' + b.toString(16) + '\n');
