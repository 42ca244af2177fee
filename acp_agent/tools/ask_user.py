"""ask_user: put a structured question to the user, as a form the editor shows
(`elicitation/create`), and give the model the answers.

Offered only when the client advertised form elicitation (`builtin_tools(ask_user=True)`);
it only asks, so the permission policy lets it run in every mode, read-only included.

The form is a flat object of primitive fields (string, number, integer, boolean, or a
string picked from `options`), the shape ACP's `ElicitationSchema` allows; `choices` is the
shortcut for the common case of one multiple-choice answer.

How the user's reply ends the call:

- accept: the model reads the answers, as JSON by field name;
- decline (the user said no): the model reads that the user declined, and goes on;
- cancel (the user dismissed the form): the turn ends `cancelled`, as when the user
  cancels a permission request: the user stepped out of the conversation, so the model
  must not guess on. The model reads that the call was cancelled the next time.
"""

from __future__ import annotations

import json
from typing import Any, Literal

import anyio
from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..messages import Elicitation, TextPart
from .base import Tool, ToolContext, ToolFailed, ToolOutcome, ToolParams, TurnCancelled

CHOICE = "choice"
"""The answer's name when the question was asked with `choices`."""
ANSWER = "answer"
"""The answer's name when the question has neither `choices` nor `fields`."""
TITLE_CHARS = 60

FieldType = Literal["string", "number", "integer", "boolean"]


class QuestionField(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(
        pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$",
        description="The answer's key in the result, e.g. 'database'.",
    )
    label: str | None = Field(None, description="What the form shows; the name if unset.")
    description: str | None = Field(None, description="A hint shown with the field.")
    type: FieldType = Field("string", description="The kind of value asked for.")
    options: list[str] | None = Field(
        None,
        min_length=1,
        max_length=25,
        description="For a string: the values the user picks one of.",
    )
    required: bool = Field(True, description="The user must fill it in.")

    @model_validator(mode="after")
    def _options_are_strings(self) -> QuestionField:
        if self.options is not None and self.type != "string":
            raise ValueError(f"{self.name}: options apply to string fields only")
        return self


class AskUserParams(ToolParams):
    question: str = Field(
        min_length=1, max_length=2000, description="The question, shown above the form."
    )
    choices: list[str] | None = Field(
        None,
        min_length=2,
        max_length=25,
        description="Shortcut for one multiple-choice answer: the options to pick from; the "
        f"pick comes back as '{CHOICE}'.",
    )
    fields: list[QuestionField] = Field(
        default_factory=list,
        max_length=10,
        description="The answers wanted, one form field each. With neither fields nor "
        f"choices the user types one free-text '{ANSWER}'.",
    )

    @model_validator(mode="after")
    def _distinct_names(self) -> AskUserParams:
        names = [field.name for field in self.fields] + ([CHOICE] if self.choices else [])
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(f"field names must differ: {', '.join(repeated)}")
        return self


class AskUser(Tool[AskUserParams]):
    """Ask the user a question and wait for the answer, when you cannot go on without their
    decision or information (which option they prefer, a value only they know). The editor shows
    it as a form. Ask rarely, and ask everything you need at once."""

    name = "ask_user"
    kind = "other"
    params_model = AskUserParams

    def title(self, params: AskUserParams, ctx: ToolContext) -> str:
        question = " ".join(params.question.split())
        if len(question) > TITLE_CHARS:
            question = question[: TITLE_CHARS - 1] + "…"
        return f"Ask: {question}"

    async def run(self, params: AskUserParams, ctx: ToolContext) -> ToolOutcome:
        if ctx.ask_user is None:
            raise ToolFailed("This editor cannot put questions to the user.")
        schema = form_schema(params)
        try:
            answer = await ctx.ask_user(
                Elicitation(
                    message=params.question,
                    mode="form",
                    schema=schema,
                    tool_call_id=ctx.tool_call_id or None,
                )
            )
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as exc:
            raise ToolFailed(f"The editor could not ask the question: {exc}") from None
        match answer.action:
            case "accept":
                return _answered(schema, answer.content or {})
            case "decline":
                return ToolOutcome(
                    model_text="The user declined to answer. Go on without the answer, or "
                    "ask differently if you cannot.",
                    display=(TextPart("Declined."),),
                    raw_output={"action": "decline"},
                )
            case _:
                raise TurnCancelled("The user dismissed the question.")


def form_schema(params: AskUserParams) -> dict[str, Any]:
    """The `requestedSchema` of the form: a flat object of primitive fields."""
    properties: dict[str, dict[str, Any]] = {}
    required: list[str] = []
    if params.choices:
        properties[CHOICE] = {"type": "string", "title": "Choice", "enum": list(params.choices)}
        required.append(CHOICE)
    for field in params.fields:
        prop: dict[str, Any] = {"type": field.type, "title": field.label or field.name}
        if field.description:
            prop["description"] = field.description
        if field.options:
            prop["enum"] = list(field.options)
        properties[field.name] = prop
        if field.required:
            required.append(field.name)
    if not properties:
        properties[ANSWER] = {"type": "string", "title": "Answer"}
        required.append(ANSWER)
    return {"type": "object", "properties": properties, "required": required}


def _answered(schema: dict[str, Any], content: dict[str, Any]) -> ToolOutcome:
    """The answers to the fields asked (anything else the client sent is dropped)."""
    asked: dict[str, Any] = schema["properties"]
    answers = {name: content[name] for name in asked if name in content}
    missing = [name for name in schema["required"] if name not in answers]
    text = "The user answered: " + json.dumps(answers, ensure_ascii=False)
    if missing:
        text += f" (left empty: {', '.join(missing)})"
    shown = "\n".join(
        f"{asked[name].get('title', name)}: {value}" for name, value in answers.items()
    )
    return ToolOutcome(
        model_text=text,
        display=(TextPart(shown or "No answer given."),),
        raw_output={"action": "accept", "answers": answers},
    )
