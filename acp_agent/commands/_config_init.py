"""`acp-agent config init PROVIDER` and `acp-agent config path`.

`init` writes the commented example config of PROVIDER (the project's `configs/`) to the
user's config file, which acp-agent then reads by default (`acp_agent.paths`), or to
`--path`. An existing file is kept unless `--force`. The written file is loaded back before
we say it is done, so a starter that does not validate is never left behind silently.
`path` prints which config file acp-agent would read.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
from pathlib import Path

from .. import __version__, paths
from ..config import ConfigError, load_config_file
from ._common import DEFAULT_KEY_VARIABLES, EXIT_FAILED, EXIT_OK, EXIT_USAGE
from ._starters import example_text

NEEDS = {
    "anthropic": f"set {DEFAULT_KEY_VARIABLES['anthropic']} (or run: acp-agent login anthropic)",
    "azure": "set AZURE_OPENAI_API_KEY and put your resource's endpoint in base_url",
    "bedrock": "install the bedrock extra and have AWS credentials (AWS_PROFILE ...)",
    "echo": "nothing: it runs offline",
    "litellm": "set LITELLM_API_KEY and point base_url at your proxy",
    "lmstudio": "start LM Studio's server with a model loaded",
    "ollama": "run `ollama serve` and pull the models listed",
    "openai": f"set {DEFAULT_KEY_VARIABLES['openai']} (or run: acp-agent login openai)",
    "openrouter": "set OPENROUTER_API_KEY",
    "vertex": "install the vertex extra and run: gcloud auth application-default login",
    "vllm": "start vLLM with a tool-call parser (see the file's comments)",
}
"""What each starter still needs before a first prompt works."""


def main(args: argparse.Namespace) -> int:
    if args.config_command == "path":
        return _print_path(args)
    return init(args.provider, args.path, force=args.force)


def init(provider: str, path: str | None, *, force: bool) -> int:
    target = Path(path).expanduser() if path else paths.user_config_path()
    if target.exists() and not force:
        print(
            f"acp-agent: {target} already exists; pass --force to replace it",
            file=sys.stderr,
        )
        return EXIT_USAGE
    text = starter_config(provider, target)
    try:
        _write(target, text)
    except OSError as exc:
        print(f"acp-agent: cannot write {target}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_FAILED
    try:
        config = load_config_file(target)
    except ConfigError as exc:  # a broken starter is our bug; say so rather than hide it
        print(f"acp-agent: the starter config does not load: {exc}", file=sys.stderr)
        return EXIT_FAILED
    print(f"wrote {target} ({provider}; default model {config.default_choice})")
    print(f"before the first prompt: {NEEDS[provider]}")
    run = "acp-agent run" if path is None else f"acp-agent run --config {target}"
    print(f'then: {run} "Say hello"   (acp-agent doctor checks the setup)')
    return EXIT_OK


def starter_config(provider: str, target: Path) -> str:
    """The example for `provider`, with a header, its `--config` hints pointed at `target`."""
    example = example_text(provider)
    default = target == paths.user_config_path()
    replacement = "" if default else f"--config {target} "
    body = re.sub(rf"--config configs/{re.escape(provider)}\.toml ", replacement, example)
    lines = [f"# Written by `acp-agent config init {provider}` (acp-agent {__version__})."]
    if default:
        lines += [
            "# acp-agent reads this file when neither --config nor $ACP_AGENT_CONFIG names",
            "# another (`acp-agent config path` shows which one it reads).",
        ]
    else:
        lines.append(f"# Use it with --config {target}, or set ACP_AGENT_CONFIG={target}.")
    lines += ["# `acp-agent doctor` checks it; `acp-agent models` lists what it offers.", "#", ""]
    return "\n".join(lines) + body


def _write(target: Path, text: str) -> None:
    """Create the directory (owner-only, as the credentials beside it) and replace the file
    atomically, so a crash never leaves half a config."""
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=".config-", suffix=".toml", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(text)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _print_path(args: argparse.Namespace) -> int:
    chosen = paths.config_path(getattr(args, "config", None))
    if chosen is None:
        user = paths.user_config_path()
        print(f"none: a configuration from the environment ({user} does not exist)")
    else:
        print(chosen)
    return EXIT_OK
