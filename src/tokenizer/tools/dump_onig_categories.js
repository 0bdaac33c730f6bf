// Dumps the Unicode general category of every code point as the Hugging Face
// `tokenizers` library's regex engine (Oniguruma) sees it, by running Split pre-tokenizers
// with \p{XX} patterns through the official npm package. Output: one line per category,
// "XX first-last first-last ..." (hex ranges). Used by gen_unicode_compat.sh.
// Usage: node dump_onig_categories.js NODE_MODULES_DIR > onig_categories.txt
'use strict';
const path = require('path');
const { Tokenizer } = require(path.resolve(process.argv[2], 'tokenizers'));

const categories = ['Lu', 'Ll', 'Lt', 'Lm', 'Lo', 'Mn', 'Mc', 'Me', 'Nd', 'Nl', 'No', 'Pc', 'Pd', 'Ps', 'Pe', 'Pi',
                    'Pf', 'Po', 'Sm', 'Sc', 'Sk', 'So', 'Zs', 'Zl', 'Zp', 'Cc', 'Cf', 'Co', 'Cn'];
// All scalar values, in chunks (one pre-tokenizer call per chunk and category).
const chunks = [];
for (let start = 0; start < 0x110000; start += 0x10000) {
  let s = '';
  for (let cp = start; cp < start + 0x10000; ++cp) {
    if (cp >= 0xd800 && cp <= 0xdfff) continue;
    s += String.fromCodePoint(cp);
  }
  chunks.push(s);
}
for (const cat of categories) {
  const json = {
    version: '1.0', added_tokens: [], normalizer: null, post_processor: null, decoder: null,
    pre_tokenizer: { type: 'Split', pattern: { Regex: '\\p{' + cat + '}' }, behavior: 'Removed', invert: true },
    model: { type: 'WordLevel', vocab: { a: 0 }, unk_token: 'a' },
  };
  const pre = Tokenizer.fromString(JSON.stringify(json)).getPreTokenizer();
  const members = [];
  for (const chunk of chunks)
    for (const [piece] of pre.preTokenizeString(chunk))
      for (const ch of piece) members.push(ch.codePointAt(0));
  members.sort((a, b) => a - b);
  const ranges = [];
  for (const cp of members) {
    if (ranges.length && ranges[ranges.length - 1][1] === cp - 1) ranges[ranges.length - 1][1] = cp;
    else ranges.push([cp, cp]);
  }
  process.stdout.write(cat + ' ' + ranges.map(([a, b]) => a.toString(16) + '-' + b.toString(16)).join(' ') + '\n');
}
