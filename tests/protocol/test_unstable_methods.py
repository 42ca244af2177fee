"""The cheap unstable methods clients ask for, in both dialects: `session/set_title`,
`session/archive` / `unarchive` with the `archived` filter of `session/list`,
`session/status`, `auth/status` with `auth/status_update`, and `session/fork` with
initial `configOptions`.

Every frame the agent sends in these tests is validated against the unstable schema of
the dialect spoken (the npm `@agentclientprotocol/sdk` `schema/v1` or `schema/v2`); titles
and archives are checked again after a restart of the agent on the same state directory.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from fake_acp_client import FakeClient
from fake_llm import FakeLLM

from acp_agent.credentials import CredentialStore, credentials_path
from acp_agent.protocol.dialect import initialize_response, negotiate

pytestmark = pytest.mark.anyio

Connection = Callable[..., Any]

SCHEMAS = Path(__file__).resolve().parents[2] / "node_modules/@agentclientprotocol/sdk/schema"
INVALID_PARAMS = -32602
RESOURCE_NOT_FOUND = -32002
V1_INITIALIZE: dict[str, Any] = {"protocolVersion": 1, "clientCapabilities": {}}
V2_INITIALIZE: dict[str, Any] = {
    "protocolVersion": 2,
    "info": {"name": "unstable-test", "version": "1.0.0"},
    "capabilities": {},
}
DIALECTS = {"v1": V1_INITIALIZE, "v2": V2_INITIALIZE}
UPDATE_NOTIFICATION = {"v1": "SessionNotification", "v2": "UpdateSessionNotification"}
STORED_KEY = "sk-ant-stored-0123456789"


@cache
def _defs(dialect: str) -> dict[str, Any]:
    path = SCHEMAS / dialect / "schema.unstable.json"
    defs: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))["$defs"]
    return defs


def assert_schema(dialect: str, definition: str, value: Any) -> None:
    jsonschema.validate(value, {"$ref": f"#/$defs/{definition}", "$defs": _defs(dialect)})


def assert_notifications_valid(client: FakeClient, dialect: str) -> None:
    """Every notification the agent sent is one the dialect's schema has."""
    for frame in client.frames:
        match frame.get("method"):
            case "session/update":
                assert_schema(dialect, UPDATE_NOTIFICATION[dialect], frame["params"])
            case "auth/status_update":
                assert_schema(dialect, "AuthStatusUpdateNotification", frame["params"])


def config(tmp_path: Path, title_model: str | None = None, fake: FakeLLM | None = None) -> str:
    """The offline echo model (and `thinker`, a reasoning model on a fake server), sessions
    stored under `tmp_path`."""
    path = tmp_path / "agent.toml"
    base_url = fake.base_url if fake is not None else "http://127.0.0.1:9/v1"
    title = f'title_model = "{title_model}"\n' if title_model else ""
    path.write_text(
        f'default_model = "offline/echo"\n{title}state_dir = "{tmp_path / "state"}"\n'
        '[providers.offline]\ntype = "echo"\n'
        f'[providers.fake]\ntype = "openai-compatible"\nbase_url = "{base_url}"\n'
        'api_key = "test-key"\n'
        '[[providers.fake.models]]\nid = "mini"\n'
        '[[providers.fake.models]]\nid = "thinker"\nreasoning = true\n',
        encoding="utf-8",
    )
    return str(path)


def titles(client: FakeClient, session_id: str) -> list[str]:
    return [
        u["title"]
        for u in client.updates(session_id)
        if u["sessionUpdate"] == "session_info_update" and "title" in u
    ]


async def prompt_done(client: FakeClient, session_id: str, text: str) -> None:
    """A prompt, until its turn has ended: its answer in v1; in v2 (which answers at the
    insertion) its `idle` state update."""
    idle_before = len(_idle_updates(client, session_id))
    reply = await client.prompt(session_id, text)
    if "messageId" in reply["result"]:
        await client.wait_for(lambda _: len(_idle_updates(client, session_id)) > idle_before)


def _idle_updates(client: FakeClient, session_id: str) -> list[dict[str, Any]]:
    return [
        u
        for u in client.updates(session_id)
        if u["sessionUpdate"] == "state_update" and u["state"] == "idle"
    ]


async def listed(client: FakeClient, **params: Any) -> dict[str, dict[str, Any]]:
    answer = await client.call("session/list", params)
    return {info["sessionId"]: info for info in answer["sessions"]}


# --- advertised exactly as routed ------------------------------------------------------


