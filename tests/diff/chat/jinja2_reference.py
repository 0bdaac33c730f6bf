#!/usr/bin/env python3
"""Reference renderer for the chat-template differential test.

Generates random chat conversations (seeded) and renders each through Jinja2 set up
exactly as transformers' apply_chat_template does (see
tests/fixtures/chat_templates/README.md), writing one JSON document:

  {"cases": [{"template": name, "context": {...}, "rendered": str}
             | {"template": name, "context": {...}, "error_type": str, "error_message": str}]}

The C++ test (jinja2_diff_test.cpp) renders the same contexts with tachyon's interpreter and
requires identical output or the same exception class. One process renders the whole batch.

usage: jinja2_reference.py --seed N --count N --out FILE NAME=TEMPLATE_FILE[:SPECIAL_TOKENS_JSON] ...
"""
import argparse
import json
import random
import sys
from datetime import datetime

import jinja2
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


class AssistantTracker(Extension):
    # transformers' {% generation %} ... {% endgeneration %}: renders its body unchanged.
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def make_environment():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        return datetime.now().strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[AssistantTracker, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


# --- conversation generator ------------------------------------------------------------

WORDS = ["hello", "world", "Paris", "weather", "¿qué?", "東京", "日本語のテキスト", "Ünïcödé", "e\u0301", "مرحبا",
         "नमस्ते", "👩‍💻", "🎉", "<tool_call>", "</think>", "<think>", "<|im_end|>", "{{ x }}", "{% if %}", "\\n",
         "'quote'", "\"dq\"", "tab\there", "a&b<c>", "  padded  ", "\r\n", "\n\n", "null", "42", "3.14", "", "-",
         "<tool_response>", "</tool_response>", "<｜tool▁calls▁begin｜>", "<start_of_turn>", "\u2028", "\x00"]

ROLES = ["system", "user", "assistant", "tool", "user", "assistant", "developer", "ipython", "function", "User"]


def text(rng, max_words=12):
    n = rng.randint(0, max_words)
    parts = [rng.choice(WORDS) if rng.random() < 0.6 else "".join(chr(rng.randint(0x20, 0x7e)) for _ in range(rng.randint(1, 8)))
             for _ in range(n)]
    sep = rng.choice([" ", " ", "\n", ""])
    s = sep.join(parts)
    if rng.random() < 0.1:
        s = "\n" + s + "\n"
    return s


def arguments(rng):
    args = {}
    for _ in range(rng.randint(0, 3)):
        key = rng.choice(["location", "unit", "city", "count", "flag", "nested", "ünï"])
        args[key] = rng.choice([text(rng, 3), rng.randint(-5, 100), rng.random() * 100, True, False, None,
                                [1, "two", 3.5], {"a": {"b": [None]}}])
    return args


def tool_call(rng):
    args = arguments(rng)
    fn = {"name": rng.choice(["get_weather", "get_time", "search", "calc", "ünïcode_tool"])}
    r = rng.random()
    if r < 0.45:
        fn["arguments"] = json.dumps(args, ensure_ascii=rng.random() < 0.5)
    elif r < 0.9:
        fn["arguments"] = args
    call = {"type": "function", "function": fn} if rng.random() < 0.9 else fn
    if rng.random() < 0.7:
        call["id"] = "call_" + str(rng.randint(0, 99999))
    return call


def content(rng, clean):
    r = rng.random()
    if clean:
        return text(rng)
    if r < 0.8:
        return text(rng)
    if r < 0.9:
        return ""
    if r < 0.95:
        return None
    return [{"type": "text", "text": text(rng)} for _ in range(rng.randint(1, 2))]


def message(rng, role, clean=False):
    m = {"role": role}
    if clean or rng.random() < 0.97:
        m["content"] = content(rng, clean)
    if role == "assistant":
        if rng.random() < 0.3:
            m["reasoning_content"] = text(rng) if rng.random() < 0.9 else None
        if rng.random() < 0.35:
            m["tool_calls"] = [tool_call(rng) for _ in range(rng.randint(1, 3))]
            if rng.random() < 0.5:
                m["content"] = None if rng.random() < 0.5 and not clean else ""
        if rng.random() < 0.1 and isinstance(m.get("content"), str):
            m["content"] = "<think>\n" + text(rng) + "\n</think>\n\n" + m["content"]
    if role == "tool":
        if rng.random() < 0.6:
            m["tool_call_id"] = "call_" + str(rng.randint(0, 99999))
        if rng.random() < 0.3:
            m["name"] = "get_weather"
        if rng.random() < 0.3:
            m["content"] = json.dumps(arguments(rng), ensure_ascii=False)
    return m


def well_formed(rng):
    # Half of the well-formed conversations are clean (string content everywhere), so
    # that most of them render instead of stopping at the first odd field.
    clean = rng.random() < 0.6
    msgs = []
    if rng.random() < 0.6:
        msgs.append(message(rng, "system", clean))
    for _ in range(rng.randint(1, 4)):
        msgs.append(message(rng, "user", clean))
        a = message(rng, "assistant", clean)
        msgs.append(a)
        if "tool_calls" in a:
            for _ in a["tool_calls"]:
                msgs.append(message(rng, "tool", clean))
            msgs.append(message(rng, "assistant", clean))
    if rng.random() < 0.7:
        msgs.append(message(rng, "user", clean))
    return msgs


def tools(rng):
    out = []
    for i in range(rng.randint(1, 3)):
        out.append({"type": "function", "function": {
            "name": rng.choice(["get_weather", "get_time", "search"]) + str(i),
            "description": text(rng, 6),
            "parameters": {"type": "object", "properties": {
                "location": {"type": "string", "description": text(rng, 4)},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
                "required": ["location"]}}})
    return out


def context(rng, special_tokens):
    if rng.random() < 0.75:
        msgs = well_formed(rng)
    else:
        msgs = [message(rng, rng.choice(ROLES)) for _ in range(rng.randint(0, 7))]
    ctx = dict(special_tokens)
    ctx.update({"messages": msgs, "tools": tools(rng) if rng.random() < 0.35 else None, "documents": None,
                "add_generation_prompt": rng.random() < 0.6})
    if rng.random() < 0.5:
        ctx["enable_thinking"] = rng.random() < 0.5
    if rng.random() < 0.2:
        ctx["reasoning_effort"] = rng.choice(["low", "medium", "high"])
    if rng.random() < 0.15:
        ctx["date_string"] = "26 Jul 2024"
    if rng.random() < 0.1:
        ctx["builtin_tools"] = ["code_interpreter", "brave_search"]
    if rng.random() < 0.1:
        ctx["tools_in_user_message"] = rng.random() < 0.5
    if rng.random() < 0.1:
        ctx["model_identity"] = text(rng, 5)
    # Templates that print today's date read it from here, so both renderers agree even
    # across midnight.
    ctx["current_date"] = "2025-06-28"
    return ctx


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--count", type=int, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("templates", nargs="+")
    args = ap.parse_args()
    env = make_environment()
    cases = []
    for spec in args.templates:
        name, rest = spec.split("=", 1)
        path, _, tokens_json = rest.partition(":")
        special_tokens = json.loads(tokens_json) if tokens_json else {}
        with open(path, encoding="utf-8") as f:
            source = f.read()
        template = env.from_string(source)
        rng = random.Random(f"{args.seed}/{name}")
        for _ in range(args.count):
            ctx = context(rng, special_tokens)
            case = {"template": name, "context": ctx}
            try:
                case["rendered"] = template.render(**ctx)
            except Exception as e:  # every exception class is compared by name
                case["error_type"] = type(e).__name__
                case["error_message"] = str(e)
            cases.append(case)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"cases": cases}, f, ensure_ascii=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
