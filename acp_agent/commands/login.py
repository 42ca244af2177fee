"""`acp-agent login` and `acp-agent logout`: store (or forget) a provider's API key.

    acp-agent login [PROVIDER] [--no-check] [--store auto|file|keyring]
    acp-agent logout [PROVIDER]

`login` is what an editor's login button runs in a terminal (the `terminal` auth method of
`protocol.handshake`): it offers the configured providers that take an API key (with no
config file, openai and anthropic), reads the key with hidden input, checks it with one
cheap request (`GET /models`, which costs nothing), and stores it (`credentials.py`). With
stdin not a terminal it reads the key from stdin's first line and takes PROVIDER, else the
first provider offered, so it can be scripted. Exit 0: stored; 1: not stored (refused key,
no key, unreachable API, unusable store); 2: bad usage.

The key is never printed, logged or put in an error message; the API's error text is
shown with the key cut out.
"""

from __future__ import annotations

import argparse
import difflib
import getpass
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

from ..credentials import CredentialsError, CredentialStore, credentials_path
from ._common import DEFAULT_KEY_VARIABLES, EXIT_FAILED, EXIT_OK, EXIT_USAGE

if TYPE_CHECKING:
    from ..config import AgentConfig
    from ._common import Subcommands

CHECK_TIMEOUT = 20.0
OPENAI_URL = "https://api.openai.com/v1"
ANTHROPIC_URL = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"
AZURE_API_VERSION = "2024-10-21"
"""For the check only (listing models), on Azure's versioned API without `api_version`."""
KEYED_TYPES = ("openai", "azure-openai", "openai-compatible", "anthropic")
"""Provider types that take an API key (Bedrock and Vertex use the cloud's credentials)."""


class LoginFailed(Exception):
    """Nothing was stored; the message says why and what to do."""


class NoSuchProvider(LoginFailed):
    """A usage error (exit 2, as for any command): the provider named is not configured."""


@dataclass(frozen=True, slots=True)
class Candidate:
    """A provider whose key may be stored."""

    name: str
    type: str
    base_url: str | None = None
    api_version: str | None = None
    key_variable: str | None = None
    """The variable that, when set, wins over a stored key."""
    inline_key: bool = False
    """The config holds the key itself (`api_key`), which wins over a stored key."""


# --- the command line ------------------------------------------------------------------------


def add_login_commands(commands: Subcommands, common: Sequence[argparse.ArgumentParser]) -> None:
    login = commands.add_parser(
        "login",
        parents=list(common),
        help="store a provider's API key (an editor's login button runs this)",
        description="Ask for a provider and its API key (hidden input), check the key with "
        "one request and store it for this user; acp-agent uses it when neither the "
        "environment nor the config gives a key. With stdin not a terminal, the key is the "
        "first line of stdin.",
    )
    login.add_argument(
        "provider",
        nargs="?",
        metavar="PROVIDER",
        help="the provider's name in the config (without a config: openai or anthropic)",
    )
    login.add_argument(
        "--no-check", action="store_true", help="store the key without checking it first"
    )
    login.add_argument(
        "--store",
        choices=("auto", "file", "keyring"),
        default="auto",
        help="where the key goes: the OS keyring when the `keyring` package is installed "
        "(auto), else an owner-only file in the user's config directory",
    )
    logout = commands.add_parser(
        "logout",
        parents=list(common),
        help="forget the API keys `acp-agent login` stored",
    )
    logout.add_argument(
        "provider", nargs="?", metavar="PROVIDER", help="only this provider's key (default: all)"
    )


