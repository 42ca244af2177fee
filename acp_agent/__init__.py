"""acp-agent: any LLM API as a coding agent in any editor that speaks ACP."""

__version__ = "0.1.0"
