"""ask_user: the form it asks for, and what each of the user's replies becomes."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from tool_fakes import make_context

from acp_agent.messages import Elicitation, ElicitationAnswer, TextPart
from acp_agent.tools import ToolContext, ToolFailed, TurnCancelled, builtin_tools, decide
from acp_agent.tools.ask_user import AskUser, AskUserParams, form_schema
from acp_agent.tools.permissions import PermissionMemory, tools_for_mode

pytestmark = pytest.mark.anyio

TOOL = AskUser()


def params(**fields: Any) -> AskUserParams:
    return AskUserParams.model_validate(fields)


class Asker:
    """Answers every question with `answer` and records what was asked."""

    def __init__(self, answer: ElicitationAnswer | Exception) -> None:
        self.answer = answer
        self.asked: list[Elicitation] = []

    async def __call__(self, elicitation: Elicitation) -> ElicitationAnswer:
        self.asked.append(elicitation)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def context(root: Path, asker: Asker | None) -> ToolContext:
    return dataclasses.replace(make_context(root, None), ask_user=asker)


# --- the form --------------------------------------------------------------------------------


def test_choices_become_one_required_pick() -> None:
    schema = form_schema(params(question="Which database?", choices=["Postgres", "SQLite"]))
    assert schema == {
        "type": "object",
        "properties": {
            "choice": {"type": "string", "title": "Choice", "enum": ["Postgres", "SQLite"]}
        },
        "required": ["choice"],
    }


def test_fields_become_flat_primitive_properties() -> None:
    schema = form_schema(
        params(
            question="Deploy settings?",
            fields=[
                {"name": "region", "options": ["eu", "us"], "description": "Where it runs"},
                {"name": "replicas", "type": "integer", "label": "How many"},
                {"name": "ratio", "type": "number", "required": False},
                {"name": "public", "type": "boolean"},
            ],
        )
    )
    assert schema["properties"] == {
        "region": {
            "type": "string",
            "title": "region",
            "description": "Where it runs",
            "enum": ["eu", "us"],
        },
        "replicas": {"type": "integer", "title": "How many"},
        "ratio": {"type": "number", "title": "ratio"},
        "public": {"type": "boolean", "title": "public"},
    }
    assert schema["required"] == ["region", "replicas", "public"]


def test_a_bare_question_asks_for_free_text() -> None:
    schema = form_schema(params(question="What should the release be called?"))
    assert schema["properties"] == {"answer": {"type": "string", "title": "Answer"}}
    assert schema["required"] == ["answer"]


@pytest.mark.parametrize(
    "bad",
    [
        {"question": ""},
        {"question": "q", "choices": ["only one"]},
        {"question": "q", "fields": [{"name": "n", "type": "integer", "options": ["1"]}]},
        {"question": "q", "fields": [{"name": "a"}, {"name": "a"}]},
        {"question": "q", "choices": ["x", "y"], "fields": [{"name": "choice"}]},
        {"question": "q", "fields": [{"name": "has space"}]},
        {"question": "q", "fields": [{"name": "n", "type": "array"}]},
    ],
)
def test_forms_acp_cannot_show_are_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        AskUserParams.model_validate(bad)


def test_it_is_read_only_and_offered_only_when_asked_for() -> None:
    assert "ask_user" not in builtin_tools()
    tools = builtin_tools(ask_user=True)
    assert tools["ask_user"].read_only
    assert "ask_user" in tools_for_mode(tools, "read-only")


def test_the_policy_never_asks_permission_to_ask(root: Path) -> None:
    ctx = context(root, Asker(ElicitationAnswer("decline")))
    for mode in ("ask", "accept-edits", "read-only"):
        assert decide(TOOL, params(question="q"), ctx, mode, PermissionMemory()) == "allow"


# --- the replies -----------------------------------------------------------------------------


async def test_accepted_answers_go_to_the_model_by_name(root: Path) -> None:
    asker = Asker(ElicitationAnswer("accept", {"choice": "SQLite", "extra": "dropped"}))
    outcome = await TOOL.run(
        params(question="Which database?", choices=["Postgres", "SQLite"]), context(root, asker)
    )
    [asked] = asker.asked
    assert asked.message == "Which database?"
    assert asked.mode == "form"
    assert asked.tool_call_id == "call-1"
    assert asked.schema is not None and asked.schema["required"] == ["choice"]
    assert outcome.model_text == 'The user answered: {"choice": "SQLite"}'
    assert outcome.display == (TextPart("Choice: SQLite"),)


async def test_an_answer_left_empty_is_named(root: Path) -> None:
    asker = Asker(ElicitationAnswer("accept", {}))
    outcome = await TOOL.run(params(question="Name?"), context(root, asker))
    assert outcome.model_text == "The user answered: {} (left empty: answer)"


async def test_a_decline_is_told_to_the_model_and_the_turn_goes_on(root: Path) -> None:
    outcome = await TOOL.run(
        params(question="Name?"), context(root, Asker(ElicitationAnswer("decline")))
    )
    assert outcome.model_text.startswith("The user declined to answer.")


async def test_a_cancel_ends_the_turn(root: Path) -> None:
    with pytest.raises(TurnCancelled, match="dismissed"):
        await TOOL.run(params(question="Name?"), context(root, Asker(ElicitationAnswer("cancel"))))


async def test_without_a_way_to_ask_the_call_fails(root: Path) -> None:
    with pytest.raises(ToolFailed, match="cannot put questions"):
        await TOOL.run(params(question="Name?"), context(root, None))


async def test_an_editor_error_fails_the_call_readably(root: Path) -> None:
    asker = Asker(RuntimeError("method not found: elicitation/create"))
    with pytest.raises(ToolFailed, match="could not ask the question: method not found"):
        await TOOL.run(params(question="Name?"), context(root, asker))


def test_the_title_is_the_question_cut_short(root: Path) -> None:
    long = "Which of these " + "very " * 30 + "long options?"
    title = TOOL.title(params(question=long), context(root, None))
    assert title.startswith("Ask: Which of these very")
    assert len(title) <= 70
    assert title.endswith("…")


def test_its_schema_is_self_contained_strict_and_described() -> None:
    parameters = TOOL.spec().parameters
    assert "$ref" not in str(parameters) and "$defs" not in parameters
    assert parameters["additionalProperties"] is False
    field = parameters["properties"]["fields"]["items"]
    assert field["additionalProperties"] is False
    for properties in (parameters["properties"], field["properties"]):
        for name, schema in properties.items():
            assert schema.get("description"), name
