"""Model choice end to end: one agent process, an OpenAI-compatible and an Anthropic provider.

The agent reads a config file naming two fake servers (`fake_llm.py` as provider `oa`,
`fake_anthropic.py` as provider `an`), is driven by the `agent-client-protocol` SDK client,
and gets no real API key: only the two test keys, under variables the config names.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import RequestError
from acp.schema import (
    AgentThoughtChunk,
    ConfigOptionUpdate,
    SessionConfigOptionSelect,
    UsageUpdate,
)
from e2e_support import HELLO_TEXT
from fake_anthropic import FakeAnthropic, anthropic_reply
from fake_llm import FakeLLM, fake_reply
from test_e2e_sdk_client import RecordingClient, prompt, running_agent

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]

OA_KEY_VAR = "E2E_OA_KEY"
AN_KEY_VAR = "E2E_AN_KEY"
OA_KEY = "test-key-openai-compatible"
AN_KEY = "test-key-anthropic"

GPT = "oa/gpt-fake"
CLAUDE = "an/claude-fake"
"""Reasons (thought levels) and has prices."""
PLAIN = "an/claude-plain"
"""Neither reasons nor has prices."""
CONTEXT = {GPT: 64_000, CLAUDE: 200_000, PLAIN: 100_000}
PRICES = {GPT: (2.0, 8.0), CLAUDE: (3.0, 15.0)}
"""US dollars per million input and output tokens."""
THINKING_BUDGET = {"low": 2048, "medium": 8192, "high": 24576}
"""What the agent asks Anthropic for at each thought level (`_anthropic_mapping`)."""

TIMEOUT = 10


# --- fixtures -----------------------------------------------------------------------------


@pytest.fixture
def fake_anthropic() -> Iterator[FakeAnthropic]:
    with FakeAnthropic(api_key=AN_KEY) as fake:
        yield fake


@pytest.fixture
def switch_env(tmp_path: Path, fake_llm: FakeLLM, fake_anthropic: FakeAnthropic) -> dict[str, str]:
    """The agent's whole environment: the config file, two test keys, no vendor variables."""
    config = tmp_path / "acp-agent.toml"
    config.write_text(
        f"""\
default_model = "{GPT}"

[providers.oa]
type = "openai-compatible"
base_url = "{fake_llm.base_url}"
api_key_env = "{OA_KEY_VAR}"

[[providers.oa.models]]
id = "gpt-fake"
name = "GPT Fake"
context_window = {CONTEXT[GPT]}
prices = {{ input = {PRICES[GPT][0]}, output = {PRICES[GPT][1]} }}

[providers.an]
type = "anthropic"
base_url = "{fake_anthropic.base_url}"
api_key_env = "{AN_KEY_VAR}"

[[providers.an.models]]
id = "claude-fake"
name = "Claude Fake"
context_window = {CONTEXT[CLAUDE]}
reasoning = true
prices = {{ input = {PRICES[CLAUDE][0]}, output = {PRICES[CLAUDE][1]} }}

[[providers.an.models]]
id = "claude-plain"
context_window = {CONTEXT[PLAIN]}
""",
        encoding="utf-8",
    )
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return {
        "ACP_AGENT_CONFIG": str(config),
        OA_KEY_VAR: OA_KEY,
        AN_KEY_VAR: AN_KEY,
        "PATH": "/usr/bin:/bin",
        "HOME": str(home),
    }


# --- helpers ------------------------------------------------------------------------------


async def raw_request(conn: Any, method: str, params: dict[str, Any]) -> Any:
    """A request the SDK has no method for (legacy `session/set_model`), answered raw."""
    return await asyncio.wait_for(conn._conn.send_request(method, params), TIMEOUT)


async def ask(conn: Any, session_id: str, text: str) -> str:
    """Prompt and wait; the stop reason."""
    result = await asyncio.wait_for(
        conn.prompt(session_id=session_id, prompt=prompt(text)), TIMEOUT
    )
    return str(result.stop_reason)


async def choose(conn: Any, session_id: str, config_id: str, value: str) -> list[Any]:
    response = await asyncio.wait_for(
        conn.set_config_option(config_id=config_id, session_id=session_id, value=value), TIMEOUT
    )
    return list(response.config_options)


def option(options: list[Any] | None, option_id: str) -> SessionConfigOptionSelect | None:
    found = [o for o in options or [] if o.id == option_id]
    assert len(found) <= 1, f"option {option_id!r} listed twice"
    return found[0] if found else None


