#!/usr/bin/python3
"""Writes the serving benchmark's workloads into bench/workloads/ (deterministic: same files every run).

    /usr/bin/python3 bench/serve/gen_workloads.py [--out bench/workloads]

Every workload is one JSON file: {name, api, description, max_tokens, max_concurrency, tag, items} and
optionally `system` and `tools`, shared by all its items. `api` is "chat" (items carry `messages`) or
"completions" (items carry `prompt`);
retrieval items carry a needle instead and point at the shared haystack file (see build_request in
protocol.py). `tag` says where the harness puts the per-request tag that keeps runs from hitting each
other's prefix cache: "first_message" (the very start, busting every cache) or "last_user" (after a shared
prefix, which is then meant to be cached). Nothing here depends on a tokenizer: lengths are stated in
words and sized for ~1.35 tokens per word (Llama/Qwen-class tokenizers on English).
"""
import argparse
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.normpath(os.path.join(HERE, '..', 'workloads'))
TOKENS_PER_WORD = 1.35


class Rng:
    """splitmix64: fixed output on every Python version (random.Random's methods may change)."""

    def __init__(self, seed):
        self.state = seed & 0xFFFFFFFFFFFFFFFF

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
        return z ^ (z >> 31)

    def below(self, n):
        return self.next() % n

    def choice(self, seq):
        return seq[self.below(len(seq))]


# --- code completion ----------------------------------------------------------------------------

MODULES = [
    ('inventory', 'Inventory tracking for a small warehouse.', ['sku', 'quantity', 'price'], 'Item'),
    ('grades', 'Student grade book utilities.', ['student', 'course', 'score'], 'Grade'),
    ('weather', 'Weather station readings and summaries.', ['station', 'celsius', 'humidity'], 'Reading'),
    ('orders', 'Order processing for an online shop.', ['customer', 'total', 'status'], 'Order'),
]
TARGETS = [
    ('total_{f2}', 'Return the sum of `{f2}` over all records.'),
    ('group_by_{f0}', 'Return a dict mapping each `{f0}` to the list of its records.'),
    ('top_n_by_{f1}', 'Return the n records with the largest `{f1}`, largest first.'),
    ('filter_{f1}_above', 'Return the records whose `{f1}` is strictly above `threshold`.'),
    ('mean_{f2}', 'Return the mean `{f2}`, or 0.0 when there are no records.'),
    ('unique_{f0}s', 'Return the sorted list of distinct `{f0}` values.'),
    ('to_csv', 'Return the records as CSV text with a header line.'),
    ('parse_records', 'Parse CSV text (with a header line) back into a list of records.'),
]
SIGNATURES = {
    'top_n_by_{f1}': '(records: list[{cls}], n: int) -> list[{cls}]',
    'filter_{f1}_above': '(records: list[{cls}], threshold: float) -> list[{cls}]',
    'parse_records': '(text: str) -> list[{cls}]',
    'to_csv': '(records: list[{cls}]) -> str',
}


def module_header(name, doc, fields, cls):
    f0, f1, f2 = fields
    return (f'"""{doc}"""\nfrom __future__ import annotations\n\nimport csv\nimport io\n'
            f'from collections import defaultdict\nfrom dataclasses import dataclass\n\n\n'
            f'@dataclass\nclass {cls}:\n    {f0}: str\n    {f1}: float\n    {f2}: float\n\n\n'
            f'def load_example() -> list[{cls}]:\n    """A few records for the docstring examples."""\n'
            f'    return [\n        {cls}("a", 3.0, 10.0),\n        {cls}("b", 1.5, 4.0),\n'
            f'        {cls}("a", 7.25, 2.5),\n    ]\n\n\n'
            f'def count_records(records: list[{cls}]) -> int:\n    """Return how many records there are."""\n'
            f'    return len(records)\n\n\n'
            f'def max_{f1}(records: list[{cls}]) -> float:\n    """Return the largest `{f1}`, or 0.0 for no records."""\n'
            f'    best = 0.0\n    for record in records:\n        if record.{f1} > best:\n'
            f'            best = record.{f1}\n    return best\n\n\n')


