"""Dispatch and validation: the method table, params errors, `_meta`, unknown methods."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from acp.meta import AGENT_METHODS
from acp.schema import NewSessionResponse, PromptResponse

from acp_agent.protocol.methods import HANDSHAKE, NOTIFICATIONS, REQUESTS
from acp_agent.protocol.requests import ModelReader

pytestmark = pytest.mark.anyio

Connection = Callable[[], Any]
LEGACY_METHODS = {"session/set_model"}
"""Served for older v1 clients, though the pinned schema no longer lists them."""
UNSTABLE_METHODS = {
    "session/set_title",
    "session/archive",
    "session/unarchive",
    "session/status",
    "auth/status",
}
"""Unstable, newer than the Python SDK's method list (`session_meta`)."""


def prompt_params(session_id: str, text: str = "hi") -> dict[str, Any]:
    return {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}


# --- the method table ------------------------------------------------------------------


def test_every_method_we_serve_exists_in_the_schema() -> None:
    """In the SDK's method list, or (the unstable ones newer than it) in the npm SDK's v1
    unstable schema."""
    schema_methods = set(AGENT_METHODS.values())
    served = set(REQUESTS) | set(NOTIFICATIONS) | HANDSHAKE
    assert served - LEGACY_METHODS - UNSTABLE_METHODS <= schema_methods
    assert _npm_v1_unstable_methods() >= UNSTABLE_METHODS
    assert schema_methods >= HANDSHAKE


def _npm_v1_unstable_methods() -> set[str]:
    path = (
        Path(__file__).resolve().parents[2]
        / "node_modules/@agentclientprotocol/sdk/schema/v1/schema.unstable.json"
    )
    defs = json.loads(path.read_text(encoding="utf-8"))["$defs"]
    return {
        spec["x-method"]
        for spec in defs.values()
        if isinstance(spec, dict) and spec.get("x-side") == "agent" and "x-method" in spec
    }


def test_requests_and_notifications_do_not_overlap() -> None:
    assert not set(REQUESTS) & set(NOTIFICATIONS)
    assert not HANDSHAKE & (set(REQUESTS) | set(NOTIFICATIONS))


def test_the_core_methods_are_served() -> None:
    assert {"session/new", "session/prompt"} <= set(REQUESTS)
    assert "session/cancel" in NOTIFICATIONS


def test_every_method_in_the_table_has_a_reader_of_its_params() -> None:
    """A method read by a schema model names one that exists; the others are the plain
    readers of a session's life (held to the models in test_protocol_requests.py)."""
    plain = {"session/new", "session/load", "session/resume", "session/fork", "session/prompt"}
    # Unstable, not in our schema models; their reader is held to acp.schema's models in
    # test_providers_methods.py.
    plain |= {"providers/list", "providers/set", "providers/disable"}
    # Unstable too, newer than acp.schema (`session_meta`, tested in test_unstable_methods.py);
    # `session/list` is read there for its `archived` filter.
    plain |= UNSTABLE_METHODS | {"session/list"}
    for method in [*REQUESTS.values(), *NOTIFICATIONS.values()]:
        if isinstance(method.read, ModelReader):
            assert method.read.model() is not None, method.name
        else:
            assert method.name in plain | {"session/cancel"}, method.name


def test_the_agent_implements_every_method_the_server_may_call() -> None:
    from acp_agent.agent import Agent
    from acp_agent.protocol.methods import AcpAgent

    wanted = {name for name in vars(AcpAgent) if not name.startswith("_")}
    for name in wanted:
        ours, theirs = getattr(Agent, name, None), getattr(AcpAgent, name)
        assert ours is not None, f"Agent lacks {name}"
        assert inspect.iscoroutinefunction(ours) == inspect.iscoroutinefunction(theirs), name


async def test_a_schema_method_is_answered_exactly_when_the_table_routes_it(
    connection: Connection,
) -> None:
    """Each request method the table routes is served (whatever its params' fate); every
    other schema method, notifications sent as requests included, answers -32601."""
    tabled = set(REQUESTS) | set(NOTIFICATIONS)
    candidates = (set(AGENT_METHODS.values()) | tabled) - HANDSHAKE
    answered = set()
    async with connection() as client:
        await client.initialize()
        for method in sorted(candidates):
            reply = await client.request(method, {"sessionId": "sess_x"})
            error = reply.get("error")
            if error is None or error["code"] != -32601:
                answered.add(method)
            else:
                assert method in error["message"]
    assert answered == set(REQUESTS)


async def test_a_notification_sent_as_a_request_answers_method_not_found(
    connection: Connection,
) -> None:
    async with connection() as client:
        await client.initialize()
        error = await client.error("session/cancel", {"sessionId": "sess_x"})
        assert error["code"] == -32601


# --- unknown methods and notifications -------------------------------------------------


@pytest.mark.parametrize("method", ["no/such", "session/frobnicate", "_vendor/extension"])
async def test_an_unknown_request_answers_method_not_found(
    connection: Connection, method: str
) -> None:
    async with connection() as client:
        await client.initialize()
        error = await client.error(method, {})
        assert error["code"] == -32601
        assert method in error["message"]