def model_groups(select: SessionConfigOptionSelect) -> dict[str, list[str]]:
    return {group.group: [o.value for o in group.options] for group in select.options}


def anthropic_turns(body: dict[str, Any]) -> list[tuple[str, str]]:
    """(role, text) per message; thinking and cache markers left out."""
    turns = []
    for message in body["messages"]:
        content = message["content"]
        if isinstance(content, str):
            text = content
        else:
            text = "".join(b.get("text", "") for b in content if b["type"] == "text")
        turns.append((message["role"], text))
    return turns


def openai_turns(body: dict[str, Any]) -> list[tuple[str, str]]:
    """(role, text) per message after the system prompt."""
    turns = []
    for message in body["messages"][1:]:
        content = message.get("content") or ""
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content if p.get("type") == "text")
        turns.append((message["role"], content))
    return turns


def usage_updates(client: RecordingClient, session_id: str) -> list[UsageUpdate]:
    return [u for u in client.of(session_id) if isinstance(u, UsageUpdate)]


def config_updates(client: RecordingClient, session_id: str) -> list[ConfigOptionUpdate]:
    return [u for u in client.of(session_id) if isinstance(u, ConfigOptionUpdate)]


def assert_keys(fake_llm: FakeLLM, fake_anthropic: FakeAnthropic) -> None:
    """Each server saw its own test key only."""
    assert all(e.headers.get("authorization") == f"Bearer {OA_KEY}" for e in fake_llm.exchanges)
    assert all(e.api_key == AN_KEY for e in fake_anthropic.exchanges)


# --- tests --------------------------------------------------------------------------------


async def test_session_new_offers_every_configured_model_grouped_by_provider(
    fake_llm: FakeLLM,
    fake_anthropic: FakeAnthropic,
    switch_env: dict[str, str],
    agent_stderr: Path,
    workspace: Path,
) -> None:
    async with running_agent(switch_env, agent_stderr, workspace) as (conn, _, _):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        raw = await raw_request(conn, "session/new", {"cwd": str(workspace), "mcpServers": []})

    model = option(session.config_options, "model")
    assert model is not None
    assert model.category == "model"
    assert model.current_value == GPT
    assert model_groups(model) == {"oa": [GPT], "an": [CLAUDE, PLAIN]}
    names = {o.value: o.name for group in model.options for o in group.options}
    assert names == {GPT: "GPT Fake", CLAUDE: "Claude Fake", PLAIN: "claude-plain"}
    assert option(session.config_options, "thought_level") is None, "gpt-fake does not reason"
    legacy = raw["models"]
    assert legacy["currentModelId"] == GPT
    assert [m["modelId"] for m in legacy["availableModels"]] == [GPT, CLAUDE, PLAIN]
    assert fake_llm.exchanges == [] and fake_anthropic.exchanges == []


async def test_a_switch_sends_the_next_prompt_to_the_other_vendor_with_the_whole_conversation(
    fake_llm: FakeLLM,
    fake_anthropic: FakeAnthropic,
    switch_env: dict[str, str],
    agent_stderr: Path,
    workspace: Path,
) -> None:
    async with running_agent(switch_env, agent_stderr, workspace) as (conn, _, client):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        sid = session.session_id

        assert await ask(conn, sid, "first question") == "end_turn"
        assert len(fake_llm.requests) == 1 and fake_anthropic.requests == []
        assert client.text(sid) == fake_reply("first question")

        options = await choose(conn, sid, "model", PLAIN)
        assert option(options, "model").current_value == PLAIN
        assert await ask(conn, sid, "second question") == "end_turn"
        assert len(fake_llm.requests) == 1, "the OpenAI server must not hear of the 2nd prompt"
        [to_anthropic] = fake_anthropic.requests
        assert client.text(sid).endswith(anthropic_reply("second question"))

        await choose(conn, sid, "model", GPT)
        assert await ask(conn, sid, "third question") == "end_turn"
        assert len(fake_anthropic.requests) == 1
        assert client.text(sid).endswith(fake_reply("third question"))

    assert to_anthropic["model"] == "claude-plain"
    assert to_anthropic["stream"] is True
    assert "thinking" not in to_anthropic
    assert str(workspace) in json.dumps(to_anthropic["system"])
    assert anthropic_turns(to_anthropic) == [
        ("user", "first question"),
        ("assistant", fake_reply("first question")),
        ("user", "second question"),
    ]
    _, back = fake_llm.requests
    assert back["model"] == "gpt-fake"
    assert openai_turns(back) == [
        ("user", "first question"),
        ("assistant", fake_reply("first question")),
        ("user", "second question"),
        ("assistant", anthropic_reply("second question")),
        ("user", "third question"),
    ]
    assert_keys(fake_llm, fake_anthropic)