def code_completion():
    items = []
    for name, doc, fields, cls in MODULES:
        f0, f1, f2 = fields
        for target, target_doc in TARGETS:
            fn = target.format(f0=f0, f1=f1, f2=f2)
            sig = SIGNATURES.get(target, '(records: list[{cls}]) -> object').format(cls=cls)
            if target in ('total_{f2}', 'mean_{f2}'):
                sig = f'(records: list[{cls}]) -> float'
            prompt = (module_header(name, doc, fields, cls) +
                      f'def {fn}{sig}:\n    """{target_doc.format(f0=f0, f1=f1, f2=f2)}"""\n')
            items.append({'id': f'{name}.{fn}', 'prompt': prompt})
    return {'name': 'code_completion', 'api': 'completions', 'max_tokens': 128, 'max_concurrency': 32,
            'tag': 'first_message', 'tag_format': '# bench request {tag}\n',
            'description': 'Raw-prompt Python completion: a module with a dataclass and helpers, then a '
                           'signature and docstring to complete (/v1/completions).', 'items': items}


# --- code edit -----------------------------------------------------------------------------------

EDITS = [
    ('rename the method `add` to `insert` everywhere it appears', 'add', 'insert'),
    ('rename the method `remove` to `discard` everywhere it appears', 'remove', 'discard'),
    ('rename the method `total` to `grand_total` everywhere it appears', 'total', 'grand_total'),
    ('rename the attribute `_rows` to `_entries` everywhere it appears', '_rows', '_entries'),
]


def edit_file(name, fields, cls):
    f0, f1, f2 = fields
    return (f'"""{cls} store: keeps {name} records in memory, keyed by {f0}."""\n'
            f'from dataclasses import dataclass, field\n\n\n@dataclass\nclass {cls}:\n    {f0}: str\n'
            f'    {f1}: float\n    {f2}: float\n\n\n@dataclass\nclass {cls}Store:\n'
            f'    _rows: dict[str, {cls}] = field(default_factory=dict)\n\n'
            f'    def add(self, record: {cls}) -> None:\n        """Insert or replace the record for its {f0}."""\n'
            f'        self._rows[record.{f0}] = record\n\n'
            f'    def remove(self, key: str) -> bool:\n        """Delete the record for `key`; say whether it existed."""\n'
            f'        return self._rows.pop(key, None) is not None\n\n'
            f'    def get(self, key: str) -> {cls} | None:\n        return self._rows.get(key)\n\n'
            f'    def total(self) -> float:\n        """Sum of {f1} * {f2} over every record."""\n'
            f'        return sum(r.{f1} * r.{f2} for r in self._rows.values())\n\n'
            f'    def keys(self) -> list[str]:\n        return sorted(self._rows)\n\n'
            f'    def __len__(self) -> int:\n        return len(self._rows)\n\n\n'
            f'def demo() -> None:\n    store = {cls}Store()\n    store.add({cls}("x", 2.0, 3.0))\n'
            f'    store.add({cls}("y", 1.0, 5.0))\n    print(len(store), store.total())\n'
            f'    store.remove("x")\n    print(store.keys())\n')


def code_edit():
    items = []
    for variant in range(2):
        for name, _, fields, cls in MODULES:
            for edit, old, new in EDITS:
                source = edit_file(name, fields, cls)
                if variant:
                    source = source.replace('def demo()', 'def example()')
                message = (f'Here is `{name}_store.py`:\n\n```python\n{source}```\n\n'
                           f'Please {edit}. Reply with the complete updated file in one ```python block, nothing else.')
                items.append({'id': f'{name}.{old}->{new}.{variant}', 'messages': [{'role': 'user', 'content': message}]})
    return {'name': 'code_edit', 'api': 'chat', 'max_tokens': 384, 'max_concurrency': 32, 'tag': 'first_message',
            'description': 'A ~40-line Python file and a small requested change; the answer repeats most of '
                           'the file (where speculation on the prompt pays).', 'items': items}


# --- chat prose ----------------------------------------------------------------------------------

TOPICS = ['how a hash map handles collisions', 'why the sky is blue', 'how vaccines train the immune system',
          'what a compiler does', 'how tides work', 'how public-key cryptography works',
          'why bread rises', 'how a bicycle stays upright']
AUDIENCES = ['a ten-year-old', 'a new programmer', 'a busy manager', 'a curious grandparent']


