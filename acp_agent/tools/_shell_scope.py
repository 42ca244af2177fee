"""What an "always allow" answer to a shell command covers, judged in the session's context.

A command has one scope per part (`&&`, `||`, `|`, `;`, `&` and newlines separate parts),
each part once; memory allows a command only when every part's scope was allowed. A scope
is a plain string of one of two kinds:

- *prefix* (`shell:cat`, `shell:git status`): for programs whose arguments only read or
  print (`READ_ONLY`) and read-only subcommands (`READ_ONLY_SUBCOMMANDS`). Allowing
  `cat README.md` allows `cat` with other arguments that pass the checks below;
- *exact* (`shell-exact:make test`): for every other program, the part's words, with its
  `<` inputs and, when it reads a pipe, the pipeline before it (what it reads may be code:
  `echo … | sed e`). Allowing `make test` allows `make test` and nothing else.

A part gets a scope, and so can match one, only when its words pass these checks in the
session's context; otherwise the whole command has no scope and asks every time:

- every word that could be a path (an argument not starting with `-`, a value after `=`,
  a value glued to a short option such as `-o/tmp/x`), after `~` and the cwd, lies inside
  the session roots, both as the kernel resolves it (symlinks, then `..`) and as bash's
  `cd` does (`..` first). After `cd DIR`, later relative paths must hold from DIR and from
  where the command started (the `cd` may fail);
- nothing can expand to words it does not show: no `$` or backticks outside single quotes,
  no glob or brace characters outside quotes, no `~user`, `~+` or `~-`;
- no output redirection except to /dev/null; no heredocs, subshells, braces, `#` comments,
  or leading `VAR=value`;
- no argument that writes, executes or reads beyond its words (`UNSAFE_ARGUMENTS`:
  `find -exec`, `sort -o`, `git -c`, `grep -R` …), no program that runs other commands,
  changes the shell for later parts or destroys data (`NEVER_REMEMBERED`: shells, `env`,
  `xargs`, `sudo`, `export`, `rm` …), and no inline code (`python -c`), behind a runner
  (`uv run`, `npx` …) too.

Narrow on purpose: narrower only means asking again.
"""

from __future__ import annotations

import os
import posixpath
import re
import shlex
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from .base import ToolContext

PREFIX = "shell:"
EXACT = "shell-exact:"

SEPARATORS = frozenset({"&&", "||", "|", "|&", ";", "&", "\n", ";;"})
"""Tokens that end one simple command and start the next."""
PIPES = frozenset({"|", "|&"})

NEVER_REMEMBERED = frozenset(
    {
        # run other commands, so their own name says nothing
        "sh", "bash", "zsh", "dash", "ksh", "fish", "eval", "exec", "source", ".",
        "sudo", "su", "doas", "env", "xargs", "nohup", "time", "nice", "timeout", "watch",
        "command", "builtin", "parallel", "ssh", "stdbuf", "setsid", "flock", "chroot",
        "busybox", "script", "strace",
        # change the shell (variables, lookups, directory stack) for the parts after them
        "export", "declare", "typeset", "local", "readonly", "set", "unset", "shopt", "alias",
        "hash", "enable", "trap", "read", "mapfile", "readarray", "let", "umask", "pushd",
        "popd",
        # keywords: the part is not a simple command
        "if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case",
        "esac", "select", "function", "coproc",
        # destroy data whatever their arguments
        "rm", "rmdir", "dd", "mkfs", "shred", "truncate", "chmod", "chown", "kill", "pkill",
        "killall", "reboot", "shutdown",
    }
)  # fmt: skip

READ_ONLY = frozenset(
    {
        "cat", "ls", "head", "tail", "wc", "grep", "egrep", "fgrep", "rg", "find", "tree",
        "diff", "cmp", "stat", "sort", "cut", "tr", "nl", "echo", "printf", "pwd", "true",
        "false", "test", "which", "basename", "dirname", "realpath", "readlink", "whoami",
        "uname", "sleep",
    }
)  # fmt: skip
"""Programs that only read or print (given no `UNSAFE_ARGUMENTS`): they get prefix scopes."""

READ_ONLY_SUBCOMMANDS = {"git": frozenset({"status", "log", "diff", "show", "blame"})}
"""Subcommands that only read or print: `git status -s` has the prefix scope `git status`."""

