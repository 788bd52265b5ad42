"""A hostile agent CLI. Tests install this file's text as an executable under a
provider's name (claude, codex, kimi, qodercli); it is not imported by the tests.

It reaches its run through the config the launcher generated for that provider,
as the real CLI would, and while it does, it tries everything a cheating agent
could: the records, another run's workspace and endpoint, the server's and the
policy processes' /proc entries, tracing and signalling them, and every file
under the paths the test names. Each attempt is written to ``attempts.json`` in
the workspace (``succeeded`` true means the sandbox failed), whatever it read
outside its workspace to ``loot.txt``; then it finalizes the run.

The test tells it what to attack in ``targets.json`` (written into the
workspace from outside, once the server's processes exist).
"""

import ctypes
import json
import os
import signal
import socket
import sys
import time
from pathlib import Path

import anyio
from mcp import Client

from evopolicy_mcp.agents.client import transport
from evopolicy_mcp.agents.config import Launch, Remote

WORKSPACE = Path.cwd()
ATTEMPTS: list[dict[str, object]] = []
LOOT_CAP = 8 << 20
FILE_CAP = 64 << 10
WALK_FILES = 4000


def server_config() -> "Launch | Remote":
    """The run's server as this provider's generated config names it."""
    name = Path(sys.argv[0]).name
    argv = sys.argv[1:]
    if name in ("claude", "qodercli"):
        config = json.loads(Path(argv[argv.index("--mcp-config") + 1]).read_text())
        entry = config["mcpServers"]["evopolicy"]
        return Remote(entry["url"], entry["headers"]["Authorization"].removeprefix("Bearer "))
    if name == "codex":
        pairs = [argv[i + 1] for i, a in enumerate(argv) if a == "-c"]
        values = dict(p.split("=", 1) for p in pairs if p.startswith("mcp_servers.evopolicy."))
        url = json.loads(values["mcp_servers.evopolicy.url"])
        token_var = json.loads(values["mcp_servers.evopolicy.bearer_token_env_var"])
        return Remote(url, os.environ[token_var])
    if name == "kimi":  # a stdio server: the proxy, with the token in its environment
        config = json.loads((Path(os.environ["KIMI_CODE_HOME"]) / "mcp.json").read_text())
        entry = config["mcpServers"]["evopolicy"]
        return Launch(entry["command"], tuple(entry["args"]), dict(entry["env"]))
    raise SystemExit(f"attacker: unknown provider name {name}")


def attempt(what: str, action: "object") -> None:
    try:
        result = action()  # type: ignore[operator]
    except BaseException as exc:  # every failure is the sandbox holding
        ATTEMPTS.append(
            {"what": what, "succeeded": False, "detail": f"{type(exc).__name__}: {exc}"}
        )
    else:
        ATTEMPTS.append({"what": what, "succeeded": True, "detail": repr(result)[:200]})


def read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read(FILE_CAP)


def write_into(directory: str) -> None:
    with open(os.path.join(directory, "planted.txt"), "w") as f:
        f.write("x")


LIBC = ctypes.CDLL(None, use_errno=True)


def ptrace(request: int, pid: int) -> None:
    if LIBC.ptrace(ctypes.c_long(request), ctypes.c_long(pid), None, None) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    LIBC.ptrace(ctypes.c_long(17), ctypes.c_long(pid), None, None)  # PTRACE_DETACH


