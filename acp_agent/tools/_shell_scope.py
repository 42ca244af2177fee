"""What an "always allow" answer to a shell command covers: its program and subcommand.

`git status -s` has the scope `git status`: allowing it always allows `git status …`, not
`git push`. A compound command (`&&`, `||`, `|`, `;`, `&`, newlines) has one scope per
part, and memory allows it only when every part is allowed.

Scopes are narrow on purpose: narrower only means asking again. A command gets no scope at
all (it always asks) when a part cannot be judged from its words: quotes that do not close,
command or process substitution, backticks, subshells and braces, heredocs, redirection of
output to a file, leading `VAR=value` assignments, a program word with variables or glob
characters, a `#` word; and programs that run other commands or destroy data (shells,
`sudo`, `xargs`, `eval`, `rm`, `dd` …).
"""

from __future__ import annotations

import posixpath
import re
import shlex

SEPARATORS = frozenset({"&&", "||", "|", "|&", ";", "&", "\n", ";;"})
"""Tokens that end one simple command and start the next."""

NEVER_REMEMBERED = frozenset(
    {
        # run other commands, so their own name says nothing
        "sh", "bash", "zsh", "dash", "ksh", "fish", "eval", "exec", "source", ".",
        "sudo", "su", "doas", "env", "xargs", "nohup", "time", "nice", "timeout", "watch",
        "command", "builtin", "parallel", "ssh",
        # destroy data whatever their arguments
        "rm", "rmdir", "dd", "mkfs", "shred", "truncate", "chmod", "chown", "kill", "pkill",
        "killall", "reboot", "shutdown",
    }
)  # fmt: skip

SUBCOMMAND_TOOLS = frozenset(
    {
        "git", "npm", "pnpm", "yarn", "bun", "cargo", "go", "docker", "podman", "kubectl",
        "uv", "pip", "pip3", "poetry", "gh", "brew", "apt", "apt-get", "dotnet", "rustup",
        "conda", "helm", "terraform", "systemctl", "deno", "mix", "bundle", "composer",
    }
)  # fmt: skip
"""Programs whose second word is a subcommand; a flag there (`git -C x push`) hides it."""

PLAIN_PROGRAMS = frozenset(
    {
        "echo", "printf", "cat", "ls", "tree", "grep", "egrep", "fgrep", "rg", "head", "tail",
        "wc", "sort", "uniq", "cut", "tr", "nl", "pwd", "which", "type", "file", "stat", "du",
        "df", "diff", "cmp", "true", "false", "test", "date", "whoami", "uname", "basename",
        "dirname", "realpath", "readlink", "jq", "md5sum", "sha1sum", "sha256sum", "sleep",
    }
)  # fmt: skip
"""Programs without subcommands that only read or print: any arguments share one scope."""

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
"""Subcommands that run another command: the scope goes on to what they run."""

PROGRAM_RUNNERS = frozenset({"npx", "bunx", "uvx", "pipx"})
"""Programs whose first argument is the program they run."""

INTERPRETERS = frozenset(
    {"python", "python3", "node", "ruby", "perl", "php", "lua", "Rscript", "julia"}
)
"""Their scope includes the script or `-m module`; inline code (`-c`, `-e`) has none."""

DANGEROUS_ARGUMENTS = {
    "find": {"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprintf", "-fls"},
    "git": {"-c", "--exec-path", "--upload-pack", "--config-env"},
}

_PROGRAM = re.compile(r"[A-Za-z0-9_./+-][A-Za-z0-9_./+@:-]*")
_WORD = re.compile(r"[a-z][a-z0-9_:-]*")
_SAFE_REDIRECT_TARGETS = frozenset({"/dev/null"})
_FD = re.compile(r"\d+|-")
_SUBSTITUTION = ("$(", "`", "<(", ">(")


class Unscopable(Exception):
    """The command cannot be reduced to scopes; it must be asked about every time."""