def chat_prose():
    items = [{'id': f'{t}/{a}', 'messages': [{'role': 'user', 'content': f'Explain {t} to {a}, in three short paragraphs.'}]}
             for t in TOPICS for a in AUDIENCES]
    return {'name': 'chat_prose', 'api': 'chat', 'max_tokens': 128, 'max_concurrency': 32, 'tag': 'first_message',
            'description': 'Short open-ended questions answered in prose (novel text: no lookup to exploit).',
            'items': items}


# --- long-context retrieval ------------------------------------------------------------------------

NOUNS = ['river', 'engineer', 'lantern', 'harbor', 'committee', 'garden', 'falcon', 'library', 'tunnel', 'orchard',
         'merchant', 'glacier', 'village', 'printer', 'compass', 'meadow', 'bridge', 'archive', 'signal', 'market']
ADJS = ['quiet', 'northern', 'ancient', 'busy', 'narrow', 'golden', 'patient', 'distant', 'careful', 'bright']
VERBS = ['repaired', 'described', 'visited', 'measured', 'painted', 'followed', 'counted', 'replaced', 'studied',
         'guarded']
PLACES = ['Aldbury', 'Brenmoor', 'Castleford', 'Dunmere', 'Eastwick', 'Farrowdale', 'Glenholt', 'Harwick']
VAULTS = ['Zephyr', 'Obsidian', 'Marigold', 'Cobalt', 'Juniper', 'Saffron', 'Tundra', 'Quartz']
RETRIEVAL_SIZES = {'2k': 2048, '4k': 4096, '16k': 16384, '32k': 32768}


def haystack_words(num_words):
    rng = Rng(2024)
    words = []
    while len(words) < num_words:
        sentence = (f'In {1800 + rng.below(220)} the {rng.choice(ADJS)} {rng.choice(NOUNS)} of {rng.choice(PLACES)} '
                    f'{rng.choice(VERBS)} the {rng.choice(ADJS)} {rng.choice(NOUNS)} near the {rng.choice(NOUNS)}.')
        words.extend(sentence.split())
    return words[:num_words]


def retrieval(size, haystack_file):
    tokens = RETRIEVAL_SIZES[size]
    # 90% of the nominal size for the haystack; the rest is question, chat template and answer.
    num_words = int(tokens * 0.9 / TOKENS_PER_WORD)
    rng = Rng(tokens)
    items = []
    for i, vault in enumerate(VAULTS):
        code = f'{1000 + rng.below(9000)}-{rng.choice(NOUNS).upper()}'
        items.append({'id': f'{vault}@{(i + 1) / 9:.2f}', 'needle': f'The access code for the {vault} vault is {code}.',
                      'depth': round((i + 1) / (len(VAULTS) + 1), 3),
                      'question': f'What is the access code for the {vault} vault? Answer with the code only.',
                      'answer': code})
    return {'name': f'retrieval_{size}', 'api': 'chat', 'max_tokens': 32, 'max_concurrency': 8,
            'tag': 'first_message', 'nominal_prompt_tokens': tokens,
            'haystack': {'file': haystack_file, 'words': num_words},
            'description': f'One needle fact in a ~{size}-token haystack of filler prose; recall is the share of '
                           f'answers that contain the code.', 'items': items}


# --- agent loop ----------------------------------------------------------------------------------

TOOLS = [
    {'type': 'function', 'function': {'name': 'read_file', 'description': 'Read a file of the repository.',
                                      'parameters': {'type': 'object', 'properties': {'path': {'type': 'string'}},
                                                     'required': ['path']}}},
    {'type': 'function', 'function': {'name': 'run_tests', 'description': 'Run the test suite, or one test file.',
                                      'parameters': {'type': 'object', 'properties': {'path': {'type': 'string'}}}}},
    {'type': 'function', 'function': {'name': 'replace_in_file', 'description': 'Replace text in a file.',
                                      'parameters': {'type': 'object', 'properties': {
                                          'path': {'type': 'string'}, 'old': {'type': 'string'},
                                          'new': {'type': 'string'}}, 'required': ['path', 'old', 'new']}}},
]


