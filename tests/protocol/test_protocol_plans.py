"""Plans in the form each v1 client asked for: `plan_update` / `plan_removed` for clients
that advertised `clientCapabilities.plan`, the legacy `plan` update for every other client.

Payloads are validated against the v1 schemas the npm `@agentclientprotocol/sdk` ships.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from acp_agent.messages import PlanEntry, PlanUpdated
from acp_agent.protocol.handshake import parse_initialize
from acp_agent.protocol.updates import session_update
from acp_agent.sessions.records import EventRecord, decode, encode

SCHEMAS = Path(__file__).resolve().parents[2] / "node_modules/@agentclientprotocol/sdk/schema/v1"
STEPS = (
    PlanEntry("Read the code", "high", "completed"),
    PlanEntry("Fix it", "medium", "in_progress"),
)
STEPS_JSON = [
    {"content": "Read the code", "priority": "high", "status": "completed"},
    {"content": "Fix it", "priority": "medium", "status": "in_progress"},
]


@cache
def _schema(name: str) -> dict[str, Any]:
    schema: dict[str, Any] = json.loads((SCHEMAS / name).read_text(encoding="utf-8"))
    return schema


def assert_update(update: Any, schema: str = "schema.unstable.json") -> None:
    """`update` is a SessionUpdate the schema accepts."""
    defs = _schema(schema)["$defs"]
    jsonschema.validate(update, {"$ref": "#/$defs/SessionUpdate", "$defs": defs})


def test_a_plan_client_gets_plan_update_with_the_same_id_for_every_update_of_the_plan() -> None:
    first = session_update(PlanUpdated(STEPS[:1]), plans=True)
    second = session_update(PlanUpdated(STEPS), plans=True)

    assert second == {
        "sessionUpdate": "plan_update",
        "plan": {"type": "items", "planId": "plan", "entries": STEPS_JSON},
    }
    assert first is not None and first["plan"]["planId"] == second["plan"]["planId"]
    assert_update(first)
    assert_update(second)


def test_a_dropped_plan_is_plan_removed_for_a_plan_client() -> None:
    removed = session_update(PlanUpdated(()), plans=True)

    assert removed == {"sessionUpdate": "plan_removed", "planId": "plan"}
    assert_update(removed)


def test_a_markdown_plan_carries_the_whole_document_and_its_absolute_path() -> None:
    doc = "# Plan\n\n- [x] Read the code\n- [ ] Fix it\n"
    update = session_update(PlanUpdated((), markdown=doc, path="/home/u/proj/PLAN.md"), plans=True)

    assert update == {
        "sessionUpdate": "plan_update",
        "plan": {
            "type": "markdown",
            "planId": "plan",
            "content": doc,
            "path": "/home/u/proj/PLAN.md",
        },
    }
    assert_update(update)
    without_path = session_update(PlanUpdated((), markdown=doc), plans=True)
    assert without_path is not None and "path" not in without_path["plan"]


def test_other_clients_keep_the_legacy_plan_update_exactly() -> None:
    update = session_update(PlanUpdated(STEPS))
    cleared = session_update(PlanUpdated(()))

    assert update == {"sessionUpdate": "plan", "entries": STEPS_JSON}
    assert cleared == {"sessionUpdate": "plan", "entries": []}
    for payload in (update, cleared):
        assert_update(payload, "schema.json")  # the stable v1 schema, no plan operations


def test_other_clients_see_a_markdown_plan_as_its_checkbox_steps() -> None:
    doc = "# Plan\n\n- [x] Read the code\n- [~] Fix it\n* [ ] Ship\nNotes: none\n"
    update = session_update(PlanUpdated((), markdown=doc, path="/p/PLAN.md"))

    assert update == {
        "sessionUpdate": "plan",
        "entries": [
            {"content": "Read the code", "priority": "medium", "status": "completed"},
            {"content": "Fix it", "priority": "medium", "status": "in_progress"},
            {"content": "Ship", "priority": "medium", "status": "pending"},
        ],
    }
    prose = session_update(PlanUpdated((), markdown="## Refactor the parser\n\nThen test."))
    assert prose == {
        "sessionUpdate": "plan",
        "entries": [{"content": "Refactor the parser", "priority": "medium", "status": "pending"}],
    }
    assert_update(update, "schema.json")


@pytest.mark.parametrize(
    ("plan", "advertised"), [({}, True), ({"_meta": {}}, True), (None, False), (True, False)]
)
def test_only_a_plan_object_in_the_client_capabilities_opts_in(plan: Any, advertised: bool) -> None:
    caps: dict[str, Any] = {"fs": {}}
    if plan is not None:
        caps["plan"] = plan
    handshake = parse_initialize({"protocolVersion": 1, "clientCapabilities": caps})

    assert handshake.client.plan is advertised
    assert parse_initialize({"protocolVersion": 1}).client.plan is False


def test_a_plan_recorded_before_plan_ids_replays_under_the_same_id() -> None:
    old = (
        '{"v":1,"kind":"event","event":{"kind":"plan_updated","entries":[{"content":"Fix it",'
        '"priority":"medium","status":"in_progress"}]}}'
    )
    record = decode(old)

    assert isinstance(record, EventRecord) and isinstance(record.event, PlanUpdated)
    fresh = session_update(PlanUpdated(STEPS), plans=True)
    replayed = session_update(record.event, plans=True)
    assert replayed is not None and fresh is not None
    assert replayed["plan"]["planId"] == fresh["plan"]["planId"]
    assert session_update(record.event) == {"sessionUpdate": "plan", "entries": STEPS_JSON[1:]}


def test_a_markdown_plan_survives_the_session_file() -> None:
    event = PlanUpdated((), markdown="# Plan\n- [ ] Fix it\n", path="/p/PLAN.md")

    assert decode(encode(EventRecord(event))) == EventRecord(event)
