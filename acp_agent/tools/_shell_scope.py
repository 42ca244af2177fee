"""What an "always allow" answer to a shell command covers, judged in the session's context.

A command has one scope per simple command in it, each once; memory allows a command only
when every one of its scopes was allowed. A scope is a plain string of one of two kinds:

- *prefix* (`shell:cat`, `shell:git status`): for programs whose arguments only read or
  print (`READ_ONLY`) and read-only subcommands (`READ_ONLY_SUBCOMMANDS`). Allowing
  `cat README.md` allows `cat` with other arguments that pass the checks below;
- *exact* (`shell-exact:make test`): for every other program, the part's words, with its
  `<` inputs and, when it reads a pipe, the pipeline before it (what it reads may be code:
  `echo … | sed e`). Allowing `make test` allows `make test` and nothing else.

The command is parsed with bash's grammar (tree-sitter-bash), and only what this module
fully understands gets scopes: the whole command must be simple commands joined by `&&`,
`||`, `;`, `|`, `|&`, `&` and newlines (a command put in the background runs with the same
words, so its scope is the same), and each simple command only words and harmless
redirections (`>/dev/null`, `2>&1`-style copies and closes of descriptors, `< file`).
A word is plain text, '…' or "…" without expansions, or these glued together, with quotes
removed and backslash escapes decoded as bash does: so the scopes name exactly the words
bash passes. Between the words only spaces and tabs may stand (newlines too between
commands). Anything else has no scope and asks every time: a parse error, a comment, a
subshell or compound command, a heredoc, an assignment, `$'…'`, a carriage return or
non-ASCII blank, a backslash-newline that joins two words, more than `MAX_PARTS` commands
or `MAX_COMMAND_BYTES` bytes.

A part gets a scope, and so can match one, only when its words also pass these checks in
the session's context; otherwise the whole command has no scope:

- every word (options too: after `--`, and on systems whose programs stop reading options
  at the first operand, they are paths), every value after `=` and every value glued to a
  short option (`-o/tmp/x`), after `~` and the cwd, lies inside the session roots, both as
  the kernel resolves it (symlinks, then `..`) and as bash's `cd` does (`..` first). After
  `cd DIR`, later relative paths must hold from DIR and from where the command started
  (the `cd` may fail);
- nothing can expand to words it does not show: no `$`, backticks, glob or brace
  characters, `!`, or `~` except a leading `~` or `~/`, outside quotes;
- only a read-only part (a prefix scope) may name a protected path (`protected`):
  `cat .git/config` has its scope, `cp x .git/hooks/pre-commit` or `tee AGENTS.md` none;
- a read-only git part only where the repository's configuration names no program for git
  to run (`_git_programs`), judged again for every command;
- no argument that writes, executes, follows symlinks out of the roots or reads beyond its
  words (`UNSAFE_ARGUMENTS`: `find -exec`, `find -L`, `sort -o`, `git -c`, `grep -R` …),
  no program that runs other commands, changes the shell for later parts or destroys data
  (`NEVER_REMEMBERED`: shells, `env`, `xargs`, `sudo`, `export`, `time`, `rm` …), and no
  inline code (`python -c`), behind a runner (`uv run`, `npx` …) too.

Narrow on purpose: narrower only means asking again.
"""

from __future__ import annotations

import functools
import itertools
import os
import posixpath
import re
import shlex
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ._git_programs import configured_programs
from .base import ToolContext
from .protected import protected_reason

if TYPE_CHECKING:
    from tree_sitter import Node, Parser