async def test_tool_calls_made_with_one_vendor_are_carried_to_the_other(
    fake_llm: FakeLLM,
    fake_anthropic: FakeAnthropic,
    switch_env: dict[str, str],
    agent_stderr: Path,
    workspace: Path,
) -> None:
    read_hello = '[[tool read_file {"path": "hello.txt"}]]'
    async with running_agent(switch_env, agent_stderr, workspace) as (conn, _, client):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        sid = session.session_id
        assert await ask(conn, sid, f"read it {read_hello}") == "end_turn"
        await choose(conn, sid, "model", CLAUDE)
        assert await ask(conn, sid, f"again {read_hello}") == "end_turn"
        await choose(conn, sid, "model", GPT)
        assert await ask(conn, sid, "thanks") == "end_turn"

    assert len(client.reads) == 2
    assert [e.status for e in fake_anthropic.exchanges] == [200, 200]
    assert [e.status for e in fake_llm.exchanges] == [200, 200, 200]
    # The Anthropic calls carried OpenAI's call and result as tool_use / tool_result blocks.
    first, second = fake_anthropic.requests
    blocks = [b["type"] for m in first["messages"] for b in m["content"]]
    assert blocks[:3] == ["text", "tool_use", "tool_result"]
    result = first["messages"][2]["content"][0]
    assert HELLO_TEXT.splitlines()[0] in json.dumps(result)
    assert second["messages"][-2]["content"][0]["type"] == "thinking"
    assert second["thinking"]["type"] == "enabled"
    # ... and OpenAI then got Anthropic's call and result as tool_calls / tool messages.
    last = fake_llm.requests[-1]
    roles = [m["role"] for m in last["messages"]]
    one_tool_turn = ["user", "assistant", "tool", "assistant"]
    assert roles == ["system", *one_tool_turn, *one_tool_turn, "user"]
    anthropic_call = last["messages"][6]["tool_calls"][0]
    assert last["messages"][7]["tool_call_id"] == anthropic_call["id"]
    assert "Tool result: " in client.text(sid)
    assert_keys(fake_llm, fake_anthropic)


async def test_legacy_set_model_switches_the_model_and_announces_it(
    fake_llm: FakeLLM,
    fake_anthropic: FakeAnthropic,
    switch_env: dict[str, str],
    agent_stderr: Path,
    workspace: Path,
) -> None:
    async with running_agent(switch_env, agent_stderr, workspace) as (conn, _, client):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        sid = session.session_id
        answer = await raw_request(conn, "session/set_model", {"sessionId": sid, "modelId": PLAIN})
        await client.wait_until(lambda: config_updates(client, sid))
        assert await ask(conn, sid, "via legacy") == "end_turn"
        await raw_request(conn, "session/set_model", {"sessionId": sid, "modelId": GPT})
        assert await ask(conn, sid, "and back") == "end_turn"
        with pytest.raises(RequestError) as unknown:
            await raw_request(conn, "session/set_model", {"sessionId": sid, "modelId": "an/nope"})

    assert answer == {}
    [update, *_] = config_updates(client, sid)
    assert option(update.config_options, "model").current_value == PLAIN
    assert [anthropic_turns(b)[-1] for b in fake_anthropic.requests] == [("user", "via legacy")]
    assert [openai_turns(b)[-1] for b in fake_llm.requests] == [("user", "and back")]
    assert unknown.value.code == -32602
    assert "an/nope" in str(unknown.value)


async def test_the_model_command_switches_without_a_model_call_and_announces_the_choice(
    fake_llm: FakeLLM,
    fake_anthropic: FakeAnthropic,
    switch_env: dict[str, str],
    agent_stderr: Path,
    workspace: Path,
) -> None:
    async with running_agent(switch_env, agent_stderr, workspace) as (conn, _, client):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        sid = session.session_id
        assert await ask(conn, sid, "/model") == "end_turn"
        listing = client.text(sid)
        assert await ask(conn, sid, f"/model {PLAIN}") == "end_turn"
        assert fake_llm.exchanges == [] and fake_anthropic.exchanges == []
        assert await ask(conn, sid, "after the command") == "end_turn"

    assert all(choice in listing for choice in (GPT, CLAUDE, PLAIN))
    [update] = config_updates(client, sid)
    assert option(update.config_options, "model").current_value == PLAIN
    assert f"Model set to {PLAIN}" in client.text(sid)
    assert fake_llm.exchanges == []
    [body] = fake_anthropic.requests
    assert anthropic_turns(body) == [("user", "after the command")], "commands are not history"