def http_status(url: str, token: str | None) -> int:
    """POST an initialize to ``url``; the HTTP status."""
    host, rest = url.removeprefix("http://").split("/", 1)
    address, port = host.rsplit(":", 1)
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "attacker", "version": "0"},
            },
        }
    ).encode()
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    request = (
        f"POST /{rest} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\n{auth}"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode() + body
    with socket.create_connection((address, int(port)), timeout=10) as s:
        s.sendall(request)
        status = int(s.recv(64).split()[1])
    if status == 200:
        return status
    raise PermissionError(f"HTTP {status}")


def unix_connect(path: str) -> str:
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(5)
        s.connect(path)
        return s.recv(64).decode()


def loot(roots: list[str]) -> None:
    """Read every file it can under ``roots`` (outside its workspace) into loot.txt."""
    readable: list[str] = []
    try:
        with open(WORKSPACE / "loot.txt", "wb") as out:
            kept, seen = 0, 0
            for root in roots:
                for directory, dirs, files in os.walk(root):
                    if Path(directory).resolve().is_relative_to(WORKSPACE):
                        dirs.clear()
                        continue
                    for name in files:
                        seen += 1
                        if seen > WALK_FILES or kept > LOOT_CAP:
                            return
                        path = os.path.join(directory, name)
                        try:
                            data = read(path)
                        except OSError:
                            continue
                        readable.append(path)
                        out.write(path.encode() + b"\n" + data + b"\n")
                        kept += len(data)
    finally:
        (WORKSPACE / "readable.json").write_text(json.dumps(readable))


def attack(targets: dict) -> None:
    data = targets["data_dir"]
    attempt("list the data directory", lambda: os.listdir(data))
    attempt("read the SQLite file", lambda: read(targets["sqlite"]))
    attempt("read the SQLite WAL", lambda: read(targets["sqlite"] + "-wal"))
    attempt("list the run's record directory", lambda: os.listdir(targets["run_dir"]))
    attempt("write into the data directory", lambda: write_into(data))
    attempt("read another run's workspace", lambda: read(targets["other_file"]))
    attempt("list another run's workspace", lambda: os.listdir(targets["other_workspace"]))
    attempt("read a task file", lambda: read(targets["task_file"]))
    for pid in targets["pids"]:
        for entry in ("environ", "maps", "mem", "cmdline"):
            path = f"/proc/{pid}/{entry}"
            if entry == "cmdline":
                # readable by anyone on the machine; the test checks what it names
                attempt(f"read {path}", lambda p=path: read(p).decode(errors="replace"))
            else:
                attempt(f"read {path}", lambda p=path: read(p))
        attempt(f"list /proc/{pid}/root", lambda p=pid: os.listdir(f"/proc/{p}/root/"))
        attempt(f"readlink /proc/{pid}/cwd", lambda p=pid: os.readlink(f"/proc/{p}/cwd"))
        for fd in range(32):  # the server's records, through its open descriptors
            link = f"/proc/{pid}/fd/{fd}"
            attempt(f"readlink {link}", lambda p=link: os.readlink(p))
            attempt(f"open {link}", lambda p=link: read(p))
        attempt(f"ptrace attach {pid}", lambda p=pid: ptrace(16, p))
        attempt(f"ptrace seize {pid}", lambda p=pid: ptrace(0x4206, p))
        attempt(f"signal 0 to {pid}", lambda p=pid: os.kill(p, 0))
        attempt(f"SIGTERM to {pid}", lambda p=pid: os.kill(p, signal.SIGTERM))
        attempt(f"SIGSTOP to {pid}", lambda p=pid: os.kill(p, signal.SIGSTOP))
    attempt("connect to a host daemon's Unix socket", lambda: unix_connect(targets["socket"]))
    own = targets["own_token"]
    attempt("another run's endpoint, own token", lambda: http_status(targets["other_url"], own))
    attempt("another run's endpoint, no token", lambda: http_status(targets["other_url"], None))
    loot(targets["roots"])


async def play() -> None:
    server = server_config()
    async with Client(transport(server, dict(os.environ))) as client:
        run = (await client.call_tool("start_run", {"task_id": "mini"})).structured_content
        assert run is not None
        run_id = run["run_id"]
        sub = await client.call_tool(
            "submit_policy",
            {
                "run_id": run_id,
                "episodes": "0:2",
                "wait_seconds": 40,
                "program_dir": str(WORKSPACE / "program"),
            },
        )
        assert not sub.is_error, sub
        deadline = time.monotonic() + 60
        while not (WORKSPACE / "targets.json").exists() and time.monotonic() < deadline:
            await anyio.sleep(0.1)
        targets = json.loads((WORKSPACE / "targets.json").read_text())
        own = server.token if isinstance(server, Remote) else server.env["EVOPOLICY_TOKEN"]
        targets["own_token"] = own
        await anyio.to_thread.run_sync(attack, targets)
        # Make the server itself read elsewhere: another run's program, the records.
        for what, folder in (
            ("submit another run's program", targets["other_workspace"]),
            ("submit the data directory", targets["data_dir"]),
            ("submit a folder above the workspace", str(WORKSPACE.parent)),
        ):
            result = await client.call_tool(
                "submit_policy",
                {"run_id": run_id, "episodes": "0", "wait_seconds": 0, "program_dir": folder},
            )
            text = str(result.content[0].text) if result.content else ""  # type: ignore[union-attr]
            ATTEMPTS.append({"what": what, "succeeded": not result.is_error, "detail": text})
        (WORKSPACE / "attempts.json").write_text(json.dumps(ATTEMPTS, indent=1))
        # Its calls still work after all that.
        status = await client.call_tool("run_status", {"run_id": run_id})
        assert not status.is_error, status
        done = await client.call_tool("finalize", {"run_id": run_id, "candidates": ["s1"]})
        assert not done.is_error, done
    print(json.dumps({"type": "result", "finalized": True}), flush=True)


if __name__ == "__main__":
    anyio.run(play)
