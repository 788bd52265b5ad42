"""The launcher's channel to a server it shares between its agents
(``serve --transport http --clients-from-stdin``, as ``agent sweep`` starts it).

The launcher holds the server's stdin, a pipe, and writes one JSON object per line:

- ``{"bind": TOKEN, "task": ID, "run": RUN, "program_root": DIR}``: requests that
  carry bearer token TOKEN are now run RUN's client: that run only, programs from
  DIR only (:mod:`evopolicy_mcp.host.bindings`);
- ``{"drop": TOKEN}``: that token opens the server no more.

Tokens travel only here: never on a command line or in an environment. A line
that cannot be applied changes nothing and is logged without its token (the
launcher sees that the token does not open the server). When stdin closes (the
launcher ended or died) the server stops.
"""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path
from typing import IO

from evopolicy_mcp.host.authority import Host
from evopolicy_mcp.server.bridge import token_client
from evopolicy_mcp.server.http_auth import Tokens

__all__ = ["apply", "follow"]

log = logging.getLogger(__name__)

MAX_LINE = 1 << 16


def apply(line: str, host: Host, tokens: Tokens) -> str:
    """Apply one control line; what it did (no token in it), or ValueError."""
    assert host.bindings is not None, "a host made with bound_clients=True"
    try:
        message = json.loads(line)
    except ValueError:
        raise ValueError("not a JSON line") from None
    if not isinstance(message, dict):
        raise ValueError("not a JSON object")
    if isinstance(message.get("bind"), str) and message["bind"]:
        token = message["bind"]
        task, run, root = message.get("task"), message.get("run"), message.get("program_root")
        if not isinstance(task, str) or not isinstance(run, str):
            raise ValueError("a binding needs the task and the run")
        if root is not None and not isinstance(root, str):
            raise ValueError("program_root must be a path")
        # The binding first: once the token opens the server, its run is there.
        host.bindings.add(token_client(token), task, run, Path(root) if root else None)
        tokens.add(token)
        return f"bound a client to run {run}"
    if isinstance(message.get("drop"), str):
        token = message["drop"]
        tokens.remove(token)
        dropped = host.bindings.drop(token_client(token))
        return f"released run {dropped.run}" if dropped else "dropped an unknown client"
    raise ValueError("neither 'bind' nor 'drop'")


def follow(stream: IO[str], host: Host, tokens: Tokens, stop: threading.Event) -> threading.Thread:
    """Apply ``stream``'s lines as they come, in a thread; set ``stop`` when it closes."""

    def loop() -> None:
        try:
            while line := stream.readline(MAX_LINE):
                try:
                    log.info("control: %s", apply(line, host, tokens))
                except ValueError as exc:
                    log.error("control line refused: %s", exc)
        except (OSError, ValueError) as exc:  # a closed or broken pipe: the launcher is gone
            log.error("control channel lost: %s", exc)
        finally:
            stop.set()

    thread = threading.Thread(target=loop, name="evopolicy-control", daemon=True)
    thread.start()
    return thread