PREFIX = "shell:"
EXACT = "shell-exact:"

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
         "-fls", "-files0-from", "-L", "-follow"}  # -L, -follow: out of the roots
    ),
    "ls": frozenset({"-L", "--dereference"}),  # list what symlinks point to, outside too
    "sort": frozenset({"-o", "--output", "--compress-program", "--files0-from"}),
    "wc": frozenset({"--files0-from"}),  # reads the names in a file, unchecked
    "grep": frozenset({"-R", "--dereference-recursive"}),  # follows symlinks out of the roots
    "egrep": frozenset({"-R", "--dereference-recursive"}),
    "fgrep": frozenset({"-R", "--dereference-recursive"}),
    "rg": frozenset(
        {"--pre", "--pre-glob", "-z", "--search-zip", "--hostname-bin", "-L", "--follow"}
    ),
    "tree": frozenset({"-o", "-R", "-l"}),  # -R writes 00Tree.html files; -l follows links
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
"""Arguments that write, execute, follow symlinks out of the roots or read beyond the words:
a part with one has no scope.
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
_MAX_DIRECTORIES = 8
MAX_COMMAND_BYTES = 16 * 1024
"""Longer commands are not parsed: they ask every time (and cannot make scoping slow)."""
MAX_PARTS = 64
_MAX_NODES = 8 * MAX_PARTS
"""Statements, operators and sequences read before giving up: a bound on the work."""


class Unscopable(Exception):
    """The command cannot be reduced to scopes; it must be asked about every time."""


def command_scopes(command: str, ctx: ToolContext, cwd: str | None = None) -> tuple[str, ...]:
    """The scopes of the parts of `command`, each once, run from `cwd` (default: the session
    cwd); () when it has none (always ask)."""
    try:
        parts = _parts(command)
        places = _Places(ctx, ctx.resolve(cwd) if cwd else ctx.cwd)
        scopes: list[str] = []
        pipeline: list[str] = []  # the parts before this one that feed its input
        pipeline_scopes: list[str] = []
        for part in parts:
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
    """Plain words for what `scopes` cover, to follow "Always allow": `ls …, echo … on
    paths inside the project`, `exactly "make test"`, or both joined by ", and"."""
    prefixes = [f"{s.removeprefix(PREFIX)} …" for s in scopes if s.startswith(PREFIX)]
    exact = [f'"{s.removeprefix(EXACT)}"' for s in scopes if s.startswith(EXACT)]
    pieces = []
    if prefixes:
        pieces.append(f"{', '.join(prefixes)} on paths inside the project")
    if exact:
        listed = exact[0] if len(exact) == 1 else f"{', '.join(exact[:-1])} and {exact[-1]}"
        pieces.append(f"exactly {listed}")
    return ", and ".join(pieces)


# --- the parse tree --------------------------------------------------------------------------


@dataclass(frozen=True)
class _Part:
    """A simple command: its words, the files it reads with `<`, whether it reads a pipe."""

    words: list[str]
    inputs: list[str]
    piped: bool

    @property
    def text(self) -> str:
        return " ".join([shlex.join(self.words), *(f"< {shlex.quote(p)}" for p in self.inputs)])


@dataclass(frozen=True)
class _Trailing:
    """Redirections the grammar hung on a list, for the last simple command in it."""

    redirects: list[Node]


@functools.cache
def _parser() -> Parser:
    """Bash's grammar, loaded on first use (most sessions never remember a command)."""
    import tree_sitter_bash
    from tree_sitter import Language, Parser

    return Parser(Language(tree_sitter_bash.language()))


def _parts(command: str) -> list[_Part]:
    try:
        source = command.encode()  # tree-sitter's offsets count these bytes
    except UnicodeEncodeError:  # a lone surrogate: no command bash could be given
        raise Unscopable from None
    if len(source) > MAX_COMMAND_BYTES or b"\0" in source:
        raise Unscopable  # bash would cut the command at a NUL
    root = _parser().parse(source).root_node
    if root.type != "program" or root.has_error:
        raise Unscopable
    parts = _Tree(source).parts(root)
    if not parts:
        raise Unscopable
    return parts


_JOINERS = {
    "program": frozenset({";", "&"}),
    "list": frozenset({"&&", "||"}),
    "pipeline": frozenset({"|", "|&"}),
}
"""The operators each kind of sequence may hold between its statements."""
_SIMPLE = frozenset({"command", "redirected_statement"})
_PIPES = frozenset({"|", "|&"})
_WORDS = frozenset({"word", "string", "raw_string", "number", "concatenation"})
_WRITES_TO_NULL = frozenset({">", ">>", "&>", "&>>", ">|"})
_COPIES_FD = frozenset({">&", "<&"})
_CLOSES_FD = frozenset({">&-", "<&-"})
_OPERATOR_START = b"<>&|;"
_FD_TARGET = re.compile(r"\d+|-")

