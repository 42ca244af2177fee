"""agent: hand a self-contained task to a subagent, a child session with its own history.

The child starts with this session's working directory, roots, permission mode, project
instructions and MCP servers, and gets the task as its first prompt; its final reply is
this call's result. Several calls in one reply run at the same time. How the child is made
and shown is the sessions room's (`ToolContext.delegate`); this module is the tool's face.
"""

from __future__ import annotations

from pydantic import Field

from .base import Delegation, Tool, ToolContext, ToolFailed, ToolOutcome, ToolParams


class AgentParams(ToolParams):
    prompt: str = Field(
        min_length=1,
        description="The complete task for the subagent: it sees nothing of this conversation, "
        "so say what to do, where, what is known already and what to report back.",
    )
    description: str = Field(
        min_length=1, max_length=80, description="A few words naming the task (its title)."
    )
    model: str | None = Field(
        None, description="A configured 'provider/model' for the subagent; default: the usual."
    )
    tools: list[str] | None = Field(
        None,
        description="Names of the tools the subagent may use (a subset of yours); default: all.",
    )


class AgentTool(Tool[AgentParams]):
    """Start a subagent for a self-contained task (research across many files, an
    independent change, a review) and get its final report. It starts fresh, with your
    working directory, tools and permission mode but none of this conversation: put
    everything it needs in `prompt`. Several agent calls in one reply run at the same time;
    use them for independent tasks."""

    name = "agent"
    kind = "think"
    params_model = AgentParams
    # The subagent's own tool calls ask as they would here; starting one changes nothing.
    read_only = True
    concurrent = True

    def title(self, params: AgentParams, ctx: ToolContext) -> str:
        return f"Subagent: {params.description}"

    async def run(self, params: AgentParams, ctx: ToolContext) -> ToolOutcome:
        if ctx.delegate is None:
            raise ToolFailed("A subagent cannot start subagents of its own here.")
        tools = None if params.tools is None else tuple(dict.fromkeys(params.tools))
        return await ctx.delegate(
            Delegation(params.prompt, params.description, params.model, tools), ctx
        )
