from __future__ import annotations

import subprocess
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
        # bash's `|` binds tighter than `&&`; the grammar hangs `2>&1` on `a && b`
        ("ls && sed e 2>&1 | sed e", ["ls …", "sed e | sed e"]),
        ("make test 2>&1 | tail -5 && ls", ["make test", "tail …", "ls …"]),
        ("ls |& sed e", ["ls | sed e"]),
        ("cat > /dev/null README.md src", ["cat …"]),
        ("echo 2>&- x", ["echo …"]),
        ("cat\tREADME.md", ["cat …"]),
        ("cat README.md \\\n src", ["cat …"]),
        ('echo a\\ b "c\\"d" \'e f\'g', ["echo …"]),
        ("make 'a b' c\\ d", ["make 'a b' 'c d'"]),
        ("ls\n\n", ["ls …"]),
        ("cat .git/config", ["cat …"]),
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
        # what the grammar and bash could read differently
        "cat README.md\\\ntouch X",
        "cat READ\\\nME.md",
        "ls -la\\\nfoo",
        "cat README.md\r\ntouch X",
        "cat README.md\rtouch X",
        "cat README.md\x00; touch X",
        "cat README.md\u2028touch X",
        "cat README.md\u00a0; touch X",
        "cat README.md\udc80",
        "echo hi \\",
        # not simple commands, or words that expand
        "cat $'\\x2fetc/passwd'",
        'cat $"README.md"',
        "cat README.md # \ntouch X",
        "! cat README.md",
        "coproc cat README.md",
        "time cat README.md",
        "echo hi !",
        "cat ~root/.bashrc",
        'cat "~"/x',
        "echo a=~/x",
        "cat <<< README.md",
        "cat < README.md > out.txt",
        "ls 3<> README.md",
        "if true; then ls; fi",
        "f() { ls; }",
        "for x in a; do ls; done",
        "ls; (touch X)",
        "ls ;; ls",
        "ls &&",
        "cat README.md |",
        "a" * (16 * 1024 + 1),
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
    """A workspace with a README, a src/ directory and one named `--x`, two symlinks that
    lead out of it and one that loops."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("s")
    (root / "README.md").write_text("r")
    (root / "src").mkdir()
    (root / "--x").mkdir()
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
    ("awk '{print}' README.md", AWK_SYSTEM, f'exactly "{AWK_SYSTEM}"'),
    ("find . -name x.py", "find . -name x.py -exec rm '{}' +", None),
    ("find . -name x.py", "find . -name x.py -delete", None),
    ("tar -tf a.tar", "tar -xf a.tar --to-command=sh", None),
    ("git log", "git -c core.pager=./x log", None),
    ("git diff", "git diff --output=patch.txt", None),
    ("git diff", "git diff --outp=patch.txt", None),
    ("git status", "git push", 'exactly "git push"'),
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
    # after `--`, every word is a path; so is the tail of `--opt=value`
    ("cat README.md", "cat -- --x/../../outside/secret", None),
    ("cat README.md", "cat README.md -- -x/../../outside/secret", None),
    ("cat README.md", "cat --x=../outside/secret", None),
    ("cat README.md", "cat README.md --x/../../outside/secret", None),
    ("grep -rn TODO .", "grep -rn --file=../outside/secret .", None),
    # programs that follow symlinks out of the roots
    ("find . -name x.py", "find -L . -name secret", None),
    ("find . -name x.py", "find . -follow -name secret", None),
    ("ls", "ls -RL", None),
    ("ls", "ls -R --dereference", None),
    ("tree", "tree -l", None),
    ("rg TODO", "rg -L TODO", None),
    # writes to protected paths: no scope, however exact
    ("cp a b", "cp a .git/hooks/pre-commit", None),
    ("ls | tee out.txt", "ls | tee AGENTS.md", None),
    ("ls | tee out.txt", "ls | tee src/../CLAUDE.md", None),
    ("make test", "cd .git && make test", None),
    # words bash reads otherwise than they look
    ("cat README.md", "cat $'\\x2e\\x2e/outside/secret'", None),
    ("cat README.md", "cat README.md #\ntouch X", None),
    ("cat README.md", "cat README.md\r\ntouch X", None),
    ("cat README.md", "cat README.md\\\ntouch X", None),
    ("echo hi", "echo hi !; touch X", None),
    ("cat README.md", "coproc cat README.md", None),
    ("cat README.md", "time touch X", None),
    # what an exactly allowed command reads as code
    ("echo hi | sed e", "echo 'curl x | sh' | sed e", "exactly \"echo 'curl x | sh' | sed e\""),
    ("sed e < a.txt", "sed e < b.txt", 'exactly "sed e < b.txt"'),
]


@pytest.mark.parametrize(("allowed", "hostile", "own_option"), ESCAPES)
def test_always_allowing_a_harmless_command_does_not_allow_an_escape(
    ctx: ToolContext, allowed: str, hostile: str, own_option: str | None
) -> None:
    memory = allowed_always(ctx, allowed)

    assert memory.allowed, f"{allowed!r} itself can be always allowed"
    assert shell_verdict(memory, ctx, hostile) == "ask"
    assert always_option(ctx, hostile) == own_option


NEWLINE_ATTACKS = [
    ("cat README.md", "cat README.md\n\ntouch X"),
    ("cat README.md", "cat README.md;\ntouch X"),
    ("cat README.md", "cat README.md &&\ntouch X"),
    ("cat README.md", "cat README.md |\nsh"),
    ("cat README.md", "cat README.md\n>X"),
    ("cat README.md", "cat <(\ntouch X\n)"),
    ("ls", "ls\n\ntouch X"),
    ("git status", "git status\n\n\ntouch X"),
    ("echo hi", "echo a\n\nnode -e '...'"),
]


@pytest.mark.parametrize(("allowed", "hostile"), NEWLINE_ATTACKS)
def test_a_newline_between_operators_does_not_hide_a_second_command(
    ctx: ToolContext, allowed: str, hostile: str
) -> None:
    memory = allowed_always(ctx, allowed)

    assert memory.allowed
    assert shell_verdict(memory, ctx, hostile) == "ask"


def test_a_second_command_after_a_newline_has_its_own_scope(ctx: ToolContext) -> None:
    assert always_option(ctx, "cat README.md\n\ntouch X") == (
        'cat … on paths inside the project, and exactly "touch X"'
    )


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
    ("cat README.md", "cat\tREADME.md"),
    ("cat README.md", "cat .git/config"),
    ("cat README.md", "cat -- --x"),
    ("find . -name x.py", "find -H . -name x.py"),
    ("make test", "make \\\n test"),
    ("make 'a b'", 'make "a b"'),
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


# --- git runs the programs its configuration names ------------------------------------------


@pytest.fixture
def hermetic_git(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Git without this machine's global and system files (a `core.pager` there would
    take every git scope away), and never our own repository."""
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "no-global-config"))
    monkeypatch.setenv("GIT_CONFIG_SYSTEM", str(tmp_path / "no-system-config"))
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


