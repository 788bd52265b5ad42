"""A stdio server bounds what one request may take, and answers what it cannot read."""

from __future__ import annotations

import json
import os
import select
import subprocess
import time
from pathlib import Path
from typing import Any

import mcp_types

from evopolicy_mcp.server.stdio import MAX_REQUEST_BYTES
from tests.support.server import serve_argv, write_task


def _peak_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


class _Wire:
    def __init__(self, tmp_path: Path) -> None:
        tasks_dir = tmp_path / "tasks"
        write_task(tasks_dir)
        self.proc = subprocess.Popen(
            serve_argv(tmp_path / "d", "--tasks-dir", str(tasks_dir)),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=dict(os.environ),
        )

    def send(self, raw: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(raw + b"\n")
        self.proc.stdin.flush()

    def request(self, id_: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.send(json.dumps({"jsonrpc": "2.0", "id": id_, "method": method,
                              "params": params}).encode())  # fmt: skip
        return self.answer()

    def answer(self, seconds: float = 60) -> dict[str, Any]:
        """The next response (not a notification); fails after ``seconds``."""
        assert self.proc.stdout is not None
        deadline = time.monotonic() + seconds
        while True:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.proc.stdout], [], [], max(0.0, left))
            assert ready, f"no answer within {seconds} s"
            message = json.loads(self.proc.stdout.readline())
            if "id" in message:
                return dict(message)

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def test_an_oversized_or_overdeep_request_gets_an_error_and_the_server_keeps_serving(
    tmp_path: Path,
) -> None:
    wire = _Wire(tmp_path)
    try:
        hello = wire.request(1, "initialize", {
            "protocolVersion": mcp_types.LATEST_PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"},
        })  # fmt: skip
        assert "result" in hello, hello
        wire.send(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')
        before = _peak_kib(wire.proc.pid)
        # Four times the cap, in one line: refused, and never held in memory at once.
        filler = "x" * (4 * MAX_REQUEST_BYTES)
        wire.send(
            b'{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": '
            b'"list_tasks", "arguments": {"x": "' + filler.encode() + b'"}}}'
        )
        big = wire.answer()
        assert big["id"] == 2 and big["error"]["code"] == -32600, big
        assert big["error"]["message"].startswith(
            f"request refused: longer than {MAX_REQUEST_BYTES >> 20} MiB"
        )
        assert len(big["error"]["message"]) < 200
        grown = _peak_kib(wire.proc.pid) - before
        assert grown < 3 * (MAX_REQUEST_BYTES >> 10), f"the server grew {grown} KiB"
        deep = wire.request(3, "tools/call", {"name": "list_tasks",
                                              "arguments": {"x": [[[[[[]]]]]]}})  # fmt: skip
        assert "result" in deep  # an ordinary nesting is fine
        wire.send(
            b'{"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": '
            b'"list_tasks", "arguments": {"x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}}}"
        )
        nested = wire.answer()
        assert nested["id"] == 4 and nested["error"]["code"] == -32700, nested
        assert "nests deeper" in nested["error"]["message"]
        tools = wire.request(5, "tools/list", {})
        assert "list_tasks" in {t["name"] for t in tools["result"]["tools"]}
    finally:
        wire.close()
    assert wire.proc.returncode == 0