def command_scopes(command: str) -> tuple[str, ...]:
    """The scopes of every part of `command`, or () when it has none (always ask)."""
    try:
        return tuple(_part_scope(part) for part in _parts(command))
    except Unscopable:
        return ()


def _parts(command: str) -> list[list[str]]:
    if any(marker in command for marker in _SUBSTITUTION):
        raise Unscopable
    lexer = shlex.shlex(command, posix=True, punctuation_chars="();<>|&\n")
    lexer.whitespace = " \t\r"  # newlines separate commands: keep them as tokens
    lexer.whitespace_split = True
    lexer.commenters = ""  # `#` is judged below, where bash would see it
    try:
        tokens = list(lexer)
    except ValueError:  # unbalanced quotes
        raise Unscopable from None
    parts: list[list[str]] = [[]]
    for token in tokens:
        if token in SEPARATORS:
            parts.append([])
        else:
            parts[-1].append(token)
    parts = [_without_redirections(part) for part in parts if part]
    if not parts:
        raise Unscopable
    return parts


def _without_redirections(words: list[str]) -> list[str]:
    """The words of a simple command without its harmless redirections (`2>&1`, `>/dev/null`,
    `< input`); any other redirection, or stray punctuation, makes it unscopable."""
    kept: list[str] = []
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
            index += 2
        elif set(word) <= set("();<>|&"):
            raise Unscopable  # subshells, heredocs, odd operators
        else:
            kept.append(word)
            index += 1
    return kept


def _drop_fd_number(kept: list[str]) -> None:
    # `2>&1` lexes as `2`, `>&`, `1`: the `2` belongs to the redirection.
    if len(kept) > 1 and kept[-1].isdigit():
        kept.pop()


def _part_scope(words: list[str]) -> str:
    return "shell:" + " ".join(_scope_words(words))


def _scope_words(words: list[str]) -> list[str]:
    if not words:
        raise Unscopable
    program = words[0]
    if not _PROGRAM.fullmatch(program):
        raise Unscopable  # assignments, variables, globs
    name = posixpath.basename(program)
    if name in NEVER_REMEMBERED:
        raise Unscopable
    if DANGEROUS_ARGUMENTS.get(name, set()).intersection(words[1:]):
        raise Unscopable
    rest = words[1:]
    if name in PROGRAM_RUNNERS:
        return [program, *_scope_words(_skip_flags(rest))]
    if name in INTERPRETERS or re.fullmatch(r"python3?\.\d+", name):
        return [program, *_script(rest)]
    if name in SUBCOMMAND_TOOLS:
        return [program, *_subcommand(name, rest)]
    if name in PLAIN_PROGRAMS:
        return [program]
    # Other programs: a plain word after the program narrows the scope (`make test`).
    if rest and _WORD.fullmatch(rest[0]):
        return [program, rest[0]]
    return [program]


def _subcommand(name: str, rest: list[str]) -> list[str]:
    if not rest:
        return []
    sub = rest[0]
    if not _WORD.fullmatch(sub):
        raise Unscopable  # a flag or path where the subcommand should be
    if sub in RUNNERS.get(name, ()):
        target = _skip_flags(rest[1:])
        return [sub, *_scope_words(target)] if target else [sub]
    return [sub]


def _script(rest: list[str]) -> list[str]:
    """`-m module` or the script path; inline code and a bare REPL have no scope."""
    for index, word in enumerate(rest):
        if word in ("-c", "-e", "--eval", "-p", "--print", "-", "-i"):
            raise Unscopable
        if word == "-m":
            if index + 1 >= len(rest):
                raise Unscopable
            return ["-m", rest[index + 1]]
        if not word.startswith("-"):
            return [word]
    raise Unscopable


def _skip_flags(words: list[str]) -> list[str]:
    for index, word in enumerate(words):
        if not word.startswith("-"):
            return words[index:]
    return []


__all__ = ["command_scopes"]
