"""The starter configs `acp-agent config init PROVIDER` writes: the project's commented
examples (`configs/*.toml`, which the tests load), shipped inside the wheel.

A built wheel carries them as `acp_agent/_configs/` (pyproject's `force-include`); a source
checkout has them at `configs/` beside the package. Standard library only: the parser lists
`STARTER_PROVIDERS` on every start.
"""

from __future__ import annotations

from pathlib import Path

STARTER_PROVIDERS = (
    "anthropic",
    "azure",
    "bedrock",
    "echo",
    "litellm",
    "lmstudio",
    "ollama",
    "openai",
    "openrouter",
    "vertex",
    "vllm",
)
"""`config init` choices; each is the stem of an example file."""


def examples_dir() -> Path:
    package = Path(__file__).resolve().parent.parent
    for candidate in (package / "_configs", package.parent / "configs"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"the example configs are missing beside {package}")


def example_text(provider: str) -> str:
    """The example config for `provider`, as shipped."""
    if provider not in STARTER_PROVIDERS:
        raise ValueError(f"no starter config for {provider!r}")
    return (examples_dir() / f"{provider}.toml").read_text(encoding="utf-8")