async def test_an_unknown_underscore_notification_is_ignored_and_the_server_still_serves(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        await client.initialize()
        await client.notify("_foo", {"anything": [1, 2]})
        await client.notify("_zed/whatever")
        await client.notify("unknown/notification", {"x": 1})
        session_id = await client.new_session(tmp_path)
        assert (await client.prompt(session_id, "still here"))["result"]["stopReason"] == (
            "end_turn"
        )
        assert not any("error" in f for f in client.frames)


async def test_a_malformed_cancel_notification_is_ignored(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        await client.initialize()
        session_id = await client.new_session(tmp_path)
        await client.notify("session/cancel", {})
        await client.notify("session/cancel", {"sessionId": 12})
        await client.notify("session/cancel", {"sessionId": "sess_unknown"})
        assert (await client.prompt(session_id))["result"]["stopReason"] == "end_turn"


# --- params validation -----------------------------------------------------------------


async def test_session_new_answers_a_schema_valid_response(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        await client.initialize()
        result = await client.call("session/new", {"cwd": str(tmp_path), "mcpServers": []})
    NewSessionResponse.model_validate(result)
    assert result["sessionId"]


async def test_session_new_without_mcp_servers_works_for_early_v1_clients(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        await client.initialize()
        result = await client.call("session/new", {"cwd": str(tmp_path)})
    assert result["sessionId"]


async def test_session_new_with_a_relative_cwd_is_invalid_params_naming_cwd(
    connection: Connection,
) -> None:
    async with connection() as client:
        await client.initialize()
        error = await client.error("session/new", {"cwd": "relative/dir", "mcpServers": []})
    assert error["code"] == -32602
    assert "cwd" in error["message"]
    assert "absolute" in error["message"]


async def test_session_new_with_a_missing_directory_is_invalid_params(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        await client.initialize()
        missing = tmp_path / "does-not-exist"
        error = await client.error("session/new", {"cwd": str(missing), "mcpServers": []})
    assert error["code"] == -32602
    assert "cwd" in error["message"]


async def test_session_new_without_cwd_is_invalid_params_naming_cwd(
    connection: Connection,
) -> None:
    async with connection() as client:
        await client.initialize()
        error = await client.error("session/new", {"mcpServers": []})
    assert error["code"] == -32602
    assert "cwd" in error["message"]
    assert "\n" not in error["message"]


@pytest.mark.parametrize("params", [[], "x", 3])
async def test_params_that_are_not_an_object_are_invalid_params(
    connection: Connection, params: Any
) -> None:
    async with connection() as client:
        await client.initialize()
        error = await client.error("session/new", params)
    assert error["code"] == -32602


async def test_a_prompt_without_session_id_is_invalid_params_naming_session_id(
    connection: Connection,
) -> None:
    async with connection() as client:
        await client.initialize()
        error = await client.error("session/prompt", {"prompt": [{"type": "text", "text": "hi"}]})
    assert error["code"] == -32602
    assert "sessionId" in error["message"]


async def test_a_prompt_with_a_malformed_content_block_is_invalid_params(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        await client.initialize()
        session_id = await client.new_session(tmp_path)
        error = await client.error(
            "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text"}]}
        )
        assert error["code"] == -32602
        assert (await client.prompt(session_id))["result"]["stopReason"] == "end_turn"


async def test_a_prompt_for_an_unknown_session_is_resource_not_found_naming_it(
    connection: Connection,
) -> None:
    async with connection() as client:
        await client.initialize()
        error = await client.error("session/prompt", prompt_params("sess_nope"))
    assert error["code"] == -32002
    assert "sess_nope" in error["message"]
    assert "session" in error["message"]


async def test_methods_before_initialize_are_still_answered(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        session_id = await client.new_session(tmp_path)
        assert (await client.prompt(session_id))["result"]["stopReason"] == "end_turn"


# --- _meta and unknown fields ----------------------------------------------------------


async def test_meta_and_unknown_fields_in_params_are_accepted_and_not_treated_as_arguments(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        await client.initialize()
        result = await client.call(
            "session/new",
            {
                "cwd": str(tmp_path),
                "mcpServers": [],
                "_meta": {"cwd": "/elsewhere", "zed": {"thread": "t1"}},
                "futureField": True,
            },
        )
        session_id = result["sessionId"]
        reply = await client.request(
            "session/prompt",
            {
                "sessionId": session_id,
                "prompt": [
                    {"type": "text", "text": "plain words", "_meta": {"text": "SECRET-META"}}
                ],
                "_meta": {"sessionId": "sess_other", "prompt": "META-PROMPT"},
            },
        )
    assert reply["result"]["stopReason"] == "end_turn"
    PromptResponse.model_validate(reply["result"])
    echoed = "".join(
        u["content"]["text"]
        for u in client.updates(session_id)
        if u["sessionUpdate"] == "agent_message_chunk"
    )
    assert "plain words" in echoed
    assert "META" not in echoed
    assert client.updates("sess_other") == []


async def test_a_cancel_notification_with_meta_is_served(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection() as client:
        await client.initialize()
        session_id = await client.new_session(tmp_path)
        await client.notify("session/cancel", {"sessionId": session_id, "_meta": {"why": "x"}})
        assert (await client.prompt(session_id))["result"]["stopReason"] == "end_turn"