UNSAFE_ARGUMENTS: dict[str, frozenset[str]] = {
    "find": frozenset(
        {"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf",
         "-fls", "-files0-from"}
    ),
    "sort": frozenset({"-o", "--output", "--compress-program", "--files0-from"}),
    "wc": frozenset({"--files0-from"}),  # reads the names in a file, unchecked
    "grep": frozenset({"-R", "--dereference-recursive"}),  # follows symlinks out of the roots
    "egrep": frozenset({"-R", "--dereference-recursive"}),
    "fgrep": frozenset({"-R", "--dereference-recursive"}),
    "rg": frozenset(
        {"--pre", "--pre-glob", "-z", "--search-zip", "--hostname-bin", "-L", "--follow"}
    ),
    "tree": frozenset({"-o", "-R"}),  # -R writes 00Tree.html files
    "diff": frozenset({"-r", "--recursive"}),  # follows symlinks out of the roots
    "printf": frozenset({"-v"}),  # assigns a shell variable: PATH too
    "git": frozenset(
        {"-c", "--config-env", "--exec-path", "--upload-pack", "--receive-pack", "--output"}
    ),
    "sed": frozenset({"-i", "--in-place"}),
    "tar": frozenset(
        {"--to-command", "--use-compress-program", "-I", "--checkpoint-action",
         "--info-script", "--new-volume-script", "-F", "--rsh-command", "--rmt-command"}
    ),
}  # fmt: skip
"""Arguments that write, execute or read beyond the words: a part with one has no scope.
A two-character option also counts among other short options (`-ro`) or with a glued value
(`-o/tmp/x`); a long one also abbreviated (`--out`), as getopt accepts."""

RUNNERS = {
    "npm": {"run", "exec", "x"},
    "pnpm": {"run", "exec", "dlx"},
    "yarn": {"run", "exec", "dlx"},
    "bun": {"run", "x"},
    "uv": {"run"},
    "poetry": {"run"},
    "pipenv": {"run"},
    "deno": {"run"},
    "bundle": {"exec"},
}
"""Subcommands that run another command, which must pass the checks too."""

PROGRAM_RUNNERS = frozenset({"npx", "bunx", "uvx", "pipx"})
"""Programs whose first argument is the program they run."""

INTERPRETERS = frozenset(
    {"python", "python3", "node", "ruby", "perl", "php", "lua", "Rscript", "julia"}
)
"""Scoped with a script or `-m module`; inline code (`-c`, `-e`) or a bare REPL is not."""

_PROGRAM = re.compile(r"[A-Za-z0-9_./+-][A-Za-z0-9_./+@:-]*")
_SAFE_REDIRECT_TARGETS = frozenset({"/dev/null"})
_FD = re.compile(r"\d+|-")
_MAX_DIRECTORIES = 8


class Unscopable(Exception):
    """The command cannot be reduced to scopes; it must be asked about every time."""


def command_scopes(command: str, ctx: ToolContext, cwd: str | None = None) -> tuple[str, ...]:
    """The scopes of the parts of `command`, each once, run from `cwd` (default: the session
    cwd); () when it has none (always ask)."""
    try:
        if _expands(command):
            raise Unscopable
        places = _Places(ctx, ctx.resolve(cwd) if cwd else ctx.cwd)
        scopes: list[str] = []
        pipeline: list[str] = []  # the parts before this one that feed its input
        pipeline_scopes: list[str] = []
        for part in _parts(command):
            if not part.piped:
                scopes += pipeline_scopes
                pipeline, pipeline_scopes = [], []
            scope = _part_scope(part, places)
            if scope.startswith(EXACT):
                scope = EXACT + " | ".join([*pipeline, part.text])
                pipeline_scopes = []  # named in this scope's words
            pipeline_scopes.append(scope)
            pipeline.append(part.text)
        scopes += pipeline_scopes
    except Unscopable:
        return ()
    return tuple(dict.fromkeys(scopes))