async def test_a_reasoning_model_offers_thought_levels_and_high_raises_the_thinking_budget(
    fake_llm: FakeLLM,
    fake_anthropic: FakeAnthropic,
    switch_env: dict[str, str],
    agent_stderr: Path,
    workspace: Path,
) -> None:
    async with running_agent(switch_env, agent_stderr, workspace) as (conn, _, client):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        sid = session.session_id
        options = await choose(conn, sid, "model", CLAUDE)
        assert await ask(conn, sid, "think a little") == "end_turn"
        high = await choose(conn, sid, "thought_level", "high")
        assert await ask(conn, sid, "think hard") == "end_turn"
        await choose(conn, sid, "thought_level", "off")
        assert await ask(conn, sid, "do not think") == "end_turn"
        back_on_gpt = await choose(conn, sid, "model", GPT)
        with pytest.raises(RequestError) as refused:
            await choose(conn, sid, "thought_level", "high")

    level = option(options, "thought_level")
    assert level is not None and level.category == "thought_level"
    assert level.current_value == "medium"
    assert [o.value for o in level.options] == ["off", "low", "medium", "high"]
    assert option(high, "thought_level").current_value == "high"
    assert option(back_on_gpt, "thought_level") is None
    assert refused.value.code == -32602

    medium_call, high_call, off_call = fake_anthropic.requests
    assert medium_call["thinking"] == {
        "type": "enabled",
        "budget_tokens": THINKING_BUDGET["medium"],
    }
    assert high_call["thinking"] == {"type": "enabled", "budget_tokens": THINKING_BUDGET["high"]}
    assert high_call["max_tokens"] > THINKING_BUDGET["high"]
    assert "thinking" not in off_call
    # The signed thinking of the earlier turns went back as it came (the fake checks it).
    assert high_call["messages"][1]["content"][0]["type"] == "thinking"
    assert all(e.status == 200 for e in fake_anthropic.exchanges)
    thoughts = "".join(u.content.text for u in client.of(sid) if isinstance(u, AgentThoughtChunk))
    assert "Thinking about: think a little" in thoughts
    assert "Thinking about: think hard" in thoughts
    assert fake_llm.exchanges == []


async def test_two_sessions_in_one_process_keep_their_own_model(
    fake_llm: FakeLLM,
    fake_anthropic: FakeAnthropic,
    switch_env: dict[str, str],
    agent_stderr: Path,
    workspace: Path,
) -> None:
    async with running_agent(switch_env, agent_stderr, workspace) as (conn, _, client):
        one = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        two = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        options_two = await choose(conn, two, "model", PLAIN)
        stops = await asyncio.gather(ask(conn, one, "for one"), ask(conn, two, "for two"))
        await choose(conn, one, "model", CLAUDE)
        await choose(conn, two, "model", GPT)
        stops += await asyncio.gather(ask(conn, one, "one again"), ask(conn, two, "two again"))

    assert stops == ["end_turn"] * 4
    assert option(options_two, "model").current_value == PLAIN
    assert [openai_turns(b)[-1][1] for b in fake_llm.requests] == ["for one", "two again"]
    assert [anthropic_turns(b)[-1][1] for b in fake_anthropic.requests] == [
        "for two",
        "one again",
    ]
    assert client.text(one) == fake_reply("for one") + anthropic_reply("one again")
    assert client.text(two) == anthropic_reply("for two") + fake_reply("two again")