@pytest.mark.parametrize("dialect", DIALECTS)
def test_the_unstable_capabilities_are_advertised_where_each_schema_puts_them(
    dialect: str,
) -> None:
    answer = initialize_response(negotiate(DIALECTS[dialect]))

    assert_schema(dialect, "InitializeResponse", answer)
    capabilities = answer["agentCapabilities"] if dialect == "v1" else answer["capabilities"]
    session = capabilities["sessionCapabilities" if dialect == "v1" else "session"]
    assert all(session[name] == {} for name in ("title", "archive", "status", "fork"))
    assert capabilities["auth"]["status"] == {}


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_each_advertised_unstable_method_is_routed(
    connection: Connection, dialect: str
) -> None:
    """None of them answers -32601: an unknown session (-32002) or params (-32602)."""
    async with connection() as client:
        await client.initialize(DIALECTS[dialect])
        codes = {
            method: (await client.request(method, {"sessionId": "sess_none"})).get("error", {})
            for method in ("session/set_title", "session/archive", "session/unarchive")
        }
        codes["session/status"] = await client.error("session/status", {"sessionId": "sess_x"})
        status = await client.call("auth/status", {})

    assert codes["session/set_title"]["code"] == INVALID_PARAMS  # no title
    assert "title" in codes["session/set_title"]["message"]
    assert codes["session/archive"]["code"] == RESOURCE_NOT_FOUND
    assert codes["session/unarchive"]["code"] == RESOURCE_NOT_FOUND
    assert codes["session/status"]["code"] == RESOURCE_NOT_FOUND
    assert codes["session/status"]["data"]["sessionId"] == "sess_x"
    assert_schema(dialect, "AuthStatusResponse", status)


# --- session/set_title -----------------------------------------------------------------


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_the_users_title_replaces_the_generated_one_and_survives_a_restart(
    connection: Connection, tmp_path: Path, dialect: str
) -> None:
    agent_config = config(tmp_path)
    async with connection(agent_config) as client:
        await client.initialize(DIALECTS[dialect])
        session_id = await client.new_session(tmp_path)
        await prompt_done(client, session_id, "fix the flaky login test")
        answer = await client.call(
            "session/set_title", {"sessionId": session_id, "title": "  Login   flake  "}
        )
        await prompt_done(client, session_id, "and another prompt")
        before_restart = await listed(client)
        assert_notifications_valid(client, dialect)

    assert_schema(dialect, "SetSessionTitleResponse", answer)
    assert answer == {"title": "Login flake"}  # whitespace runs made one, as stored
    assert titles(client, session_id) == ["fix the flaky login test", "Login flake"]
    assert before_restart[session_id]["title"] == "Login flake"

    async with connection(agent_config) as client:
        await client.initialize(DIALECTS[dialect])
        after_restart = await listed(client)
        # Opened again, it keeps the user's title through its next turn.
        await client.call("session/resume", {"sessionId": session_id, "cwd": str(tmp_path)})
        await prompt_done(client, session_id, "a third prompt")
        again = await listed(client)

    assert after_restart[session_id]["title"] == "Login flake"
    assert again[session_id]["title"] == "Login flake"


async def test_a_title_set_before_the_first_prompt_is_never_replaced_by_the_title_model(
    connection: Connection, tmp_path: Path
) -> None:
    with FakeLLM() as fake:
        async with connection(config(tmp_path, "fake/mini", fake)) as client:
            await client.initialize()
            session_id = await client.new_session(tmp_path)
            await client.call("session/set_title", {"sessionId": session_id, "title": "Mine"})
            await client.prompt(session_id, "please name me something else")
            [info] = (await listed(client)).values()

    assert titles(client, session_id) == ["Mine"]
    assert info["title"] == "Mine"
    assert not [e for e in fake.exchanges if e.path.endswith("/chat/completions")]