_UNQUOTED_REFUSED = frozenset("$`'\"*?[]{}!|&;()<> \t\r\n\\")
"""Characters bash would expand or split on outside quotes (a `\\` is decoded before)."""


class _Tree:
    """Reads the simple commands of a parse tree of `source`, accepting only what it fully
    understands: every byte of the command is either inside an accepted node or blank."""

    def __init__(self, source: bytes) -> None:
        self._source = source

    def parts(self, root: Node) -> list[_Part]:
        """The simple commands in source order. Whether one reads a pipe is told by the
        operator just before it: the grammar groups `a && b 2>&1 | c` as `(a && b 2>&1) | c`
        where bash runs `a && (b 2>&1 | c)`, but the operators stand where they stand."""
        parts: list[_Part] = []
        operator = ""
        stack: list[Node | _Trailing] = [root]
        for _ in range(_MAX_NODES):  # not recursive: `a && b && …` nests a list per operator
            if not stack:
                return parts
            item = stack.pop()
            if isinstance(item, _Trailing):
                self._redirect_all(item.redirects, parts[-1])
            elif not item.is_named:
                operator = item.type  # checked by `_sequence`
            elif item.type == "redirected_statement" and _body_type(item) in _JOINERS:
                # `a && b 2>&1`: the grammar puts the list in a redirected statement; for
                # bash the redirections belong to the last simple command, `b`
                body, *redirects = item.children
                self._glue(item.children)
                stack += [_Trailing(redirects), body]
            elif item.type in _SIMPLE:
                parts.append(self._simple(item, piped=operator in _PIPES))
                operator = ""
                if len(parts) > MAX_PARTS:
                    raise Unscopable
            elif item.type in _JOINERS:
                stack += reversed(self._sequence(item, _JOINERS[item.type]))
            else:
                raise Unscopable  # subshells, braces, loops, negation, functions, comments
        raise Unscopable  # more than `MAX_PARTS` parts could need

    def _sequence(self, node: Node, joiners: frozenset[str]) -> list[Node]:
        """The statements and operators of a program, list or pipeline, checking what lies
        between them: blanks only (newlines too: bash reads on after `&&`, `|` …)."""
        children = node.children
        self._blank(node.start_byte, children[0].start_byte if children else node.end_byte)
        for before, after in itertools.pairwise(children):
            gap = self._blank(before.end_byte, after.start_byte)
            if before.is_named and after.is_named and b"\n" not in gap:
                raise Unscopable  # two statements the grammar split where bash would not
        if children:
            self._blank(children[-1].end_byte, node.end_byte)
        if any(not child.is_named and child.type not in joiners for child in children):
            raise Unscopable
        return children

    def _blank(self, start: int, end: int, *, newlines: bool = True) -> bytes:
        """The blanks between two tokens, backslash-newlines removed as bash removes them;
        anything else there (a carriage return, a non-ASCII space, a `\\` that joins the two
        tokens into one word for bash) is unscopable."""
        raw = self._source[start:end]
        gap = raw.replace(b"\\\n", b"")
        allowed = b" \t\n" if newlines else b" \t"
        if (raw and not gap) or gap.strip(allowed):
            raise Unscopable
        return gap

    def _simple(self, node: Node, piped: bool) -> _Part:
        """The words and inputs of a simple command, with or without trailing redirections."""
        pieces = list(node.children)
        if node.type == "redirected_statement":
            if _body_type(node) != "command":
                raise Unscopable  # `{ …; } > x`, `( … ) 2>&1`
            body, *redirects = pieces
            pieces = [*body.children, *redirects]
        if not pieces:
            raise Unscopable
        self._blank(node.start_byte, pieces[0].start_byte, newlines=False)
        self._blank(pieces[-1].end_byte, node.end_byte, newlines=False)
        self._glue(pieces)
        part = _Part([], [], piped)
        for piece in pieces:
            if piece.type == "command_name" and len(piece.children) == 1:
                part.words.append(self._word(piece.children[0]))
            elif piece.type in _WORDS:
                part.words.append(self._word(piece))
            else:
                self._redirect_all([piece], part)
        if not part.words:
            raise Unscopable
        return part

    def _glue(self, pieces: Sequence[Node]) -> None:
        """Pieces of one simple command lie on one line, apart, unless the second starts
        with an operator (`ls>/dev/null`): for bash, `ls2>&1` is the word `ls2`."""
        for before, after in itertools.pairwise(pieces):
            gap = self._blank(before.end_byte, after.start_byte, newlines=False)
            if not gap and self._source[after.start_byte] not in _OPERATOR_START:
                raise Unscopable

    def _redirect_all(self, redirects: Sequence[Node], part: _Part) -> None:
        for redirect in redirects:
            if redirect.type != "file_redirect":
                raise Unscopable  # assignments, heredocs, herestrings, substitutions
            part.inputs.extend(self._redirect(redirect, part.words))

    def _redirect(self, node: Node, words: list[str]) -> list[str]:
        """The input a harmless redirection reads ([] for none); words after its target are
        the command's (`cat > /dev/null x`). Any other redirection is unscopable."""
        children = list(node.children)
        if len(children) > 1 and children[0].type == "file_descriptor":
            if children[0].end_byte != children[1].start_byte:
                raise Unscopable  # `2 >x`: the 2 is a word for bash
            children = children[1:]
        operator, *rest = children
        target: str | None = None
        previous = operator
        if operator.type not in _CLOSES_FD:
            if not rest:
                raise Unscopable
            previous, *rest = rest
            self._blank(operator.end_byte, previous.start_byte, newlines=False)
            target = self._word(previous)
        for word in rest:
            if not self._blank(previous.end_byte, word.start_byte, newlines=False):
                raise Unscopable
            words.append(self._word(word))
            previous = word
        if target is None:
            return []  # `2>&-`
        if operator.type in _COPIES_FD and _FD_TARGET.fullmatch(target):
            return []
        if operator.type in _WRITES_TO_NULL and target in _SAFE_REDIRECT_TARGETS:
            return []
        if operator.type == "<":
            return [target]
        raise Unscopable

    def _text(self, node: Node) -> str:
        try:
            return self._source[node.start_byte : node.end_byte].decode()
        except UnicodeDecodeError:  # a node boundary inside a character: not a word we know
            raise Unscopable from None

    def _word(self, node: Node) -> str:
        """The word bash passes for `node`, quotes removed and escapes decoded."""
        pieces = node.children if node.type == "concatenation" else [node]
        if node.type == "concatenation":
            for before, after in itertools.pairwise(pieces):
                if before.end_byte != after.start_byte:
                    raise Unscopable
        decoded: list[str] = []
        for index, piece in enumerate(pieces):
            text = self._text(piece)
            if piece.type in ("word", "number"):
                decoded.append(_unquoted(text, first=index == 0, alone=len(pieces) == 1))
            elif piece.type == "raw_string" and len(text) >= 2 and text[0] == text[-1] == "'":
                decoded.append(text[1:-1])
            elif piece.type == "string" and _only_text(piece) and len(text) >= 2:
                decoded.append(_double_quoted(text))
            else:
                raise Unscopable  # `$'…'`, `$"…"`, expansions, substitutions
        return "".join(decoded)


