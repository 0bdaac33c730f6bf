#!/usr/bin/env python3
"""`tachyon chat` on the demo model as a person uses it: under a pseudo-terminal, so the
terminal's line discipline, its echo and its Ctrl-C (SIGINT to the foreground process) are the
real ones. Types messages and reads the streamed answers, checks that the conversation is kept
(the prompt grows by the last turn) and that /reset, /system and /help work, stops an answer with
Ctrl-C and chats on, then quits with Ctrl-C at the prompt; more runs quit with Ctrl-D and /exit.
With libedit (the second argument says whether the build has it), Ctrl-C on a typed line clears
it and Up recalls the last line; the whole scenario then runs again with TERM=dumb, where chat
reads plain lines from the terminal's own line discipline.

    python3 tests/e2e/chat_terminal_test.py build/tachyon libedit|plain
"""
import os
import pty
import re
import select
import sys
import time

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\r")  # styles, and libedit's cursor moves
STATS = re.compile(r"\[(stopped; )?(\d+) prompt \+ (\d+) tokens, [0-9.]+ tok/s[^\]]*\]")
PROMPT = ">>> "


class Chat:
    def __init__(self, tachyon, line_editor, *args):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            env = dict(os.environ, TERM="xterm" if line_editor == "libedit" else "dumb")
            os.execve(tachyon, [tachyon, "chat", *args], env)
        self.raw = b""
        self.seen = ""  # everything read, escape codes removed (re-derived whole: a read may split one)
        self.mark = 0   # where the output of the current step starts

    def read_until(self, pattern, timeout=120.0):
        """Reads until `pattern` matches the output since the last step; returns the match."""
        deadline = time.monotonic() + timeout
        regex = re.compile(pattern, re.S)
        while True:
            match = regex.search(self.seen, self.mark)
            if match:
                return match
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no {pattern!r} within {timeout} s; output since the last step:\n"
                                     f"{self.seen[self.mark:]!r}")
            ready, _, _ = select.select([self.fd], [], [], left)
            if ready:
                try:
                    data = os.read(self.fd, 65536)
                except OSError:  # EIO: the child closed the terminal
                    data = b""
                if not data:
                    raise AssertionError(f"chat exited while waiting for {pattern!r}:\n{self.seen[self.mark:]!r}")
                self.raw += data
                self.seen = ANSI.sub("", self.raw.decode("utf-8", "replace"))

    def step(self, keys):
        # A person types some time after the prompt shows. Keys sent in the same instant can reach
        # the terminal before libedit has switched it to its editing mode (the switch waits for
        # the prompt's output to drain), where Ctrl-C is still a signal and not a key.
        time.sleep(0.15)
        self.mark = len(self.seen)
        os.write(self.fd, keys.encode())

    def say(self, text):
        """Sends a message and waits for its answer; returns (answer text, prompt tokens, tokens)."""
        self.step(text + "\r")
        stats = self.read_until(STATS.pattern)
        self.read_until(re.escape(PROMPT) + r"$")
        echoed = self.seen.find(text, self.mark) + len(text)
        answer = self.seen[echoed:self.mark + stats.start()].strip()
        assert not stats.group(1), f"answer to {text!r} was stopped: {stats.group(0)}"
        return answer, int(stats.group(2)), int(stats.group(3))

    def wait_exit(self, timeout=30.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                return os.waitstatus_to_exitcode(status)
            if select.select([self.fd], [], [], 0.05)[0]:
                try:
                    self.raw += os.read(self.fd, 65536)  # drain, so the child never blocks on a full terminal
                except OSError:
                    pass
        raise AssertionError(f"chat did not exit; its output ends with:\n{self.seen[-300:]!r}")


def scenario(tachyon, line_editor):
    chat = Chat(tachyon, line_editor, "--max-tokens", "400")
    chat.read_until(re.escape(PROMPT))

    answer, prompt1, generated1 = chat.say("Hello! What can you do?")
    assert answer, "empty answer"
    _, prompt2, _ = chat.say("Tell me more.")
    # The second prompt holds the first turn: its question, the answer and the template's markers.
    assert prompt2 > prompt1 + generated1 - 1, (prompt1, generated1, prompt2)

    chat.step("/reset\r")
    chat.read_until(r"\(conversation cleared\)")
    _, prompt3, _ = chat.say("Hello! What can you do?")
    assert prompt3 == prompt1, f"after /reset the prompt has {prompt3} tokens, the first had {prompt1}"

    chat.step("/reset\r")
    chat.read_until(r"\(conversation cleared\)")
    chat.step("/system You are a helpful assistant who answers in one sentence.\r")
    chat.read_until(r"\(system prompt set\)")
    _, prompt4, _ = chat.say("Hello! What can you do?")
    assert prompt4 > prompt1 + 5, f"the system prompt did not reach the model ({prompt4} vs {prompt1} tokens)"

    chat.step("/help\r")
    chat.read_until(r"/system TEXT.*/reset.*/exit.*" + re.escape(PROMPT) + "$")
    chat.step("/nonsense\r")
    chat.read_until(r"unknown command /nonsense")

    # Ctrl-C as soon as the answer starts streaming stops it, and chat goes on.
    question = "Write a long Python program with many functions and classes, with comments."
    chat.step(question + "\r")
    chat.read_until(re.escape(question) + r"\s*\S")
    os.write(chat.fd, b"\x03")
    stopped = chat.read_until(STATS.pattern)
    assert stopped.group(1), f"Ctrl-C did not stop the answer: {stopped.group(0)}"
    assert int(stopped.group(3)) < 400, f"the answer ran to its end: {stopped.group(0)}"
    chat.read_until(re.escape(PROMPT) + "$")
    answer, _, _ = chat.say("Thanks. Say hello.")
    assert answer, "no answer after a stopped one"

    if line_editor == "libedit":
        # Ctrl-C on a typed line clears it and prompts again; Up brings back the last line.
        chat.step("half a thought\x03")
        chat.read_until(re.escape(PROMPT) + "$")
        chat.step("\x1b[A")
        chat.read_until(re.escape("Thanks. Say hello.") + "$")
        chat.step("\r")
        chat.read_until(STATS.pattern)
        chat.read_until(re.escape(PROMPT) + "$")

    # Ctrl-C at an empty prompt quits.
    chat.step("\x03")
    code = chat.wait_exit()
    assert code == 0, f"exit code {code} after Ctrl-C at the prompt"

    # So does Ctrl-D (end of input), and /exit.
    for keys in ("\x04", "/exit\r"):
        other = Chat(tachyon, line_editor)
        other.read_until(re.escape(PROMPT))
        other.step(keys)
        code = other.wait_exit()
        assert code == 0, f"exit code {code} after {keys!r}"
    print(f"chat terminal test ({line_editor}): ok")


def main():
    tachyon, line_editor = sys.argv[1], sys.argv[2]
    for mode in ["libedit", "plain"] if line_editor == "libedit" else ["plain"]:
        scenario(tachyon, mode)


if __name__ == "__main__":
    main()