def login_command(
    args: argparse.Namespace,
    env: Mapping[str, str] | None = None,
    stdin: TextIO | None = None,
    out: TextIO | None = None,
) -> int:
    env = os.environ if env is None else env
    stdin = sys.stdin if stdin is None else stdin
    out = sys.stdout if out is None else out
    try:
        candidates = _candidates(getattr(args, "config", None), env)
        candidate = _choose(candidates, args.provider, stdin, out)
        key = _read_key(candidate, stdin)
        if not args.no_check:
            print(f"Checking the key with {candidate.name}'s API ...", file=out, flush=True)
            check_key(candidate, key)
        store = CredentialStore(credentials_path(env))
        use_keyring = {"auto": None, "file": False, "keyring": True}[args.store]
        where = store.save(candidate.name, key, use_keyring=use_keyring)
    except (LoginFailed, CredentialsError) as exc:
        print(f"acp-agent login: {exc}", file=sys.stderr, flush=True)
        return EXIT_USAGE if isinstance(exc, NoSuchProvider) else EXIT_FAILED
    except (KeyboardInterrupt, EOFError):
        print("\nacp-agent login: cancelled; nothing stored", file=sys.stderr, flush=True)
        return EXIT_FAILED
    place = "the OS keyring" if where == "keyring" else str(store.path)
    print(f"Logged in to {candidate.name}: the key is stored in {place}.", file=out)
    for warning in _shadowed(candidate, env):
        print(f"Note: {warning}", file=out)
    return EXIT_OK


