"""Server specs from the config file, merged with a session's; the config's MCP keys."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from acp_agent.config import ConfigError, load_config_file
from acp_agent.mcp_bridge import McpServerSpec, merge_specs, specs_from_config

CONFIG = """
[providers.echo]
type = "echo"

[mcp_servers.files]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-filesystem", "."]
env = { FS_TOKEN = "abc" }

[mcp_servers.web]
type = "http"
url = "https://mcp.example.com/mcp"
headers = { Authorization = "Bearer xyz" }

[mcp_servers.old]
type = "sse"
url = "http://127.0.0.1:9000/sse"
enabled = false
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_the_configs_enabled_servers_become_specs(tmp_path: Path) -> None:
    config = load_config_file(write(tmp_path, "mcp_connect_timeout = 2\n" + CONFIG))
    assert config.mcp_connect_timeout == 2.0 and config.mcp_allow_sampling is False
    assert specs_from_config(config) == [
        McpServerSpec(
            "files",
            command="npx",
            args=("-y", "@modelcontextprotocol/server-filesystem", "."),
            env={"FS_TOKEN": "abc"},
        ),
        McpServerSpec(
            "web",
            transport="http",
            url="https://mcp.example.com/mcp",
            headers={"Authorization": "Bearer xyz"},
        ),
    ]


def test_without_mcp_keys_there_are_no_servers_and_the_defaults_hold(tmp_path: Path) -> None:
    config = load_config_file(write(tmp_path, '[providers.echo]\ntype = "echo"\n'))
    assert specs_from_config(config) == []
    assert (config.mcp_connect_timeout, config.mcp_allow_sampling) == (5.0, False)


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('[mcp_servers.x]\ntype = "http"\n', "mcp_servers.x: an http server needs url"),
        ("[mcp_servers.x]\nargs = []\n", "mcp_servers.x: a stdio server needs command"),
        (
            '[mcp_servers.x]\ncommand = "a"\nurl = "http://b"\n',
            "mcp_servers.x: url and headers apply to http and sse servers only",
        ),
        (
            '[mcp_servers.x]\ntype = "sse"\nurl = "http://b"\ncommand = "a"\n',
            "mcp_servers.x: command, args and env apply to stdio servers only",
        ),
        ('[mcp_servers.x]\ncommand = "a"\ncwd = "/"\n', "mcp_servers.x.cwd: unknown key"),
        ('[mcp_servers.x]\ntype = "ws"\nurl = "ws://b"\n', "mcp_servers.x.type"),
        ("mcp_connect_timeout = 0\n", "mcp_connect_timeout: Input should be greater than 0"),
        ('mcp_allow_sampling = "yes"\n', "mcp_allow_sampling: Input should be a valid boolean"),
    ],
)
def test_bad_mcp_settings_are_named_by_key(tmp_path: Path, table: str, message: str) -> None:
    text = '[providers.echo]\ntype = "echo"\n' + table
    if not table.startswith("["):
        text = table + text
    with pytest.raises(ConfigError) as error:
        load_config_file(write(tmp_path, text))
    assert message in str(error.value)


def test_a_sessions_server_wins_over_the_configs_of_the_same_name() -> None:
    configured = [McpServerSpec("a", command="a1"), McpServerSpec("b", command="b1")]
    given = [McpServerSpec("c", transport="http", url="http://c"), McpServerSpec("a", command="a2")]
    assert merge_specs(configured, given) == [
        McpServerSpec("a", command="a2"),
        McpServerSpec("b", command="b1"),
        McpServerSpec("c", transport="http", url="http://c"),
    ]


def test_only_a_server_the_config_marks_trusted_is_trusted(tmp_path: Path) -> None:
    text = CONFIG.replace(
        'env = { FS_TOKEN = "abc" }', 'env = { FS_TOKEN = "abc" }\ntrusted = true'
    )
    config = load_config_file(write(tmp_path, text))
    assert [(spec.name, spec.trusted) for spec in specs_from_config(config)] == [
        ("files", True),
        ("web", False),
    ]
    with pytest.raises(ConfigError, match=r"mcp_servers\.x\.trusted: Input should be a valid bool"):
        load_config_file(write(tmp_path, CONFIG + '[mcp_servers.x]\ncommand = "a"\ntrusted = 1\n'))


def test_an_editors_server_is_trusted_only_as_the_trusted_entry_it_replaces_at_its_place() -> None:
    configured = [
        McpServerSpec("files", command="npx", args=("fs",), trusted=True),
        McpServerSpec("web", transport="http", url="https://h/mcp", trusted=True),
        McpServerSpec("plain", command="plain"),
    ]
    given = [
        # The same command line, other env: trusted, with the editor's env.
        McpServerSpec("files", command="npx", args=("fs",), env={"T": "1"}),
        # A trusted name at another URL (a project's settings borrowing it): not trusted.
        McpServerSpec("web", transport="http", url="https://evil/mcp"),
        McpServerSpec("plain", command="plain"),
        # Whatever the editor says, it cannot trust a server itself.
        McpServerSpec("new", command="new", trusted=True),
    ]
    merged = merge_specs(configured, given)
    assert [(spec.name, spec.trusted) for spec in merged] == [
        ("files", True),
        ("web", False),
        ("plain", False),
        ("new", False),
    ]
    assert merged[0].env == {"T": "1"} and merged[1].url == "https://evil/mcp"
    other_args = merge_specs(configured, [McpServerSpec("files", command="npx", args=("x",))])
    assert not other_args[0].trusted


def test_the_commented_mcp_server_example_of_the_shipped_config_is_valid(tmp_path: Path) -> None:
    text = (Path(__file__).parents[2] / "configs" / "echo.toml").read_text(encoding="utf-8")
    start = text.index("# [mcp_servers.files]")
    block, rest = text[start:].split("\n\n", 1)
    uncommented = "\n".join(line.removeprefix("# ") for line in block.splitlines())
    config = load_config_file(write(tmp_path, f"{rest}\n{uncommented}\n"))
    [spec] = specs_from_config(config)
    assert (spec.name, spec.command, spec.trusted) == ("files", "npx", False)


def test_a_spec_says_what_is_wrong_with_it() -> None:
    assert McpServerSpec("ok", command="x").problem() is None
    assert McpServerSpec("", command="x").problem() == "a server needs a name"
    assert McpServerSpec("w", transport="sse", url="ws://x").problem() == (
        "w: 'ws://x' is not an http(s) URL"
    )
    described = McpServerSpec("w", transport="http", url="https://h/mcp", headers={"A": "s"})
    assert described.describe() == "http https://h/mcp"


def test_importing_the_bridge_does_not_import_the_mcp_sdk() -> None:
    code = (
        "import sys, acp_agent.mcp_bridge, acp_agent.sessions.mcp_tools\n"
        "loaded = [m for m in sys.modules if m == 'mcp' or m.startswith(('mcp.', 'mcp_types'))]\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_server_in_the_editor_needs_its_id_and_borrows_no_trust() -> None:
    assert McpServerSpec("e", transport="acp").problem() == "e: an acp server needs a serverId"
    editor = McpServerSpec("files", transport="acp", server_id="files:1")
    assert editor.problem() is None and editor.describe() == "in the editor, id files:1"
    assert not editor.same_place(McpServerSpec("files", transport="acp", server_id="files:2"))
    configured = [McpServerSpec("files", command="npx", args=("fs",), trusted=True)]
    [merged] = merge_specs(configured, [editor])
    assert (merged.transport, merged.server_id, merged.trusted) == ("acp", "files:1", False)
