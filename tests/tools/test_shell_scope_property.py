"""Generated commands against bash itself: whatever gets scopes runs only what they name.

Commands are built from harmless programs, paths, options, every kind of quote, blanks,
backslash-newlines and shell operators. Each one that `command_scopes` gives scopes is run
for real by `bash -c` in a copy of the workspace, with PATH holding only stub programs
(each writes its name and argv to a log) and the builtins that would hide them disabled.
Every logged run must be covered by one of the scopes and be one of the simple commands
read from the command, and no file may appear.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import shlex
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tool_fakes import FakeEditor, make_context

from acp_agent.tools import ToolContext
from acp_agent.tools._shell_scope import EXACT, PREFIX, _parts, command_scopes

STUBS = [
    *["cat", "ls", "echo", "printf", "head", "wc", "grep", "sort", "git", "touch", "make"],
    *["sh", "bash", "rm", "node", "sleep", "true", "false", "pwd", "tee", "sed", "env"],
    *["xargs", "test", "find"],
]
DISABLED_BUILTINS = "echo printf true false pwd test [ kill"
BASH_SECONDS = 5.0
EXAMPLES = 2000

PROGRAMS = [
    *["cat", "ls", "echo", "printf", "head", "wc", "grep", "sort", "sleep", "true", "pwd"],
    *["cat", "ls", "echo", "make", "touch", "sed e", "git status", "git log", "cd src"] * 3,
    *["git status", "git log", "find .", "cd src", "cd ..", "touch", "make", "tee", "sed e"],
    *["sh", "rm", "node -e", "env", "time", "coproc", "!", "xargs"],
]
ARGUMENTS = [
    *["README.md", "src", "src/a.txt", "-l", "-n", "-5", "--", "--x", "--x=README.md"],
    *["README.md", "src", "src/a.txt", "-l", "x", "a b", "src/a.txt", "--", "-n", "x"] * 3,
    *["x", ".", "..", "../outside", "/etc/hostname", "/dev/null", "~", "~/x", "a b", "#"],
    *["=", "X=1", "-L", "link", "*", "{a,b}", "$HOME", "-o", "out", "!", "--x/../../etc"],
]
BLANKS = [" "] * 12 + ["\t", "  ", " \\\n ", "\\\n", " \\\n"]
SEPARATORS = [
    *["; ", " && ", " || ", " | ", " |& ", " & ", "\n", ";\n", "&&\n", "|\n", "\n\n"],
    *["; ", " && ", " | ", "\n", " || ", " & "] * 3,
    *["\r\n", ";", "&&", "|", " &\n", " ;; ", "\n#\n"],
]
CHAOS = [
    *[">", ">>", "<", "<(", "$(", "`", "(", ")", "{", "}", "#", "=", "\n", "&", "|", ";"],
    *[">/dev/null", " 2>&1", "> X", " < README.md", "\\", "'", '"', "\r", "$", "<<<"],
    *["<<EOF\nx\nEOF\n", " >&2", " 2>&-", "\t#", "${x}", "$((1))", "X=1 "],
]


class Choices:
    """Picks from vocabularies by the bytes Hypothesis draws: one draw per command is fast,
    and shrinking the bytes towards zero picks the first, simplest entries."""

    def __init__(self, data: bytes) -> None:
        self._data = iter(data)

    def pick(self, options: Sequence[str]) -> str:
        return options[next(self._data, 0) % len(options)]

    def number(self, most: int) -> int:
        return next(self._data, 0) % (most + 1)


def quoted(word: str, choices: Choices) -> str:
    """`word` as bash would read it back: plain, in any kind of quotes, escaped, or half."""
    middle = len(word) // 2
    escaped = "".join("\\" + char for char in word)
    half = f"{word[:middle]}'{word[middle:]}'"
    forms = [word] * 24 + [f"'{word}'", f'"{word}"', escaped, half, f"$'{word}'", f'$"{word}"']
    return choices.pick(forms)


def command(data: bytes) -> str:
    choices = Choices(data)
    simple: list[str] = []
    for _ in range(1 + choices.number(2)):
        words = choices.pick(PROGRAMS).split()
        words += [choices.pick(ARGUMENTS) for _ in range(choices.number(3))]
        text = quoted(words[0], choices)
        for word in words[1:]:
            text += choices.pick(BLANKS) + quoted(word, choices)
        simple.append(text)
    text = simple[0]
    for more in simple[1:]:
        text += choices.pick(SEPARATORS) + more
    for _ in range(max(0, choices.number(7) - 5)):  # mostly none
        at = choices.number(255) * len(text) // 255
        text = text[:at] + choices.pick(CHAOS) + text[at:]
    return text


# --- the sandbox -------------------------------------------------------------------------------


@dataclass
class Sandbox:
    ctx: ToolContext
    work: Path
    log: Path
    env: dict[str, str]

    def files(self) -> dict[str, int]:
        """Every file and folder beside the stubs and the log, with its modification time:
        what a command could have created or written."""
        found: dict[str, int] = {}
        for folder, folders, names in os.walk(self.work.parent):
            folders[:] = [name for name in folders if name not in ("stubs", "log")]
            for name in [*folders, *names]:
                path = os.path.join(folder, name)
                found[path] = os.lstat(path).st_mtime_ns
        return found

    def run(self, command: str) -> list[list[str]]:
        """The argv of every stub the command ran, background ones included: each holds a
        copy of a pipe's write end, so its read end ends when the last of them has."""
        read_end, write_end = os.pipe()
        held = fcntl.fcntl(write_end, fcntl.F_DUPFD, 100)
        os.close(write_end)
        process = subprocess.Popen(
            ["/bin/bash", "-c", command],  # not the stub
            cwd=self.work,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(held,),
            start_new_session=True,
        )
        os.close(held)
        try:
            _wait_for_end_of_file(read_end, time.monotonic() + BASH_SECONDS)
            process.wait(timeout=BASH_SECONDS)
        finally:
            os.close(read_end)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        return list(self._records())

    def _records(self) -> Iterator[list[str]]:
        for record in sorted(self.log.iterdir()):
            yield record.read_bytes().decode().split("\0")[:-1]
            record.unlink()