async def test_a_title_set_while_the_title_model_writes_is_kept(
    connection: Connection, tmp_path: Path
) -> None:
    import anyio

    with FakeLLM() as fake:
        async with connection(config(tmp_path, "fake/mini", fake)) as client:
            await client.initialize()
            session_id = await client.new_session(tmp_path)
            await client.prompt(session_id, "a slow title [[slow 0.3]]")
            # The title model is asked beside the turn; the user names the session meanwhile.
            await anyio.to_thread.run_sync(fake.wait_for, lambda exchanges: exchanges)
            await client.call("session/set_title", {"sessionId": session_id, "title": "Mine"})
            await anyio.to_thread.run_sync(
                fake.wait_for, lambda exchanges: exchanges[0].outcome != "pending"
            )
            await client.prompt(session_id, "a second prompt")
            [info] = (await listed(client)).values()

    assert titles(client, session_id) == ["a slow title [[slow 0.3]]", "Mine"]
    assert info["title"] == "Mine"


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"title": "x"}, "sessionId"),
        ({"sessionId": "S", "title": None}, "title"),
        ({"sessionId": "S", "title": 7}, "title"),
        ({"sessionId": "S", "title": " \t\n "}, "title"),
    ],
)
async def test_a_bad_title_is_invalid_params_naming_the_field_and_changes_nothing(
    connection: Connection, tmp_path: Path, params: dict[str, Any], field: str
) -> None:
    async with connection(config(tmp_path)) as client:
        await client.initialize()
        session_id = await client.new_session(tmp_path)
        await client.prompt(session_id, "first words")
        request = {k: session_id if v == "S" else v for k, v in params.items()}
        error = await client.error("session/set_title", request)
        info = (await listed(client))[session_id]

    assert error["code"] == INVALID_PARAMS
    assert field in error["message"]
    assert info["title"] == "first words"


async def test_a_stored_session_not_open_here_can_be_retitled(
    connection: Connection, tmp_path: Path
) -> None:
    agent_config = config(tmp_path)
    async with connection(agent_config) as client:
        await client.initialize()
        session_id = await client.new_session(tmp_path)
        await client.prompt(session_id, "stored words")
    async with connection(agent_config) as client:
        await client.initialize()
        answer = await client.call(
            "session/set_title", {"sessionId": session_id, "title": "Renamed"}
        )
        info = (await listed(client))[session_id]
        status = await client.call("session/status", {"sessionId": session_id})

    assert answer == {"title": "Renamed"}
    assert info["title"] == "Renamed"
    assert status == {"status": "saved"}  # retitling did not open it


# --- session/archive, unarchive, the list filter ---------------------------------------


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_an_archived_session_is_hidden_by_default_and_listed_on_request_after_a_restart(
    connection: Connection, tmp_path: Path, dialect: str
) -> None:
    agent_config = config(tmp_path)
    async with connection(agent_config) as client:
        await client.initialize(DIALECTS[dialect])
        kept = await client.new_session(tmp_path)
        await prompt_done(client, kept, "keep me")
        archived = await client.new_session(tmp_path)
        await prompt_done(client, archived, "archive me")
        answer = await client.call("session/archive", {"sessionId": archived})
        again = await client.call("session/archive", {"sessionId": archived})  # no change
        status = await client.call("session/status", {"sessionId": archived})
        assert_notifications_valid(client, dialect)

    assert_schema(dialect, "ArchiveSessionResponse", answer)
    assert answer == again == {}
    assert status == {"status": "saved"}  # archiving closed it

    async with connection(agent_config) as client:
        await client.initialize(DIALECTS[dialect])
        lists = {
            name: await client.call("session/list", params)
            for name, params in {
                "default": {},
                "null": {"archived": None},
                "include": {"archived": "include"},
                "only": {"archived": "only"},
            }.items()
        }
        unarchived = await client.call("session/unarchive", {"sessionId": archived})
        after = await listed(client)

    for answer in lists.values():
        assert_schema(dialect, "ListSessionsResponse", answer)

    def ids(name: str) -> dict[str, bool]:
        return {s["sessionId"]: s["archived"] for s in lists[name]["sessions"]}

    assert ids("default") == ids("null") == {kept: False}
    assert ids("include") == {kept: False, archived: True}
    assert ids("only") == {archived: True}
    assert_schema(dialect, "UnarchiveSessionResponse", unarchived)
    assert {key: info["archived"] for key, info in after.items()} == {
        kept: False,
        archived: False,
    }