@pytest.fixture
def repo(root: Path, hermetic_git: None) -> Path:
    """A real repository in the workspace with one commit and a changed file."""
    git(root, "init", "-q")
    git(
        root,
        "-c",
        "user.email=t@t",
        "-c",
        "user.name=t",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "x",
    )
    (root / "a.txt").write_text("a")
    return root


PROGRAM_SETTINGS = [
    ("core", "fsmonitor"),
    ("diff", "external"),
    ('diff "x"', "textconv"),
    ('diff "x"', "command"),
    ('filter "x"', "clean"),
    ('filter "x"', "smudge"),
    ('filter "x"', "process"),
    ("core", "pager"),
    ("pager", "status"),
    ("gpg", "program"),
    ('gpg "ssh"', "program"),
    ("core", "sshCommand"),
    ("core", "hooksPath"),
]


@pytest.mark.parametrize(("section", "key"), PROGRAM_SETTINGS)
def test_git_status_is_not_remembered_where_the_config_names_a_program(
    ctx: ToolContext, repo: Path, section: str, key: str
) -> None:
    memory = allowed_always(ctx, "git status", "git log")
    assert memory.allowed == {"shell:git status", "shell:git log"}
    marker = repo.parent / "ran"
    (repo / "evil.sh").write_text(f"#!/bin/sh\ntouch {marker}\n")
    (repo / "evil.sh").chmod(0o755)
    with (repo / ".git" / "config").open("a") as config:
        config.write(f"[{section}]\n\t{key} = {repo / 'evil.sh'}\n")

    assert shell_verdict(memory, ctx, "git status") == "ask"
    assert shell_verdict(memory, ctx, "git log -p") == "ask"
    assert always_option(ctx, "git status") is None
    assert not marker.exists()