def _body_type(statement: Node) -> str | None:
    return statement.children[0].type if statement.children else None


def _only_text(string: Node) -> bool:
    return all(
        child.type == "string_content" or (not child.is_named and child.type == '"')
        for child in string.children
    )


def _unquoted(text: str, *, first: bool, alone: bool) -> str:
    """Bash's quote removal of unquoted text; unscopable where bash would expand it or
    where it starts a comment. A leading `~` stays (the paths check expands it)."""
    if first and text.startswith("#"):
        raise Unscopable
    if first and text.startswith("~") and not (text.startswith("~/") or (text == "~" and alone)):
        raise Unscopable  # `~user`, `~+`, `~-`, or `~` before quotes: not what it seems
    decoded: list[str] = []
    chars = iter(enumerate(text))
    for index, char in chars:
        if char == "\\":
            _, escaped = next(chars, (0, "\n"))
            if escaped == "\n":
                raise Unscopable  # a backslash-newline joins lines: the grammar splits them
            decoded.append(escaped)
        elif char in _UNQUOTED_REFUSED or not char.isprintable():
            raise Unscopable  # control characters, look-alike spaces and separators too
        elif char == "~" and (index or not first):
            raise Unscopable
        else:
            decoded.append(char)
    return "".join(decoded)


def _double_quoted(text: str) -> str:
    """The contents of "…" as bash passes them: `\\` escapes only `$`, `` ` ``, `"` and
    `\\`; unscopable when something would expand."""
    body = text[1:-1]
    decoded: list[str] = []
    index = 0
    while index < len(body):
        char = body[index]
        following = body[index + 1 : index + 2]
        if char == "\\" and following == "\n":
            raise Unscopable
        if char == "\\" and following in ("$", "`", '"', "\\"):
            decoded.append(following)
            index += 2
            continue
        if char in '$`"':
            raise Unscopable
        decoded.append(char)
        index += 1
    return "".join(decoded)