def describe_scopes(scopes: Sequence[str]) -> str:
    """Plain words for what `scopes` cover: `ls …, echo … (paths inside the project)`,
    `exactly: make test`, or both joined by "and"."""
    prefixes = [f"{s.removeprefix(PREFIX)} …" for s in scopes if s.startswith(PREFIX)]
    exact = [s.removeprefix(EXACT) for s in scopes if s.startswith(EXACT)]
    pieces = []
    if prefixes:
        pieces.append(f"{', '.join(prefixes)} (paths inside the project)")
    if exact:
        pieces.append(f"exactly: {', '.join(exact)}")
    return " and ".join(pieces)


# --- words -----------------------------------------------------------------------------------


def _expands(command: str) -> bool:
    """Whether bash could turn part of `command` into words it does not show: `$` and
    backticks outside single quotes; glob and brace characters outside any quotes."""
    quote = ""
    chars = iter(command)
    for char in chars:
        if quote == "'":
            quote = "" if char == "'" else quote
        elif char == "\\":
            next(chars, None)  # an escaped character is itself
        elif char in "$`":
            return True
        elif quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in "*?[{":
            return True
    return False


@dataclass(frozen=True)
class _Part:
    """A simple command: its words, the files it reads with `<`, whether it reads a pipe."""

    words: list[str]
    inputs: list[str]
    piped: bool

    @property
    def text(self) -> str:
        return " ".join([shlex.join(self.words), *(f"< {shlex.quote(p)}" for p in self.inputs)])


def _parts(command: str) -> list[_Part]:
    lexer = shlex.shlex(command, posix=True, punctuation_chars="();<>|&\n")
    lexer.whitespace = " \t\r"  # newlines separate commands: keep them as tokens
    lexer.whitespace_split = True
    lexer.commenters = ""  # `#` is judged below, where bash would see it
    try:
        tokens = list(lexer)
    except ValueError:  # unbalanced quotes
        raise Unscopable from None
    parts: list[tuple[list[str], bool]] = [([], False)]
    for token in tokens:
        if token in SEPARATORS:
            parts.append(([], token in PIPES))
        else:
            parts[-1][0].append(token)
    split = [_Part(*_without_redirections(tokens), piped) for tokens, piped in parts if tokens]
    if not split:
        raise Unscopable
    return split


def _without_redirections(words: list[str]) -> tuple[list[str], list[str]]:
    """The words of a simple command without its harmless redirections (`2>&1`, `>/dev/null`,
    `< input`), and the inputs; any other redirection, or stray punctuation, is unscopable."""
    kept: list[str] = []
    inputs: list[str] = []
    index = 0
    while index < len(words):
        word = words[index]
        target = words[index + 1] if index + 1 < len(words) else ""
        if word.startswith("#"):
            raise Unscopable
        if word in (">&", "<&"):
            if not _FD.fullmatch(target):
                raise Unscopable
            _drop_fd_number(kept)
            index += 2
        elif word in (">", ">>", "&>", "&>>", ">|"):
            if target not in _SAFE_REDIRECT_TARGETS:
                raise Unscopable
            _drop_fd_number(kept)
            index += 2
        elif word == "<":
            if not target or set(target) <= set("();<>|&\n"):
                raise Unscopable
            inputs.append(target)
            index += 2
        elif set(word) <= set("();<>|&"):
            raise Unscopable  # subshells, heredocs, odd operators
        else:
            kept.append(word)
            index += 1
    return kept, inputs


def _drop_fd_number(kept: list[str]) -> None:
    # `2>&1` lexes as `2`, `>&`, `1`: the `2` belongs to the redirection.
    if len(kept) > 1 and kept[-1].isdigit():
        kept.pop()


# --- one part --------------------------------------------------------------------------------


def _part_scope(part: _Part, places: _Places) -> str:
    """The prefix scope, or the exact scope of this part alone (its pipeline added above)."""
    words = part.words
    _vet(words)
    for word in words[1:]:
        places.check(word)
    for path in part.inputs:
        places.check_path(path)
    if words[0] == "cd":
        places.change_directory(words[1:])
    prefix = _read_only_prefix(words)
    return PREFIX + prefix if prefix else EXACT + part.text


def _read_only_prefix(words: list[str]) -> str | None:
    program = words[0]  # as written: `./cat` is not `cat`
    if program in READ_ONLY:
        return program
    if len(words) > 1 and words[1] in READ_ONLY_SUBCOMMANDS.get(program, ()):
        return f"{program} {words[1]}"
    return None