def logout_command(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> int:
    env = os.environ if env is None else env
    store = CredentialStore(credentials_path(env))
    try:
        forgotten = store.remove(args.provider)
    except CredentialsError as exc:
        print(f"acp-agent logout: {exc}", file=sys.stderr, flush=True)
        return EXIT_FAILED
    if forgotten:
        print(f"Forgot the stored key of {', '.join(forgotten)}.")
    elif args.provider:
        print(f"No key of {args.provider} is stored.")
    else:
        print("No keys are stored.")
    return EXIT_OK


# --- which provider ------------------------------------------------------------------------


def _candidates(config_option: str | None, env: Mapping[str, str]) -> list[Candidate]:
    """The configured providers that take a key; without a config file, openai and
    anthropic (at the base URLs the environment names, as the agent would use them)."""
    from ..paths import config_path

    path = config_path(config_option, env)
    if path is None:
        return [
            Candidate(
                "openai", "openai", env.get("OPENAI_BASE_URL") or None, None, "OPENAI_API_KEY"
            ),
            Candidate(
                "anthropic",
                "anthropic",
                env.get("ANTHROPIC_BASE_URL") or None,
                None,
                "ANTHROPIC_API_KEY",
            ),
        ]
    from ..config import ConfigError, load_config

    try:
        config = load_config(path, env)
    except ConfigError as exc:
        raise LoginFailed(str(exc)) from None
    found = _keyed_providers(config)
    if not found:
        raise LoginFailed(
            f"no provider in {path} takes an API key (types {', '.join(KEYED_TYPES)})"
        )
    return found


def _keyed_providers(config: AgentConfig) -> list[Candidate]:
    found = []
    for name, provider in config.providers.items():
        if provider.type not in KEYED_TYPES:
            continue
        settings: Any = provider
        found.append(
            Candidate(
                name,
                provider.type,
                settings.base_url,
                getattr(settings, "api_version", None),
                settings.api_key_env or DEFAULT_KEY_VARIABLES.get(provider.type),
                bool(settings.api_key),
            )
        )
    return found


def _choose(
    candidates: list[Candidate], wanted: str | None, stdin: TextIO, out: TextIO
) -> Candidate:
    names = [candidate.name for candidate in candidates]
    if wanted is not None:
        for candidate in candidates:
            if candidate.name == wanted:
                return candidate
        close = difflib.get_close_matches(wanted, names, n=1, cutoff=0.7)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise NoSuchProvider(
            f"no provider {wanted!r} to log in to; {hint}choose one of: {', '.join(names)}"
        )
    if len(candidates) == 1 or not _is_tty(stdin):
        return candidates[0]
    print("Log in to which provider?", file=out)
    for number, name in enumerate(names, 1):
        print(f"  {number}. {name}", file=out)
    while True:
        print(f"Provider [1-{len(names)}, default 1]: ", end="", file=out, flush=True)
        answer = stdin.readline()
        if not answer:
            raise EOFError
        answer = answer.strip()
        if not answer:
            return candidates[0]
        if answer in names:
            return candidates[names.index(answer)]
        if answer.isdigit() and 1 <= int(answer) <= len(names):
            return candidates[int(answer) - 1]
        print(f"Type a number from 1 to {len(names)}, or a name.", file=out)


def _read_key(candidate: Candidate, stdin: TextIO) -> str:
    if _is_tty(stdin):
        key = getpass.getpass(f"API key for {candidate.name} (input hidden): ")
    else:
        key = stdin.readline()
    key = key.strip()
    if not key:
        raise LoginFailed("no key given; nothing stored")
    if any(ord(char) < 0x21 or ord(char) == 0x7F for char in key):
        raise LoginFailed("the key holds spaces or control characters; nothing stored")
    return key


def _shadowed(candidate: Candidate, env: Mapping[str, str]) -> list[str]:
    """What wins over the stored key, so the user is not surprised it goes unused."""
    if candidate.inline_key:
        return [f"the config's providers.{candidate.name}.api_key is used before the stored key"]
    variable = candidate.key_variable
    if variable and env.get(variable):
        return [f"{variable} is set here, and is used before the stored key"]
    return []


def _is_tty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


# --- the check -----------------------------------------------------------------------------


def check_key(candidate: Candidate, key: str) -> None:
    """One request that needs a valid key and costs nothing (listing models); raises
    `LoginFailed` saying what went wrong, with the key cut out of anything shown."""
    import httpx2

    url, headers, params = _check_request(candidate, key)
    try:
        response = httpx2.get(url, headers=headers, params=params, timeout=CHECK_TIMEOUT)
    except httpx2.HTTPError as exc:
        reason = _redact(str(exc) or type(exc).__name__, key)
        raise LoginFailed(
            f"could not reach {url}: {reason}; nothing stored (--no-check stores it unchecked)"
        ) from None
    if response.is_success:
        return
    detail = _redact(_error_message(response), key)
    if response.status_code in (401, 403):
        raise LoginFailed(
            f"{candidate.name} refused the key (HTTP {response.status_code}: {detail}); "
            "nothing stored"
        )
    raise LoginFailed(
        f"the check GET {url} answered HTTP {response.status_code} ({detail}); nothing "
        "stored (--no-check stores the key unchecked)"
    )


def _check_request(candidate: Candidate, key: str) -> tuple[str, dict[str, str], dict[str, str]]:
    """The URL, headers and query of the check, as the provider's SDK would send them."""
    if candidate.type == "anthropic":
        root = (candidate.base_url or ANTHROPIC_URL).rstrip("/")
        headers = {"x-api-key": key, "anthropic-version": ANTHROPIC_VERSION}
        return f"{root}/v1/models", headers, {}
    base = (candidate.base_url or OPENAI_URL).rstrip("/")
    if candidate.type == "azure-openai":
        headers = {"api-key": key}
        if base.endswith("/openai/v1"):
            return f"{base}/models", headers, {}
        version = candidate.api_version or AZURE_API_VERSION
        return f"{base}/openai/models", headers, {"api-version": version}
    return f"{base}/models", {"Authorization": f"Bearer {key}"}, {}


def _error_message(response: Any) -> str:
    """The API's own words (`error.message`), else the start of the body."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        error = body.get("error")
        message = error.get("message") if isinstance(error, dict) else error
        if isinstance(message, str) and message:
            return message[:300]
    text = str(response.text).strip()
    return text[:300] or "no details"


def _redact(text: str, key: str) -> str:
    """`text` without the key, nor the parts of it APIs echo back masked (`sk-ab***yz`)."""
    text = text.replace(key, "[key]")
    for size in (12, 8, 6):
        if len(key) > 2 * size:
            text = text.replace(key[:size], "[key]").replace(key[-size:], "[key]")
    return text


__all__ = [
    "Candidate",
    "LoginFailed",
    "add_login_commands",
    "check_key",
    "login_command",
    "logout_command",
]