def _first_chunk(frame: dict[str, Any]) -> bool:
    return (
        frame.get("method") == "session/update"
        and frame["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
    )


async def test_archiving_a_running_session_cancels_its_turn_and_closes_it(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection(config(tmp_path)) as client:
        await client.initialize(V2_INITIALIZE)
        session_id = await client.new_session(tmp_path)
        await client.call("session/prompt", _prompt(session_id, "@slow 0.2\none two three four"))
        await client.wait_for(_first_chunk)
        running = await client.call("session/status", {"sessionId": session_id})
        await client.call("session/archive", {"sessionId": session_id})
        status = await client.call("session/status", {"sessionId": session_id})
        ended = await client.wait_for(
            lambda f: (
                f.get("method") == "session/update" and f["params"]["update"].get("state") == "idle"
            )
        )
        only = await listed(client, archived="only")

    assert running == {"status": "open", "state": {"state": "running", "background": []}}
    assert ended["params"]["update"]["stopReason"] == "cancelled"
    assert status == {"status": "saved"}
    assert list(only) == [session_id]


def _prompt(session_id: str, text: str) -> dict[str, Any]:
    return {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}


@pytest.mark.parametrize("value", ["hidden", "", 3, ["only"]])
async def test_an_unsupported_archive_filter_is_invalid_params(
    connection: Connection, tmp_path: Path, value: Any
) -> None:
    async with connection(config(tmp_path)) as client:
        await client.initialize()
        error = await client.error("session/list", {"archived": value})

    assert error["code"] == INVALID_PARAMS
    assert "archived" in error["message"]


# --- session/status --------------------------------------------------------------------


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_status_tells_open_or_saved_and_changes_nothing(
    connection: Connection, tmp_path: Path, dialect: str
) -> None:
    agent_config = config(tmp_path)
    async with connection(agent_config) as client:
        await client.initialize(DIALECTS[dialect])
        session_id = await client.new_session(tmp_path)
        await prompt_done(client, session_id, "hello")
        open_status = await client.call("session/status", {"sessionId": session_id})
    async with connection(agent_config) as client:
        await client.initialize(DIALECTS[dialect])
        saved = await client.call("session/status", {"sessionId": session_id})
        still_saved = await client.call("session/status", {"sessionId": session_id})

    for answer in (open_status, saved):
        assert_schema(dialect, "SessionStatusResponse", answer)
    if dialect == "v2":
        assert open_status == {"status": "open", "state": {"state": "idle", "background": []}}
    else:
        assert open_status == {"status": "open"}  # v1's schema has no foreground state
    assert saved == still_saved == {"status": "saved"}


# --- auth/status and auth/status_update ------------------------------------------------


def _anthropic_config(tmp_path: Path) -> str:
    path = tmp_path / "anthropic.toml"
    path.write_text(
        f'state_dir = "{tmp_path / "state"}"\n'
        '[providers.claude]\ntype = "anthropic"\nbase_url = "http://127.0.0.1:9"\n'
        '[[providers.claude.models]]\nid = "claude-fake"\n',
        encoding="utf-8",
    )
    return str(path)


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_auth_status_follows_a_logout_and_a_login_with_status_updates(
    connection: Connection, tmp_path: Path, dialect: str
) -> None:
    CredentialStore(credentials_path()).save("claude", STORED_KEY, use_keyring=False)
    logout = "logout" if dialect == "v1" else "auth/logout"
    login = "authenticate" if dialect == "v1" else "auth/login"
    async with connection(_anthropic_config(tmp_path)) as client:
        await client.initialize(DIALECTS[dialect])
        before = await client.call("auth/status", {})
        await client.call(logout, {})
        first = await client.wait_for(lambda f: f.get("method") == "auth/status_update")
        after_logout = await client.call("auth/status", {})
        await client.call(login, {"methodId": "acp-agent-config"})
        # A login that changed nothing is not told again; a marker after its follow-up.
        await client.call("auth/status", {})
        assert_notifications_valid(client, dialect)

    assert_schema(dialect, "AuthStatusResponse", before)
    assert before == {
        "state": "authenticated",
        "accounts": [{"label": "claude API key", "active": True}],
    }
    assert first["params"] == after_logout == {"state": "unauthenticated", "accounts": []}
    assert STORED_KEY not in json.dumps(client.frames)
    told = [f for f in client.frames if f.get("method") == "auth/status_update"]
    assert len(told) == 1


async def test_auth_status_of_the_offline_model_needs_no_sign_in(
    connection: Connection, tmp_path: Path
) -> None:
    async with connection(config(tmp_path)) as client:
        await client.initialize()
        status = await client.call("auth/status", {})
        await client.call("authenticate", {"methodId": "acp-agent-config"})
        update = await client.wait_for(lambda f: f.get("method") == "auth/status_update")

    assert status["state"] == "not_required"
    assert update["params"] == status  # the first told on this connection
    assert_schema("v1", "AuthStatusUpdateNotification", update["params"])


# --- session/fork with initial config options ------------------------------------------


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_a_fork_starts_with_the_config_options_it_was_given(
    connection: Connection, tmp_path: Path, dialect: str
) -> None:
    option_key = "id" if dialect == "v1" else "configId"
    async with connection(config(tmp_path)) as client:
        await client.initialize(DIALECTS[dialect])
        source = await client.new_session(tmp_path)
        await prompt_done(client, source, "the source conversation")
        forked = await client.call(
            "session/fork",
            {
                "sessionId": source,
                "cwd": str(tmp_path),
                "configOptions": [
                    {"configId": "thought_level", "value": "high"},
                    {"configId": "mode", "value": "read-only"},
                    {"configId": "model", "value": "fake/thinker"},  # applied first
                ],
            },
        )
        source_status = await client.call("session/status", {"sessionId": source})
        assert_notifications_valid(client, dialect)

    assert_schema(dialect, "ForkSessionResponse", forked)
    current = {o[option_key]: o["currentValue"] for o in forked["configOptions"]}
    assert current == {"model": "fake/thinker", "thought_level": "high", "mode": "read-only"}
    assert forked["sessionId"] != source
    assert source_status["status"] == "open"


@pytest.mark.parametrize(
    ("option", "named"),
    [
        ({"configId": "model", "value": "nope/none"}, "model"),
        ({"configId": "thought_level", "value": "high"}, "thought_level"),  # echo: no levels
        ({"configId": "colour", "value": "blue"}, "colour"),
        ({"configId": "mode", "value": 3}, "configOptions.0.value"),
        ({"value": "x"}, "configOptions.0.configId"),
    ],
)
async def test_a_fork_with_a_bad_config_option_is_invalid_params_and_forks_nothing(
    connection: Connection, tmp_path: Path, option: dict[str, Any], named: str
) -> None:
    async with connection(config(tmp_path)) as client:
        await client.initialize()
        source = await client.new_session(tmp_path)
        await prompt_done(client, source, "the source conversation")
        error = await client.error(
            "session/fork",
            {"sessionId": source, "cwd": str(tmp_path), "configOptions": [option]},
        )
        sessions = await listed(client, archived="include")

    assert error["code"] == INVALID_PARAMS
    assert named in error["message"]
    assert list(sessions) == [source]


# --- the speed config option -----------------------------------------------------------


def _speed_config(tmp_path: Path, fake: FakeLLM) -> str:
    path = Path(config(tmp_path, fake=fake))
    path.write_text(
        path.read_text(encoding="utf-8") + '[[providers.fake.models]]\nid = "quick"\nfast = true\n',
        encoding="utf-8",
    )
    return str(path)


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_a_model_served_fast_offers_a_speed_option_that_reaches_the_request(
    connection: Connection, tmp_path: Path, dialect: str
) -> None:
    option_key = "id" if dialect == "v1" else "configId"

    def by_id(options: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
        return {option[option_key]: option for option in options}

    with FakeLLM() as fake:
        agent_config = _speed_config(tmp_path, fake)
        async with connection(agent_config) as client:
            await client.initialize(DIALECTS[dialect])
            created = await client.call("session/new", {"cwd": str(tmp_path), "mcpServers": []})
            session_id = created["sessionId"]
            set_option = {"sessionId": session_id, "type": "id"}
            on_quick = await client.call(
                "session/set_config_option",
                {**set_option, "configId": "model", "value": "fake/quick"},
            )
            fast = await client.call(
                "session/set_config_option", {**set_option, "configId": "speed", "value": "fast"}
            )
            bad = await client.error(
                "session/set_config_option", {**set_option, "configId": "speed", "value": "warp"}
            )
            await prompt_done(client, session_id, "hurry")
            assert_notifications_valid(client, dialect)
        async with connection(agent_config) as client:
            await client.initialize(DIALECTS[dialect])
            resumed = await client.call(
                "session/resume",
                {"sessionId": session_id, "cwd": str(tmp_path), "mcpServers": []},
            )
            await client.call(
                "session/set_config_option",
                {**set_option, "configId": "model", "value": "fake/mini"},
            )
            one_speed = await client.error(
                "session/set_config_option", {**set_option, "configId": "speed", "value": "fast"}
            )
        [asked] = fake.requests

    assert "speed" not in by_id(created["configOptions"])  # echo has one speed
    speed = by_id(on_quick["configOptions"])["speed"]
    assert (speed["category"], speed["currentValue"]) == ("model_config", "standard")
    assert [choice["value"] for choice in speed["options"]] == ["standard", "fast"]
    for answer in (on_quick, fast):
        assert_schema(dialect, "SetSessionConfigOptionResponse", answer)
    assert by_id(fast["configOptions"])["speed"]["currentValue"] == "fast"
    assert bad["code"] == one_speed["code"] == INVALID_PARAMS
    assert "speed" in bad["message"] and "one speed" in one_speed["message"]
    assert asked["service_tier"] == "priority"
    assert by_id(resumed["configOptions"])["speed"]["currentValue"] == "fast"  # as stored