def _vet(words: Sequence[str]) -> None:
    """Raise `Unscopable` when the part runs something its words cannot vouch for."""
    if not words or not _PROGRAM.fullmatch(words[0]):
        raise Unscopable  # assignments, variables
    name, args = posixpath.basename(words[0]), words[1:]
    if name in NEVER_REMEMBERED:
        raise Unscopable
    unsafe = UNSAFE_ARGUMENTS.get(name, frozenset())
    if any(_gives(word, option) for word in args for option in unsafe):
        raise Unscopable
    if name in PROGRAM_RUNNERS:
        _vet(_skip_flags(args))
    elif name in INTERPRETERS or re.fullmatch(r"python3?\.\d+", name):
        _vet_script(args)
    elif args and args[0] in RUNNERS.get(name, ()):
        run = _skip_flags(args[1:])
        if run:
            _vet(run)


def _gives(word: str, option: str) -> bool:
    """Whether `word` gives `option`: as is or with `=value`; a short option also among others
    or with a glued value (`-ro`, `-o/x`); a long one also abbreviated (`--out`)."""
    if len(option) == 2:
        return word.startswith("-") and not word.startswith("--") and option[1] in word[1:]
    name = word.partition("=")[0]
    if option.startswith("--"):
        return len(name) > 2 and name.startswith("--") and option.startswith(name)
    return name == option  # find's one-dash words


def _vet_script(args: Sequence[str]) -> None:
    """`-m module` or a script path pass; inline code and a bare REPL do not."""
    for index, word in enumerate(args):
        if word in ("-c", "-e", "--eval", "-p", "--print", "-", "-i"):
            raise Unscopable
        if word == "-m":
            if index + 1 >= len(args):
                raise Unscopable
            return
        if not word.startswith("-"):
            return
    raise Unscopable


def _skip_flags(words: Sequence[str]) -> Sequence[str]:
    for index, word in enumerate(words):
        if not word.startswith("-"):
            return words[index:]
    return []


# --- paths -----------------------------------------------------------------------------------


class _Places:
    """Checks that a command's words name places inside the session roots, from every
    directory the command may be in by then."""

    def __init__(self, ctx: ToolContext, cwd: Path) -> None:
        self._ctx = ctx
        self._cwds = [cwd]
        self.check_path(".")

    def check(self, word: str) -> None:
        for path in _path_candidates(word):
            self.check_path(path)

    def check_path(self, text: str) -> None:
        if text.startswith("~"):
            if text != "~" and not text.startswith("~/"):
                raise Unscopable  # `~user`, `~+`, `~-`: another home, $PWD, $OLDPWD
            text = os.path.expanduser(text)
        for cwd in self._cwds:
            joined = cwd / text
            # The kernel resolves a symlink before the `..` after it; bash's `cd` folds first.
            for path in (joined, Path(os.path.normpath(joined))):
                try:
                    inside = self._ctx.inside_roots(path)
                except (OSError, RuntimeError):  # a symlink loop, an unreadable directory
                    inside = False
                if not inside:
                    raise Unscopable

    def change_directory(self, args: Sequence[str]) -> None:
        """`cd DIR` (checked already): later relative paths start there, or here if it fails."""
        if len(args) != 1 or args[0].startswith("-"):
            raise Unscopable  # `cd` alone goes home, `cd -` back to $OLDPWD
        target = os.path.expanduser(args[0])
        moved = [Path(os.path.normpath(cwd / target)) for cwd in self._cwds]
        self._cwds = list(dict.fromkeys([*self._cwds, *moved]))
        if len(self._cwds) > _MAX_DIRECTORIES:
            raise Unscopable


def _path_candidates(word: str) -> Iterator[str]:
    """What in an argument could name a file: the word unless it is an option, the value
    after `=`, and a value glued to a short option from wherever a path could begin."""
    if not word.startswith("-"):
        yield word
    if "=" in word:
        yield word.partition("=")[2]
    if word.startswith("-") and not word.startswith("--"):
        yield from (word[i:] for i in range(1, len(word)) if word[i] in "/~.")


__all__ = ["command_scopes", "describe_scopes"]
