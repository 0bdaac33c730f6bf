#!/usr/bin/env python3
"""Makes a random-weight checkpoint's greedy output plain text, for serving benchmarks against other engines:
`text_head.py CHECKPOINT_DIR TOKENIZER_DIR` copies TOKENIZER_DIR's tokenizer.json and tokenizer_config.json
into the checkpoint and zeroes the output head's rows (lm_head, or the tied embedding) of every token that is
not text on its own: byte-level pieces that are not complete UTF-8 (a byte of a multi-byte character),
control characters other than tab and newline, whole tags such as '</s>' (llama.cpp takes that one for a
control token and ends the request there), the tokenizer's added tokens (end of turn, thinking and tool
markers) and the ids past its vocabulary.

Why: greedy decoding of random weights picks any token. llama.cpp's server runs every output through a
parser that rejects malformed UTF-8 and fails the request mid-stream (seen on the GPU machine,
bench/results/serve-gpu-h100-d592c95.md: 70-90% of requests failed), and an end-of-turn token ends a request
before its fixed length. A zero row gives its token the logit 0 while the others' are N(0, 0.02^2 * hidden)
draws, whose largest over ~10^5 tokens is ~4 standard deviations above 0: such a token is never the argmax.
Both engines then produce max_tokens tokens of valid text each, and the matrix shapes, so the cost per
token, stay those of the model.
"""
import json
import os
import shutil
import struct
import sys


def byte_decoder():
    """GPT-2 byte-level BPE: the character that stands for each byte, inverted (character -> byte)."""
    printable = list(range(ord('!'), ord('~') + 1)) + list(range(ord('\u00a1'), ord('\u00ac') + 1)) \
        + list(range(ord('\u00ae'), ord('\u00ff') + 1))
    chars, extra = list(printable), 0
    codes = list(printable)
    for b in range(256):
        if b not in printable:
            codes.append(b)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(codes, chars)}


def is_text(piece, decoder):
    """A byte-level token piece that decodes alone to UTF-8 text without control characters (tab, newline
    allowed) and is not a tag on its own."""
    try:
        text = bytes(decoder[ch] for ch in piece).decode('utf-8')
    except (KeyError, UnicodeDecodeError):
        return False
    if len(text) > 2 and text.strip().startswith('<') and text.strip().endswith('>'):
        return False  # markup such as '</s>', which engines may take for a control token
    return all(ch in '\t\n' or not (ord(ch) < 0x20 or 0x7f <= ord(ch) < 0xa0) for ch in text)


def non_text_token_ids(tokenizer_json, vocab_size):
    """Sorted ids in [0, vocab_size) that are not text on their own (see the module's doc)."""
    with open(tokenizer_json, encoding='utf-8') as f:
        tok = json.load(f)
    model = tok.get('model', {})
    if model.get('type') != 'BPE' or not isinstance(model.get('vocab'), dict):
        raise SystemExit(f'{tokenizer_json}: a byte-level BPE tokenizer is needed (model.type {model.get("type")})')
    decoder = byte_decoder()
    text_ids = {i for piece, i in model['vocab'].items() if is_text(piece, decoder)}
    text_ids -= {t['id'] for t in tok.get('added_tokens', [])}
    return [i for i in range(vocab_size) if i not in text_ids]


def tensor_location(path, name):
    """(data offset in the file, shape, dtype) of one tensor of a safetensors file."""
    with open(path, 'rb') as f:
        n = struct.unpack('<Q', f.read(8))[0]
        header = json.loads(f.read(n))
    if name not in header:
        return None
    t = header[name]
    return 8 + n + t['data_offsets'][0], t['shape'], t['dtype']


def zero_rows(path, name, ids):
    """Overwrites rows `ids` of the 2-D tensor `name` (bf16, f16 or f32) of a safetensors file with zeros."""
    offset, shape, dtype = tensor_location(path, name)
    width = {'BF16': 2, 'F16': 2, 'F32': 4}[dtype]
    row_bytes = shape[1] * width
    zeros = bytes(row_bytes)
    with open(path, 'r+b') as f:
        for i in ids:
            if not 0 <= i < shape[0]:
                raise SystemExit(f'{name}: row {i} outside its {shape[0]} rows')
            f.seek(offset + i * row_bytes)
            f.write(zeros)


def head_tensor(checkpoint):
    """(file, tensor name) of the output head: lm_head.weight, else the tied embedding."""
    files = sorted(f for f in os.listdir(checkpoint) if f.endswith('.safetensors') and not f.startswith('golden'))
    for name in ('lm_head.weight', 'model.embed_tokens.weight'):
        for f in files:
            if tensor_location(os.path.join(checkpoint, f), name):
                return os.path.join(checkpoint, f), name
    raise SystemExit(f'{checkpoint}: no lm_head.weight or model.embed_tokens.weight')


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__.split('\n\n')[0])
    checkpoint, tokenizer_dir = sys.argv[1], sys.argv[2]
    for f in ('tokenizer.json', 'tokenizer_config.json'):
        shutil.copyfile(os.path.join(tokenizer_dir, f), os.path.join(checkpoint, f))
    with open(os.path.join(checkpoint, 'config.json')) as f:
        vocab_size = json.load(f)['vocab_size']
    ids = non_text_token_ids(os.path.join(checkpoint, 'tokenizer.json'), vocab_size)
    path, name = head_tensor(checkpoint)
    zero_rows(path, name, ids)
    print(f'{checkpoint}: zeroed {len(ids)} of {vocab_size} rows of {name} (tokens that are not text alone)')


if __name__ == '__main__':
    main()
