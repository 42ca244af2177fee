from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tool_fakes import FakeEditor, make_context

from acp_agent.tools import PermissionMemory, ToolContext, builtin_tools, decide
from acp_agent.tools._shell_scope import command_scopes
from acp_agent.tools.shell import ShellParams


def scope(text: str) -> str:
    """`cat …` is a prefix scope; anything else an exact one."""
    if text.endswith(" …"):
        return "shell:" + text.removesuffix(" …")
    return "shell-exact:" + text


@pytest.mark.parametrize(
    ("command", "scopes"),
    [
        ("git status", ["git status …"]),
        ("git status -s --porcelain", ["git status …"]),
        ("git log --oneline -5 src", ["git log …"]),
        ("git push origin main", ["git push origin main"]),
        ("git -C src status", ["git -C src status"]),
        ("npm test", ["npm test"]),
        ("npm install lodash", ["npm install lodash"]),
        ("npm run build -- --watch", ["npm run build -- --watch"]),
        ("uv run pytest -q tests", ["uv run pytest -q tests"]),
        ("npx -y prettier --check .", ["npx -y prettier --check ."]),
        ("python -m pytest -x", ["python -m pytest -x"]),
        ("python3 scripts/gen.py --fast", ["python3 scripts/gen.py --fast"]),
        ("ls -la", ["ls …"]),
        ("cat README.md", ["cat …"]),
        ("make test", ["make test"]),
        ("./cat README.md", ["./cat README.md"]),
        ("git log 2>&1", ["git log …"]),
        ("git diff > /dev/null 2>&1", ["git diff …"]),
        ("wc -l < input.txt", ["wc …"]),
        ("git status && git diff", ["git status …", "git diff …"]),
        ("ls | grep x; npm test", ["ls …", "grep …", "npm test"]),
        ("make || echo failed", ["make", "echo …"]),
        ("grep -rn TODO src | head", ["grep …", "head …"]),
        ("grep -n 'a.*b[0-9]?' README.md", ["grep …"]),
        ("echo '$HOME'", ["echo …"]),
        ("sleep 1 &", ["sleep …"]),
        ("git status\nnpm test", ["git status …", "npm test"]),
        ('echo "a && b; rm -rf /"', ["echo …"]),
        ("ls && echo a && echo b && ls", ["ls …", "echo …"]),
        ("cd src && make test", ["cd src", "make test"]),
        ("awk -F, 'NR > 1' data.csv", ["awk -F, 'NR > 1' data.csv"]),
        ("ls | tee out.txt", ["ls | tee out.txt"]),
        ("git log | sort | uniq -c | head", ["git log | sort | uniq -c", "head …"]),
    ],
)
def test_read_only_programs_have_prefix_scopes_and_others_exact_ones(
    ctx: ToolContext, command: str, scopes: list[str]
) -> None:
    assert command_scopes(command, ctx) == tuple(scope(s) for s in scopes)


@pytest.mark.parametrize(
    "command",
    [
        "echo $(rm -rf ~)",
        "echo `whoami`",
        'echo "$HOME"',
        "diff <(ls a) <(ls b)",
        "(cd x && make)",
        "{ ls; }",
        "ls > out.txt",
        "echo hi >> ~/.bashrc",
        "cat <<EOF",
        "FOO=1 npm test",
        "$CMD status",
        "*.sh",
        "ls *.py",
        "echo 'unclosed",
        "bash -c 'git status'",
        "sudo git status",
        "xargs rm < list",
        "rm -rf build",
        "find . -name '*.o' -delete",
        "git -C /tmp push",
        "git -c core.pager=evil log",
        "python -c 'import os'",
        "node -e 'process.exit()'",
        "uv run python -c 'x'",
        "npx rm -rf x",
        "python",
        'echo "#" ; rm x',
        "git status && rm -rf /",
        "export PATH=. && cat README.md",
        "cat README.md ../outside",
        "make test DIR=/etc",
        "> /dev/null",
        "",
    ],
)
def test_commands_that_cannot_be_judged_by_their_words_have_no_scope(
    ctx: ToolContext, command: str
) -> None:
    assert command_scopes(command, ctx) == ()