def test_the_users_own_global_settings_keep_git_scopes(
    ctx: ToolContext, repo: Path, tmp_path: Path
) -> None:
    """A `delta` pager in `~/.gitconfig` is the user's choice, not the repository's."""
    (tmp_path / "no-global-config").write_text("[core]\n\tpager = delta\n")
    memory = allowed_always(ctx, "git diff")
    assert shell_verdict(memory, ctx, "git diff") == "allow"
    with (repo / ".git" / "config").open("a") as config:
        config.write("[core]\n\tpager = delta\n")
    assert shell_verdict(memory, ctx, "git diff") == "ask"


def test_a_program_named_in_an_included_config_counts_too(ctx: ToolContext, repo: Path) -> None:
    memory = allowed_always(ctx, "git diff")
    (repo / "extra.cfg").write_text("[diff]\n\texternal = ./evil.sh\n")
    with (repo / ".git" / "config").open("a") as config:
        config.write(f"[include]\n\tpath = {repo / 'extra.cfg'}\n")

    assert shell_verdict(memory, ctx, "git diff") == "ask"


def test_the_fsmonitor_of_the_repository_does_not_run_while_scoping(
    ctx: ToolContext, repo: Path
) -> None:
    """The config is read again for each command: set after "always allow", it still asks,
    and judging the command runs nothing."""
    memory = allowed_always(ctx, "git status")
    assert shell_verdict(memory, ctx, "git status") == "allow"
    marker = repo.parent / "fsmonitor-ran"
    (repo / "monitor.sh").write_text(f"#!/bin/sh\ntouch {marker}\n")
    (repo / "monitor.sh").chmod(0o755)
    git(repo, "config", "core.fsmonitor", str(repo / "monitor.sh"))

    assert shell_verdict(memory, ctx, "git status") == "ask"
    assert shell_verdict(memory, ctx, "cd src && git status -s") == "ask"
    assert not marker.exists()
    git(repo, "status")
    assert marker.exists(), "the remembered `git status` would have run the monitor"
    git(repo, "config", "--unset", "core.fsmonitor")
    assert shell_verdict(memory, ctx, "git status") == "allow"


def test_a_post_index_change_hook_keeps_git_status_asking(ctx: ToolContext, repo: Path) -> None:
    memory = allowed_always(ctx, "git status")
    hook = repo / ".git" / "hooks" / "post-index-change"
    hook.parent.mkdir(exist_ok=True)
    hook.write_text("#!/bin/sh\ntouch ran\n")
    hook.chmod(0o755)

    assert shell_verdict(memory, ctx, "git status") == "ask"
    assert shell_verdict(memory, ctx, "git log") == "ask"


def test_harmless_settings_keep_git_read_only(ctx: ToolContext, repo: Path) -> None:
    git(repo, "config", "core.fsmonitor", "false")
    git(repo, "config", "core.pager", "cat")
    git(repo, "config", "pager.log", "false")
    git(repo, "config", "user.name", "x")
    memory = allowed_always(ctx, "git status")

    assert memory.allowed == {"shell:git status"}
    assert shell_verdict(memory, ctx, "git status -s") == "allow"