def agent_loop():
    items = []
    for m, (name, _, fields, cls) in enumerate(MODULES):
        for k in range(8):
            rng = Rng(100 * m + k)
            path = f'src/{name}_store.py'
            test = f'tests/test_{name}_store.py'
            messages = [{'role': 'user', 'content': f'The test {test}::test_total_{k} fails. Find the bug in {path} '
                                                    f'and fix it.'}]
            turns = [('run_tests', {'path': test}, f'FAILED {test}::test_total_{k} - assert {3 + k}.0 == {5 + k}.0'),
                     ('read_file', {'path': path}, edit_file(name, fields, cls)),
                     ('replace_in_file', {'path': path, 'old': f'r.{fields[1]} * r.{fields[2]}',
                                          'new': f'r.{fields[1]} + r.{fields[2]}'}, 'ok: 1 replacement'),
                     ('run_tests', {'path': test}, f'FAILED {test}::test_total_{k} - assert {4 + k}.0 == {5 + k}.0')]
            for t, (tool, args, result) in enumerate(turns[:2 + rng.below(3)]):
                call_id = f'call_{m}{k}{t}'
                messages.append({'role': 'assistant', 'content': None, 'tool_calls': [
                    {'id': call_id, 'type': 'function', 'function': {'name': tool, 'arguments': json.dumps(args)}}]})
                messages.append({'role': 'tool', 'tool_call_id': call_id, 'content': result})
            items.append({'id': f'{name}.{k}', 'messages': messages})
    return {'name': 'agent_loop', 'api': 'chat', 'max_tokens': 128, 'max_concurrency': 32, 'tag': 'last_user',
            'system': 'You are a coding agent. Use the tools to inspect and fix the repository; call one tool at a time.',
            'tools': TOOLS,
            'description': 'A coding agent several tool calls in: the history repeats tool-call JSON and file '
                           'contents; the model writes the next call.', 'items': items}


# --- repeated prefix -----------------------------------------------------------------------------

def handbook():
    rng = Rng(7)
    rules = []
    for i in range(48):
        noun, adj, place = rng.choice(NOUNS), rng.choice(ADJS), rng.choice(PLACES)
        rules.append(f'{i + 1}. Requests about the {adj} {noun} go to the {place} desk; answer within '
                     f'{1 + rng.below(5)} working days and copy the {rng.choice(NOUNS)} team.')
    return ('You are the help desk assistant of the Harwick Trading Company. Answer using only the handbook '
            'below, briefly, and cite the rule number.\n\nHANDBOOK\n' + '\n'.join(rules))


def repeated_prefix(cold):
    system = handbook()
    rng = Rng(11)
    items = []
    for i in range(32):
        question = f'Who handles requests about the {rng.choice(ADJS)} {rng.choice(NOUNS)}, and how fast?'
        items.append({'id': f'q{i}', 'messages': [{'role': 'user', 'content': question}]})
    name = 'repeated_prefix_cold' if cold else 'repeated_prefix'
    what = ('the control: the same prompts with the per-request tag at the very start, so no prefix is shared'
            if cold else 'one long system prompt shared by every request, a new short question each time '
                         '(prefix-cache TTFT; compare with repeated_prefix_cold)')
    return {'name': name, 'api': 'chat', 'max_tokens': 64, 'max_concurrency': 32, 'system': system,
            'tag': 'first_message' if cold else 'last_user', 'description': what.capitalize() + '.', 'items': items}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--out', default=DEFAULT_OUT)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    haystack_file = 'haystack.txt'
    longest = max(int(t * 0.9 / TOKENS_PER_WORD) for t in RETRIEVAL_SIZES.values())
    with open(os.path.join(args.out, haystack_file), 'w') as f:
        f.write(' '.join(haystack_words(longest)) + '\n')
    workloads = [code_completion(), code_edit(), chat_prose(), agent_loop(), repeated_prefix(False),
                 repeated_prefix(True)] + [retrieval(size, haystack_file) for size in RETRIEVAL_SIZES]
    for w in workloads:
        with open(os.path.join(args.out, w['name'] + '.json'), 'w') as f:
            json.dump(w, f, indent=1)
            f.write('\n')
    print(f'wrote {len(workloads)} workloads and {haystack_file} to {args.out}')


if __name__ == '__main__':
    main()