async def test_usage_update_follows_each_prompt_with_the_context_window_and_the_cost(
    fake_llm: FakeLLM,
    fake_anthropic: FakeAnthropic,
    switch_env: dict[str, str],
    agent_stderr: Path,
    workspace: Path,
) -> None:
    async with running_agent(switch_env, agent_stderr, workspace) as (conn, _, client):
        priced = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        unpriced = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        await choose(conn, unpriced, "model", PLAIN)

        await ask(conn, priced, "count me")
        after_gpt = usage_updates(client, priced)
        await choose(conn, priced, "model", CLAUDE)
        await ask(conn, priced, "count me too")
        after_claude = usage_updates(client, priced)
        await ask(conn, unpriced, "no prices here")
        plain = usage_updates(client, unpriced)

    [gpt] = after_gpt
    assert gpt.used > 0
    assert gpt.size == CONTEXT[GPT]
    assert gpt.cost is not None and gpt.cost.currency == "USD"
    low, high = min(PRICES[GPT]), max(PRICES[GPT])
    assert gpt.used * low / 1e6 <= gpt.cost.amount <= gpt.used * high / 1e6

    [_, claude] = after_claude
    reported = fake_anthropic.exchanges[0].usage
    assert reported is not None
    assert claude.size == CONTEXT[CLAUDE]
    assert claude.used == reported["input_tokens"] + reported["output_tokens"]
    call_cost = (
        reported["input_tokens"] * PRICES[CLAUDE][0] + reported["output_tokens"] * PRICES[CLAUDE][1]
    ) / 1e6
    assert claude.cost is not None and claude.cost.currency == "USD"
    assert claude.cost.amount == pytest.approx(gpt.cost.amount + call_cost, abs=2e-6)

    [only] = plain
    assert only.used > 0
    assert only.size == CONTEXT[PLAIN]
    assert only.cost is None, "a model without prices reports no cost"


HOLD_IMPORT_HOOK = """\
\"\"\"Test hook (sitecustomize): the first import of E2E_HOLD_IMPORT, in whichever thread,
touches E2E_HOLD_SIGNALS/importing and waits until E2E_HOLD_SIGNALS/go-on exists.\"\"\"
import os
import sys
import time
from pathlib import Path


class _HoldImport:
    def __init__(self, name, signals):
        self.name = name
        self.signals = signals

    def find_spec(self, name, path=None, target=None):
        if name == self.name:
            sys.meta_path.remove(self)
            (self.signals / "importing").touch()
            deadline = time.monotonic() + 60  # a failed test must not leave the agent stuck
            while not (self.signals / "go-on").exists() and time.monotonic() < deadline:
                time.sleep(0.01)
        return None


if os.environ.get("E2E_HOLD_IMPORT"):
    signals = Path(os.environ["E2E_HOLD_SIGNALS"])
    sys.meta_path.insert(0, _HoldImport(os.environ["E2E_HOLD_IMPORT"], signals))
"""


async def wait_for_file(path: Path) -> None:
    with anyio.fail_after(TIMEOUT):
        # Polling: another process makes the file; nothing else tells us.
        while not await anyio.Path(path).exists():  # noqa: ASYNC110
            await asyncio.sleep(0.01)


async def test_the_first_prompt_on_another_vendor_does_not_stall_the_other_sessions(
    fake_llm: FakeLLM,
    fake_anthropic: FakeAnthropic,
    switch_env: dict[str, str],
    agent_stderr: Path,
    workspace: Path,
    tmp_path: Path,
) -> None:
    """A provider's module (and, for the clouds, its vendor SDK) takes time to import. While
    the agent imports Anthropic's for one session's first prompt (held here until we let it
    go on), another session is served: the import does not run on the event loop."""
    signals = tmp_path / "hold-import"
    signals.mkdir()
    (signals / "sitecustomize.py").write_text(HOLD_IMPORT_HOOK, encoding="utf-8")
    env = {
        **switch_env,
        "PYTHONPATH": str(signals),
        "E2E_HOLD_IMPORT": "acp_agent.providers.anthropic",
        "E2E_HOLD_SIGNALS": str(signals),
    }
    async with running_agent(env, agent_stderr, workspace) as (conn, _, _client):
        one = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        two = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        await choose(conn, two, "model", PLAIN)
        assert not (signals / "importing").exists(), "the Anthropic provider was loaded before use"
        first_on_anthropic = asyncio.create_task(ask(conn, two, "hello Anthropic"))
        await wait_for_file(signals / "importing")

        options = await choose(conn, one, "mode", "ask")  # answered while the import is held
        assert not first_on_anthropic.done()
        (signals / "go-on").touch()
        assert await first_on_anthropic == "end_turn"

    mode = option(options, "mode")
    assert mode is not None and mode.current_value == "ask"
    [exchange] = fake_anthropic.exchanges
    assert "hello Anthropic" in json.dumps(exchange.body["messages"][-1])
