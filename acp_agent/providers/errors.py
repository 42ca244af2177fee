"""Provider failures, translated once from vendor exceptions.

    ProviderError            any failed model call; the message is shown to the user
    ├── AuthError            missing or rejected credentials; names what to set
    ├── RateLimitError       429 / overloaded after retries gave up
    ├── ContextWindowError   the request does not fit the model's context window
    └── ProviderUnavailable  connection failures, timeouts, 5xx, broken streams
"""

from __future__ import annotations


class ProviderError(Exception):
    def __init__(self, provider: str, message: str) -> None:
        super().__init__(f"{provider}: {message}")
        self.provider = provider


class AuthError(ProviderError):
    def __init__(self, provider: str, message: str, *, fix: str) -> None:
        super().__init__(provider, f"{message}; {fix}")
        self.fix = fix


class RateLimitError(ProviderError):
    pass


class ContextWindowError(ProviderError):
    pass


class ProviderUnavailable(ProviderError):
    pass
