"""An agent CLI that tries to reach the run of the agent beside it on a shared server.

Tests install this file's text as ``claude`` on PATH and run a sweep of two
such agents at once. Each reaches its own run through its generated config,
submits, writes ``ready.json`` and waits for ``targets.json`` (written into its
workspace by the test once both are ready: the other's run id, workspace and
config file). Then it tries the other's run with its own token (status,
feedback, submit, finalize), the other's workspace as ``program_dir``, the
other's config file (its token), the server without a token or with a made-up
one. Each attempt goes to ``attempts.json`` (``succeeded`` true means a wall
failed); then it finalizes its own run.
"""

import json
import socket
import sys
import time
from pathlib import Path

import anyio
from mcp import Client

from evopolicy_mcp.agents.client import transport
from evopolicy_mcp.agents.config import Remote

WORKSPACE = Path.cwd()
ATTEMPTS: list[dict[str, object]] = []


def own_server() -> Remote:
    argv = sys.argv[1:]
    config = json.loads(Path(argv[argv.index("--mcp-config") + 1]).read_text())
    entry = config["mcpServers"]["evopolicy"]
    return Remote(entry["url"], entry["headers"]["Authorization"].removeprefix("Bearer "))


def attempt(what: str, action: "object") -> None:
    try:
        result = action()  # type: ignore[operator]
    except BaseException as exc:
        ATTEMPTS.append(
            {"what": what, "succeeded": False, "detail": f"{type(exc).__name__}: {exc}"}
        )
    else:
        ATTEMPTS.append({"what": what, "succeeded": True, "detail": repr(result)[:200]})


def http_status(url: str, token: "str | None") -> int:
    host, rest = url.removeprefix("http://").split("/", 1)
    address, port = host.rsplit(":", 1)
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    request = f"GET /{rest} HTTP/1.0\r\nHost: {host}\r\n{auth}\r\n".encode()
    with socket.create_connection((address, int(port)), timeout=10) as s:
        s.sendall(request)
        status = int(s.recv(64).split()[1])
    if status == 401:
        raise PermissionError("HTTP 401")
    return status


async def tool(client: Client, what: str, name: str, args: dict) -> dict:
    result = await client.call_tool(name, args)
    text = str(result.content[0].text) if result.content else ""  # type: ignore[union-attr]
    ATTEMPTS.append({"what": what, "succeeded": not result.is_error, "detail": text[:300]})
    return result.structured_content or {}


async def play() -> None:
    server = own_server()
    async with Client(transport(server, {})) as client:
        run = (await client.call_tool("start_run", {"task_id": "mini"})).structured_content
        assert run is not None
        run_id = run["run_id"]
        sub = await client.call_tool(
            "submit_policy",
            {"run_id": run_id, "episodes": "0:2", "wait_seconds": 40,
             "program_dir": str(WORKSPACE / "program")},
        )  # fmt: skip
        assert not sub.is_error, sub
        (WORKSPACE / "ready.json").write_text(json.dumps({"run_id": run_id}))
        deadline = time.monotonic() + 120
        while not (WORKSPACE / "targets.json").exists() and time.monotonic() < deadline:
            await anyio.sleep(0.1)
        other = json.loads((WORKSPACE / "targets.json").read_text())
        theirs = other["run_id"]
        await tool(client, "the other's run status", "run_status", {"run_id": theirs})
        await tool(client, "the other's feedback", "get_feedback",
                   {"run_id": theirs, "submission_id": "s1"})  # fmt: skip
        await tool(client, "submit to the other's run", "submit_policy",
                   {"run_id": theirs, "episodes": "2", "wait_seconds": 0,
                    "files": {"policy.py": (WORKSPACE / "program" / "policy.py").read_text()}})  # fmt: skip
        await tool(client, "finalize the other's run", "finalize",
                   {"run_id": theirs, "candidates": ["s1"]})  # fmt: skip
        for what, folder in (
            ("submit the other's program", str(Path(other["workspace"]) / "program")),
            ("submit the other's workspace", other["workspace"]),
        ):
            await tool(client, what, "submit_policy",
                       {"run_id": run_id, "episodes": "3", "wait_seconds": 0,
                        "program_dir": folder})  # fmt: skip
        mine = await client.call_tool("start_run", {"task_id": "mini"})
        got = (mine.structured_content or {}).get("run_id")
        ATTEMPTS.append({"what": "start_run gives another run", "succeeded": got != run_id,
                         "detail": str(got)})  # fmt: skip
        attempt("read the other's config (its token)", lambda: Path(other["config"]).read_text())
        attempt("list the other's workspace", lambda: list(Path(other["workspace"]).iterdir()))
        attempt("the server without a token", lambda: http_status(server.url, None))
        attempt("the server with a made-up token", lambda: http_status(server.url, "x" * 43))
        (WORKSPACE / "attempts.json").write_text(json.dumps(ATTEMPTS, indent=1))
        status = await client.call_tool("run_status", {"run_id": run_id})
        assert not status.is_error, status
        done = await client.call_tool("finalize", {"run_id": run_id, "candidates": ["s1"]})
        assert not done.is_error, done
    print(json.dumps({"type": "result", "finalized": True}), flush=True)


if __name__ == "__main__":
    anyio.run(play)
