"""Provider failures, translated once from what the vendors report (the table in
`_error_table`).

    ProviderError            any failed model call; the message is shown to the user
    ├── AuthError            missing or rejected credentials; names what to set
    ├── RateLimitError       429, or a rate-limit error inside a stream        (retryable)
    ├── ContextWindowError   the request does not fit the model's context window
    └── ProviderUnavailable  connection failures, timeouts, 5xx (overloaded too), broken
        │                    streams                                         (retryable)
        └── NotListening     connection refused at a loopback or private address: a local
                             server that is not running; fails at once     (not retryable)

`retryable` tells the retry wrapper (`retry.py`) that the same request may succeed if sent
again; `retry_after` carries the server's `retry-after` / `retry-after-ms` hint in seconds.
"""

from __future__ import annotations


class ProviderError(Exception):
    retryable: bool = False
    """Whether sending the same request again may succeed."""
    status: int | None = None
    """The HTTP status the server failed with, when it answered one (for the log)."""

    def __init__(self, provider: str, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(f"{provider}: {message}")
        self.provider = provider
        self.detail = message
        """The message without the provider's name."""
        self.retry_after = retry_after
        """Seconds the server asked us to wait before retrying, if it said."""


class AuthError(ProviderError):
    def __init__(self, provider: str, message: str, *, fix: str) -> None:
        super().__init__(provider, f"{message}; {fix}")
        self.fix = fix


class RateLimitError(ProviderError):
    retryable = True


class ContextWindowError(ProviderError):
    pass


class ProviderUnavailable(ProviderError):
    retryable = True


def login_fix(provider: str) -> str:
    """How to store a key without touching the environment (the editor's login button runs
    the same command in a terminal)."""
    return f"or store a key with `acp-agent login {provider}` (the editor's login button runs it)"


def key_fix(
    provider: str,
    *,
    stored: bool,
    api_key_env: str | None,
    api_key: bool,
    default_env: str | None,
) -> str:
    """What to do about a missing or refused key, by where it came from: the key stored by
    `acp-agent login`, the variable the config names, the config's own `api_key`, else the
    type's default variable (`default_env`; None where the type has none)."""
    setting = f"providers.{provider}.api_key_env"
    login = login_fix(provider)
    if stored:
        return f"log in again: `acp-agent login {provider}` replaces the stored key"
    if api_key_env:
        return f"set {api_key_env} (the variable {setting} names), {login}"
    if api_key:
        return f"check providers.{provider}.api_key, or use {setting} instead"
    if default_env:
        return f"set {default_env}, or name another variable in {setting}, {login}"
    return f"name the variable that holds the key in {setting}, {login}"


class NotListening(ProviderUnavailable):
    # Retrying a local server that refused only delays the answer by the whole retry budget:
    # it is not running, and waiting seconds will not start it.
    retryable = False
