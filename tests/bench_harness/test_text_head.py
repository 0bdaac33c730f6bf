"""bench/text_head.py: which tokens of a byte-level BPE vocabulary are text on their own, and the zeroing of
their complement's rows in a safetensors checkpoint (the others untouched)."""
import json
import os
import shutil
import struct
import sys
import tempfile
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
sys.path.insert(0, os.path.join(ROOT, 'bench'))
import text_head  # noqa: E402

TOKENIZER = os.path.join(ROOT, 'tests', 'fixtures', 'tokenizers', 'mini_bytelevel.json')


def write_safetensors(path, tensors):
    """tensors: name -> (rows, cols, fill byte pattern per row); bf16, rows filled with row-specific bytes."""
    header, blobs, offset = {}, [], 0
    for name, (rows, cols) in tensors.items():
        data = b''.join(bytes([(r % 250) + 1]) * (2 * cols) for r in range(rows))
        header[name] = {'dtype': 'BF16', 'shape': [rows, cols], 'data_offsets': [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(text)) + text + b''.join(blobs))


def read_rows(path, name):
    offset, shape, _ = text_head.tensor_location(path, name)
    with open(path, 'rb') as f:
        f.seek(offset)
        data = f.read(shape[0] * shape[1] * 2)
    return [data[r * shape[1] * 2:(r + 1) * shape[1] * 2] for r in range(shape[0])]


class TextTokens(unittest.TestCase):
    def setUp(self):
        with open(TOKENIZER, encoding='utf-8') as f:
            self.tok = json.load(f)
        self.vocab = self.tok['model']['vocab']

    def test_pieces(self):
        d = text_head.byte_decoder()
        self.assertEqual(len(d), 256)
        self.assertTrue(text_head.is_text('\u0120the', d))     # ' the'
        self.assertTrue(text_head.is_text('\u010a', d))        # newline
        self.assertTrue(text_head.is_text('\u00e4\u00b8\u0143', d))  # a whole CJK character, three bytes
        self.assertFalse(text_head.is_text('\u00c3', d))       # 0xC3: the first byte of a two-byte character
        self.assertFalse(text_head.is_text('\u00e4\u00b8', d))  # two of a character's three bytes
        self.assertFalse(text_head.is_text('\u010d', d))       # carriage return
        self.assertFalse(text_head.is_text('\u0100', d))       # NUL
        self.assertFalse(text_head.is_text('</s>', d))
        self.assertFalse(text_head.is_text('\u0120<br>', d))

    def test_ids_of_the_fixture(self):
        vocab_size = len(self.vocab) + len(self.tok['added_tokens']) + 5  # padding ids past the tokenizer
        ids = set(text_head.non_text_token_ids(TOKENIZER, vocab_size))
        for t in self.tok['added_tokens']:
            self.assertIn(t['id'], ids, t['content'])
        self.assertTrue(set(range(vocab_size - 5, vocab_size)) <= ids)
        self.assertNotIn(self.vocab['A'], ids)
        lead = [i for p, i in self.vocab.items() if p == '\u00c3']
        self.assertTrue(lead and lead[0] in ids)
        # Of the 256 single-byte tokens, exactly the bytes of multi-byte characters (0x80-0xFF) and the
        # control characters other than tab and newline are left out.
        d = text_head.byte_decoder()
        single = {d[p]: i for p, i in self.vocab.items() if len(p) == 1}
        self.assertEqual(len(single), 256)
        left_out = {b for b, i in single.items() if i in ids}
        self.assertEqual(left_out, {b for b in range(256) if b >= 0x80 or (b < 0x20 and b not in (9, 10)) or b == 0x7f})

    def test_rows_of_the_head_are_zeroed_and_no_other_byte_changes(self):
        with tempfile.TemporaryDirectory() as d:
            ck, tokdir = os.path.join(d, 'ck'), os.path.join(d, 'tok')
            os.makedirs(ck)
            os.makedirs(tokdir)
            shutil.copyfile(TOKENIZER, os.path.join(tokdir, 'tokenizer.json'))
            with open(os.path.join(tokdir, 'tokenizer_config.json'), 'w') as f:
                f.write('{}')
            vocab_size = 300
            with open(os.path.join(ck, 'config.json'), 'w') as f:
                json.dump({'vocab_size': vocab_size}, f)
            path = os.path.join(ck, 'model.safetensors')
            write_safetensors(path, {'model.embed_tokens.weight': (vocab_size, 8), 'lm_head.weight': (vocab_size, 8)})
            before = {n: read_rows(path, n) for n in ('model.embed_tokens.weight', 'lm_head.weight')}
            old_argv = sys.argv
            sys.argv = ['text_head.py', ck, tokdir]
            try:
                text_head.main()
            finally:
                sys.argv = old_argv
            self.assertTrue(os.path.exists(os.path.join(ck, 'tokenizer.json')))
            ids = set(text_head.non_text_token_ids(TOKENIZER, vocab_size))
            head = read_rows(path, 'lm_head.weight')
            for r in range(vocab_size):
                self.assertEqual(head[r], bytes(16) if r in ids else before['lm_head.weight'][r], r)
            self.assertEqual(read_rows(path, 'model.embed_tokens.weight'), before['model.embed_tokens.weight'])


if __name__ == '__main__':
    unittest.main()