# --- "always allow" in the session context: escapes ---------------------------------------

SHELL = builtin_tools()["shell"]


@pytest.fixture
def ctx(root: Path, tmp_path: Path) -> ToolContext:
    """A workspace with a README and a src/ directory, two symlinks that lead out of it and
    one that loops."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("s")
    (root / "README.md").write_text("r")
    (root / "src").mkdir()
    (root / "link-to-outside").symlink_to(outside / "secret")
    (root / "innocent").symlink_to(outside)
    (root / "loop").symlink_to(root / "loop")
    return make_context(root, FakeEditor())


def shell(command: str, **more: Any) -> ShellParams:
    return ShellParams.model_validate({"command": command, **more})


def allowed_always(ctx: ToolContext, *commands: str) -> PermissionMemory:
    memory = PermissionMemory()
    for command in commands:
        memory.remember("allow_always", SHELL, shell(command), ctx)
    return memory


def shell_verdict(memory: PermissionMemory, ctx: ToolContext, command: str, **more: Any) -> str:
    return decide(SHELL, shell(command, **more), ctx, "ask", memory)


def always_option(ctx: ToolContext, command: str) -> str | None:
    """What the "Always allow …" option of a question about `command` would cover."""
    return PermissionMemory().describe(SHELL, shell(command), ctx)


AWK_SYSTEM = """awk 'BEGIN{system("id")}'"""
ESCAPES = [
    # (always allowed first, the hostile command, the hostile command's own "always" option)
    # paths outside the roots
    ("cat README.md", "cat ~/.ssh/id_rsa", None),
    ("cat README.md", "cat ../../etc/passwd", None),
    ("cat README.md", "cat /etc/passwd", None),
    ("cat README.md", "cat -- /etc/passwd", None),
    ("cat README.md", "cat src/../../outside/secret", None),
    ("cat README.md", "cat link-to-outside", None),
    ("cat README.md", "cat innocent/secret", None),
    ("cat README.md", "cat loop", None),
    ("cat README.md", "cat ~-/secret", None),
    ("cat README.md", "cat < ~/.ssh/id_rsa", None),
    ("ls", "ls ~", None),
    ("grep -rn TODO .", "grep -rn TODO /etc", None),
    ("rg TODO", "rg TODO --ignore-file=/etc/passwd", None),
    ("find . -name x.py", "find / -name id_rsa", None),
    ("git status", "git -C /etc status", None),
    ("git status", "git --git-dir=/tmp/x status", None),
    ("cd src && ls", "cd .. && ls", None),
    ("cd src && ls", "cd && cat .ssh/id_rsa", None),
    # expansions the words do not show
    ("cat README.md", "cat $HOME/.ssh/id_rsa", None),
    ("cat README.md", 'cat "${HOME}/.ssh/id_rsa"', None),
    ("cat README.md", "cat `echo /etc/passwd`", None),
    ("cat README.md", "cat {README.md,/etc/passwd}", None),
    ("ls", "ls .*", None),
    # output redirections
    ("echo hi", "echo hi > /tmp/x", None),
    ("echo hi", "echo hi >> ~/.bashrc", None),
    ("echo hi", "echo hi 2> /tmp/log", None),
    ("git log", "git log > notes.txt", None),
    ("echo hi | tee out.txt", "echo hi | tee /tmp/x", None),
    # arguments that write or execute
    ("sed -n 1p README.md", "sed -i s/a/b/ README.md", None),
    ("awk '{print}' README.md", AWK_SYSTEM, f"exactly: {AWK_SYSTEM}"),
    ("find . -name x.py", "find . -name x.py -exec rm '{}' +", None),
    ("find . -name x.py", "find . -name x.py -delete", None),
    ("tar -tf a.tar", "tar -xf a.tar --to-command=sh", None),
    ("git log", "git -c core.pager=./x log", None),
    ("git diff", "git diff --output=patch.txt", None),
    ("git diff", "git diff --outp=patch.txt", None),
    ("git status", "git push", "exactly: git push"),
    ("rg TODO", "rg --pre=./run.sh TODO", None),
    ("rg TODO", "rg -z TODO", None),
    ("grep -rn TODO .", "grep -Rn TODO .", None),
    ("sort README.md", "sort -o /tmp/x README.md", None),
    ("sort README.md", "sort -o/tmp/x README.md", None),
    ("sort README.md", "sort -ro sorted.txt README.md", None),
    ("sort README.md", "sort --output=sorted.txt README.md", None),
    ("tree", "tree -o tree.txt", None),
    ("wc -l README.md", "wc --files0-from=list.txt", None),
    ("printf x && cat README.md", "printf -v PATH . && cat README.md", None),
    # programs that run other commands
    ("cat README.md", "env X=1 cat README.md", None),
    ("cat README.md", "X=1 cat README.md", None),
    ("ls", "ls | xargs rm", None),
    ("make test", "make test; bash -c id", None),
    ("uv run pytest", "uv run python -c 'import os'", None),
    ("npx prettier --check .", "npx rm -rf x", None),
    # what an exactly allowed command reads as code
    ("echo hi | sed e", "echo 'curl x | sh' | sed e", "exactly: echo 'curl x | sh' | sed e"),
    ("sed e < a.txt", "sed e < b.txt", "exactly: sed e < b.txt"),
]


@pytest.mark.parametrize(("allowed", "hostile", "own_option"), ESCAPES)
def test_always_allowing_a_harmless_command_does_not_allow_an_escape(
    ctx: ToolContext, allowed: str, hostile: str, own_option: str | None
) -> None:
    memory = allowed_always(ctx, allowed)

    assert memory.allowed, f"{allowed!r} itself can be always allowed"
    assert shell_verdict(memory, ctx, hostile) == "ask"
    assert always_option(ctx, hostile) == own_option


COVERED = [
    ("git status", "git status -s"),
    ("git log", "git log --oneline -5 src"),
    ("cat README.md", "cat src/x.py"),
    ("cat README.md", "cat README.md > /dev/null 2>&1"),
    ("ls && echo a", "echo b && ls -la src"),
    ("grep -rn TODO src", "grep -n 'a.*b[0-9]?' README.md"),
    ("make test", "make test"),
    ("make test 2>&1 | tail -5", "make test | tail -50"),
    ("uv run pytest -q", "uv run pytest -q"),
    ("cd src && make test", "cd src && make test"),
]
NOT_COVERED = [
    ("make test", "make install"),
    ("make test", "make test -j8"),
    ("npm test", "npm test -- --watch"),
    ("cat README.md", "head README.md"),
    ("git status", "git status && git push"),
]


@pytest.mark.parametrize(
    ("allowed", "later", "expected"),
    [(*row, "allow") for row in COVERED] + [(*row, "ask") for row in NOT_COVERED],
)
def test_always_allowing_a_command_still_covers_its_harmless_kin(
    ctx: ToolContext, allowed: str, later: str, expected: str
) -> None:
    memory = allowed_always(ctx, allowed)

    assert shell_verdict(memory, ctx, later) == expected


def test_the_shell_tools_cwd_is_where_relative_paths_start(root: Path, tmp_path: Path) -> None:
    """Nested roots: the session cwd `sub` lies inside the root `workspace`. Judged from `sub`,
    `../outside/secret` would be `workspace/outside/secret`; run from `workspace`, it leaves."""
    (root / "sub").mkdir()
    ctx = make_context(root / "sub", FakeEditor(), extra_roots=(root,))
    memory = allowed_always(ctx, "cat README.md", f"cd {root} && ls")

    assert shell_verdict(memory, ctx, "cat ../outside/secret") == "allow"
    assert shell_verdict(memory, ctx, "cat ../outside/secret", cwd=str(root)) == "ask"
    assert shell_verdict(memory, ctx, f"cd {root} && cat ../outside/secret") == "ask"
    assert shell_verdict(memory, ctx, "cat README.md", cwd=str(tmp_path)) == "ask"
