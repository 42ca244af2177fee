"""`acp-agent run`: drive `acp-agent` as a real ACP client and print the turn on a terminal.

The runner starts the agent as a subprocess and speaks to it over our own JSON-RPC layer
(`rpc.Endpoint`), implementing the client side locally: files, terminals and permission
answers. It reaches the agent only through the wire, so it exercises what editors see.
"""

from ._headless import print_usage_error, run_headless

__all__ = ["print_usage_error", "run_headless"]