def _wait_for_end_of_file(fd: int, deadline: float) -> None:
    while True:
        remaining = deadline - time.monotonic()
        assert remaining > 0, "bash did not finish in time"
        readable, _, _ = select.select([fd], [], [], remaining)
        if readable and not os.read(fd, 4096):
            return


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    top = Path(os.path.realpath(tmp_path_factory.mktemp("sandbox")))
    work, outside, stubs, log = (top / name for name in ("work", "outside", "stubs", "log"))
    for folder in (work / "src", work / "--x", outside, stubs, log):
        folder.mkdir(parents=True)
    (work / "README.md").write_text("r")
    (work / "src" / "a.txt").write_text("a")
    (outside / "secret").write_text("s")
    (work / "link").symlink_to(outside)
    for name in STUBS:
        stub = stubs / name
        stub.write_text(f'#!/bin/sh\nprintf \'%s\\0\' "${{0##*/}}" "$@" > {log}/$$\n')
        stub.chmod(0o755)
    bash_env = top / "bash_env"
    bash_env.write_text(f"enable -n {DISABLED_BUILTINS}\n")
    env = {"PATH": str(stubs), "BASH_ENV": str(bash_env), "HOME": os.path.expanduser("~")}
    with pytest.MonkeyPatch.context() as patch:  # git scopes without this machine's config
        patch.setenv("GIT_CONFIG_GLOBAL", str(top / "none"))
        patch.setenv("GIT_CONFIG_SYSTEM", str(top / "none"))
        yield Sandbox(make_context(work, FakeEditor()), work, log, env)


# --- the oracle --------------------------------------------------------------------------------


def covered(argv: list[str], scopes: tuple[str, ...]) -> bool:
    """Whether a run of `argv` is what one of `scopes` allows."""
    for scope in scopes:
        if scope.startswith(PREFIX):
            prefix = scope.removeprefix(PREFIX).split()
            if argv[: len(prefix)] == prefix:
                return True
        elif argv in _exact_commands(scope.removeprefix(EXACT)):
            return True
    return False


def _exact_commands(text: str) -> list[list[str]]:
    """The simple commands an exact scope names: `a b | c < in` is `a b` and `c`."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars="|<")
    lexer.whitespace_split = True
    commands: list[list[str]] = [[]]
    tokens = list(lexer)
    index = 0
    while index < len(tokens):
        if tokens[index] == "|":
            commands.append([])
        elif tokens[index] == "<":
            index += 1  # the input's name
        else:
            commands[-1].append(tokens[index])
        index += 1
    return commands


def read_words(command: str) -> list[list[str]]:
    """The simple commands as the scope reader saw them, `~` as bash expands it."""
    return [[os.path.expanduser(word) for word in part.words] for part in _parts(command)]


def test_bash_runs_only_what_the_scopes_of_a_generated_command_name(sandbox: Sandbox) -> None:
    seen: Counter[str] = Counter()
    before = sandbox.files()

    @settings(
        max_examples=EXAMPLES,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(st.binary(min_size=48, max_size=48).map(command))
    def check(command: str) -> None:
        scopes = command_scopes(command, sandbox.ctx)
        seen["commands"] += 1
        if not scopes:
            return
        seen["scoped"] += 1
        runs = sandbox.run(command)
        seen["runs"] += len(runs)
        words = read_words(command)
        for argv in runs:
            assert covered(argv, scopes), (command, argv, scopes)
            assert argv in words, (command, argv, words)
        assert sandbox.files() == before, command

    check()

    # Not vacuous: a good share of the commands had scopes and ran programs.
    assert seen["scoped"] > seen["commands"] // 10, seen
    assert seen["runs"] > seen["scoped"], seen


def test_the_oracle_sees_what_bash_runs(sandbox: Sandbox) -> None:
    """The harness itself: stubs log builtins' names too, background runs included."""
    runs = sandbox.run("echo 'a b' && sleep 1 & printf x >/dev/null 2>&1; true")

    assert sorted(runs) == [["echo", "a b"], ["printf", "x"], ["sleep", "1"], ["true"]]
    assert not covered(["touch", "X"], ("shell:cat", "shell-exact:ls | touch Y < in"))
    assert covered(["touch", "Y"], ("shell-exact:ls | touch Y < in",))
    assert covered(["git", "status", "-s"], ("shell:git status",))
