"""Loads the `mcp` SDK's client side without the server side its packages import.

`mcp/__init__.py` and `mcp/client/__init__.py` import everything the SDK offers, the
server's included (starlette, uvicorn, sse-starlette, the server's resources and auth: a
quarter of the SDK's ~0.5 s of imports and ~190 modules), though a client session, its
transports and `mcp_types` import none of it. So before the first `mcp` import, both
packages are put in `sys.modules` as they are found but with their `__init__` not yet run;
the submodules the bridge names load as usual. A name only an `__init__` binds (`mcp.Client`,
`from mcp import ClientSession`) runs that `__init__` on the spot, so any use of the
packages still finds what they export.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
from types import ModuleType

PACKAGES = ("mcp", "mcp.client")
"""Parents first: `mcp.client` is found through the `mcp` package's path."""

_lock = threading.RLock()
"""Reentrant: one package's `__init__` may ask for a name the other's binds."""


def import_without_server_side(module: str) -> ModuleType:
    """`importlib.import_module(module)`, the SDK's packages deferred first (when nothing
    imported them yet)."""
    with _lock:
        for name in PACKAGES:
            if name not in sys.modules:
                sys.modules[name] = _deferred_package(name)
    return importlib.import_module(module)


def _deferred_package(name: str) -> ModuleType:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    package = importlib.util.module_from_spec(spec)
    loader = spec.loader

    def run_init(attribute: str) -> object:
        """The package's `__init__`, run once, the first time a name it binds is asked for."""
        with _lock:
            if package.__dict__.get("__getattr__") is run_init:
                del package.__dict__["__getattr__"]  # the `__init__`'s own lookups are plain
                loader.exec_module(package)
        try:
            return package.__dict__[attribute]
        except KeyError:
            raise AttributeError(f"module {name!r} has no attribute {attribute!r}") from None

    package.__dict__["__getattr__"] = run_init
    return package
