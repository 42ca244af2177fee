"""What one headless run is asked to do, checked before anything starts.

The prompt: the words given, joined with spaces; `-` stands for what stdin holds, and so
does no prompt at all when stdin is not a terminal (`git diff | acp-agent run`). The model:
`--model provider/model`, or a model id configured under one provider only; with no config
file, a bare id is given to the agent as `ACP_AGENT_MODEL` (the model of the provider its
key selects). Bad input raises `UsageError`; the run then exits 2 with nothing started.
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from .. import paths
from ..config import MODEL_ENV_VAR, NO_INSTRUCTIONS_ENV_VAR, AgentConfig, load_config
from ..credentials import stored_keys
from ._client import PermissionMode
from ._output import OutputFormat

STDIN_WORD = "-"


class UsageError(Exception):
    """Bad command-line input; the message is ready to show."""


@dataclass(frozen=True, slots=True)
class RunOptions:
    prompt: str
    config_path: str | None
    """The config file named on the command line (absolute), else None: the agent finds
    the same one we did (`$ACP_AGENT_CONFIG`, the user's file) or uses its environment."""
    cwd: Path
    permissions: PermissionMode
    debug: bool
    log_level: str | None
    """None: the config file's, else info."""
    log_file: str | None = None
    model: str | None = None
    """'provider/model' to switch the session to; None: the configuration's default."""
    output: OutputFormat = "text"
    agent_env: dict[str, str] = field(default_factory=dict)
    """Variables set for the agent on top of ours (`ACP_AGENT_MODEL`)."""
    log_dir: Path | None = None
    """Where the agent's log goes (`_logs.py`); None: the system's temporary directory."""


def run_options(
    args: argparse.Namespace, env: Mapping[str, str], stdin: TextIO | None = None
) -> tuple[RunOptions, AgentConfig]:
    """The run's options and the configuration the agent will load; raises `UsageError`
    or `ConfigError`."""
    stdin = sys.stdin if stdin is None else stdin
    cwd = Path(os.path.abspath(getattr(args, "cwd", None) or os.getcwd()))
    if not cwd.is_dir():
        raise UsageError(f"--cwd: not a directory: {cwd}")
    # `run_config` is what older callers name `run --config`; both name the same file.
    named = getattr(args, "run_config", None) or getattr(args, "config", None)
    config_path = os.path.abspath(named) if named else None
    config = load_config(config_path, env, stored_keys(env))
    model, agent_env, config = _resolve_model(getattr(args, "model", None), config, env, named)
    if getattr(args, "no_project_instructions", False):
        agent_env = {**agent_env, NO_INSTRUCTIONS_ENV_VAR: "1"}
    prompt, from_stdin = read_prompt(list(getattr(args, "prompt", None) or []), stdin)
    permissions: PermissionMode
    if getattr(args, "yes", False):
        permissions = "approve"
    elif _is_tty(stdin) and not from_stdin:
        permissions = "ask"
    else:
        permissions = "reject"  # no terminal to ask on (a prompt read from it used it up)
    options = RunOptions(
        prompt=prompt,
        config_path=config_path,
        cwd=cwd,
        permissions=permissions,
        debug=bool(getattr(args, "debug", False)),
        log_level=getattr(args, "log_level", None),
        log_file=getattr(args, "log_file", None),
        model=model,
        output=getattr(args, "output", None) or "text",
        agent_env=agent_env,
        log_dir=paths.state_dir(config.state_dir, env) / "logs",
    )
    return options, config


def read_prompt(words: list[str], stdin: TextIO) -> tuple[str, bool]:
    """The prompt text, and whether stdin went into it."""
    if not words:
        if _is_tty(stdin):
            raise UsageError('no prompt: acp-agent run "what to do" (or - to read it from stdin)')
        words = [STDIN_WORD]
    piped = stdin.read().strip("\n") if STDIN_WORD in words else ""
    prompt, after_block = "", False
    for word in words:
        block = word == STDIN_WORD
        piece = piped if block else word
        if not piece:
            continue
        # Words join with spaces; what stdin held stands on lines of its own.
        separator = "\n" if block or after_block else " "
        prompt = prompt + separator + piece if prompt else piece
        after_block = block
    if not prompt.strip():
        raise UsageError(
            'the prompt is empty: acp-agent run "what to do" (or - to read it from stdin)'
        )
    return prompt, STDIN_WORD in words


def _resolve_model(
    requested: str | None, config: AgentConfig, env: Mapping[str, str], named: str | None
) -> tuple[str | None, dict[str, str], AgentConfig]:
    if not requested:
        return None, {}, config
    found = find_model(config, requested)
    if found is not None:
        return found, {}, config
    several = [choice for choice, _, model in config.model_choices() if model.id == requested]
    if len(several) > 1:
        raise UsageError(f"--model: {requested!r} is offered by {', '.join(several)}: name one")
    first = next(iter(config.providers))
    model_id = requested.removeprefix(f"{first}/")
    if paths.config_path(named, env) is None and "/" not in model_id:
        # No config file: the environment's (first) provider takes the model by name, as
        # ACP_AGENT_MODEL does for the agent an editor starts.
        agent_env = {MODEL_ENV_VAR: model_id}
        derived = load_config(None, {**env, **agent_env}, stored_keys(env))
        found = find_model(derived, requested)
        if found is not None:
            return found, agent_env, derived
    choices = config.model_choices()
    known = ", ".join(choice for choice, _, _ in choices)
    names = [*(choice for choice, _, _ in choices), *(model.id for _, _, model in choices)]
    close = difflib.get_close_matches(requested, names, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise UsageError(
        f"--model: no model {requested!r} is configured; {hint}configured: {known} "
        "(acp-agent models lists them)"
    )


def find_model(config: AgentConfig, requested: str) -> str | None:
    """'provider/model' for `requested`: that exact choice, or a model id one provider has."""
    choices = config.model_choices()
    if any(choice == requested for choice, _, _ in choices):
        return requested
    matches = [choice for choice, _, model in choices if model.id == requested]
    return matches[0] if len(matches) == 1 else None


def _is_tty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
