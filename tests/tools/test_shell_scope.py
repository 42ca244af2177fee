from __future__ import annotations

import pytest

from acp_agent.tools._shell_scope import command_scopes


@pytest.mark.parametrize(
    ("command", "scopes"),
    [
        ("git status", ["git status"]),
        ("git status -s --porcelain", ["git status"]),
        ("git push origin main", ["git push"]),
        ("npm test", ["npm test"]),
        ("npm install lodash", ["npm install"]),
        ("npm run build -- --watch", ["npm run build"]),
        ("uv run pytest -q tests", ["uv run pytest"]),
        ("npx -y prettier --check .", ["npx prettier"]),
        ("python -m pytest -x", ["python -m pytest"]),
        ("python3 scripts/gen.py --fast", ["python3 scripts/gen.py"]),
        ("ls -la", ["ls"]),
        ("cat README.md", ["cat"]),
        ("make test", ["make test"]),
        ("./configure --prefix=/usr", ["./configure"]),
        ("git log 2>&1", ["git log"]),
        ("git diff > /dev/null 2>&1", ["git diff"]),
        ("wc -l < input.txt", ["wc"]),
        ("git status && git diff", ["git status", "git diff"]),
        ("ls | grep x; npm test", ["ls", "grep", "npm test"]),
        ("make || echo failed", ["make", "echo"]),
        ("make lint", ["make lint"]),
        ("grep -rn TODO src | head", ["grep", "head"]),
        ("sleep 1 &", ["sleep"]),
        ("git status\nnpm test", ["git status", "npm test"]),
        ('echo "a && b; rm -rf /"', ["echo"]),
    ],
)
def test_scopes_are_the_program_and_subcommand_of_every_part(
    command: str, scopes: list[str]
) -> None:
    assert command_scopes(command) == tuple(f"shell:{scope}" for scope in scopes)


@pytest.mark.parametrize(
    "command",
    [
        "echo $(rm -rf ~)",
        "echo `whoami`",
        "diff <(ls a) <(ls b)",
        "(cd x && make)",
        "{ ls; }",
        "ls > out.txt",
        "echo hi >> ~/.bashrc",
        "cat <<EOF",
        "FOO=1 npm test",
        "$CMD status",
        "*.sh",
        "echo 'unclosed",
        "bash -c 'git status'",
        "sudo git status",
        "xargs rm < list",
        "rm -rf build",
        "find . -name '*.o' -delete",
        "git -C other push",
        "git -c core.pager=evil log",
        "python -c 'import os'",
        "node -e 'process.exit()'",
        "uv run python -c 'x'",
        "npx rm -rf x",
        "python",
        'echo "#" ; rm x',
        "git status && rm -rf /",
        "",
    ],
)
def test_commands_that_cannot_be_judged_by_their_words_have_no_scope(command: str) -> None:
    assert command_scopes(command) == ()