# --- one part --------------------------------------------------------------------------------


def _part_scope(part: _Part, places: _Places) -> str:
    """The prefix scope, or the exact scope of this part alone (its pipeline added above)."""
    words = part.words
    _vet(words)
    for word in words[1:]:
        places.check(word)
    for path in part.inputs:
        places.check_path(path)
    prefix = _read_only_prefix(words)
    if prefix is None and any(places.protected(word) for word in words[1:]):
        raise Unscopable  # it may write there: `cp x .git/hooks/pre-commit`, `tee AGENTS.md`
    if prefix is not None and words[0] == "git" and places.git_runs_programs():
        raise Unscopable
    if words[0] == "cd":
        places.change_directory(words[1:])
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
        self._git_checked: dict[Path, bool] = {}  # per command: config changes between two
        self.check_path(".")

    def check(self, word: str) -> None:
        for path in _path_candidates(word):
            self.check_path(path)

    def check_path(self, text: str) -> None:
        for path in self._forms(text):
            try:
                inside = self._ctx.inside_roots(path)
            except (OSError, RuntimeError):  # a symlink loop, an unreadable directory
                inside = False
            if not inside:
                raise Unscopable

    def protected(self, word: str) -> bool:
        """Whether a path in `word` is protected (`protected`), from any directory."""
        return any(
            protected_reason(path, self._ctx)
            for candidate in _path_candidates(word)
            for path in self._forms(candidate)
        )

    def git_runs_programs(self) -> bool:
        """Whether git's configuration, in any directory the part may run in, makes a
        read-only git command run a program (`_git_programs`)."""
        for cwd in self._cwds:
            if cwd not in self._git_checked:
                self._git_checked[cwd] = configured_programs(cwd)
        return any(self._git_checked[cwd] for cwd in self._cwds)

    def change_directory(self, args: Sequence[str]) -> None:
        """`cd DIR` (checked already): later relative paths start there, or here if it fails."""
        if len(args) != 1 or args[0].startswith(("-", "~")):
            raise Unscopable  # `cd` alone goes home, `cd -` back to $OLDPWD
        moved = [Path(os.path.normpath(cwd / args[0])) for cwd in self._cwds]
        self._cwds = list(dict.fromkeys([*self._cwds, *moved]))
        if len(self._cwds) > _MAX_DIRECTORIES:
            raise Unscopable

    def _forms(self, text: str) -> Iterator[Path]:
        """Where `text` may lead from each directory: as the kernel resolves it (symlinks,
        then `..`) and as bash's `cd` does (`..` first); a leading `~` both expanded (bash
        did) and not (it was quoted, or glued to an option)."""
        texts = [text, os.path.expanduser(text)] if text.startswith("~") else [text]
        if text.startswith("~") and text != "~" and not text.startswith("~/"):
            raise Unscopable  # `~user`, `~+`, `~-`: another home, $PWD, $OLDPWD
        for written in texts:
            for cwd in self._cwds:
                joined = cwd / written
                yield joined
                yield Path(os.path.normpath(joined))


def _path_candidates(word: str) -> Iterator[str]:
    """What in an argument could name a file: the whole word, options too (after `--`, or
    past the first operand where programs stop reading options, `-x/../..` is a path), the
    value after `=`, and a value glued to a short option from wherever a path could begin."""
    yield word
    if "=" in word:
        yield word.partition("=")[2]
    if word.startswith("-") and not word.startswith("--"):
        yield from (word[i:] for i in range(1, len(word)) if word[i] in "/~.")


__all__ = ["command_scopes", "describe_scopes"]
