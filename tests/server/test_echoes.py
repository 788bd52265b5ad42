"""Bounded echoes: no error an agent reads, and no server log line, repeats more than
about 200 characters of what the agent sent, on every path an error takes."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from mcp import Client

from evopolicy_mcp.host.authority import Host
from evopolicy_mcp.server.app import build_server
from evopolicy_mcp.server.echoes import ECHO, LINE_CAP, MESSAGE_CAP, BoundedLines, bound

HUGE = 200_000


def longest_run(text: str, char: str) -> int:
    best = run = 0
    for c in text:
        run = run + 1 if c == char else 0
        best = max(best, run)
    return best


@pytest.mark.anyio
async def test_run_status_with_a_huge_run_id_answers_briefly(host: Host) -> None:
    async with Client(build_server(host)) as client:
        result = await client.call_tool("run_status", {"run_id": "x" * HUGE})
    assert result.is_error
    text = result.content[0].text  # type: ignore[union-attr]
    assert longest_run(text, "x") == ECHO
    assert f"[{HUGE - ECHO} more characters you sent]" in text
    assert "start_run" in text  # the rest of the message, what to do, is still there
    assert len(text) < 600


def test_echoes_are_cut_as_sent_as_repr_and_json_and_as_a_prefix() -> None:
    sent = "a'b\n" * 1000
    for form in (sent, repr(sent)[1:-1], json.dumps(sent)[1:-1], sent[:900]):
        text = bound(f"bad value {form}; try again", [sent])
        assert form[: ECHO + 1] not in text
        assert text.startswith(f"bad value {form[:ECHO]}... [") and text.endswith("; try again")
    # What the client did not send is left alone, up to the cap on any message.
    own = "y" * 1500
    assert bound(own, [sent]) == own
    capped = bound("z" * 5000, [])
    assert len(capped) < MESSAGE_CAP + 40 and capped.endswith("[3000 more characters]")


def test_log_lines_are_bounded_tracebacks_included() -> None:
    formatter = BoundedLines("%(levelname)s %(name)s: %(message)s")
    try:
        raise KeyError("k" * HUGE)
    except KeyError:
        record = logging.LogRecord(
            "t", logging.ERROR, __file__, 1, "fault on %s", ("q" * HUGE,), sys.exc_info()
        )
    lines = formatter.format(record).splitlines()
    assert any("Traceback" in line for line in lines)
    assert max(len(line) for line in lines) <= LINE_CAP + 30
    assert any(line.startswith("ERROR t: fault on qqq") for line in lines)


def _requests() -> list[dict[str, object]]:
    def call(i: int, name: str, arguments: dict[str, object]) -> dict[str, object]:
        params = {"name": name, "arguments": arguments}
        return {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params}

    big = "x" * HUGE
    return [
        call(1, "run_status", {"run_id": big}),
        call(2, "describe_task", {"task_id": big}),
        call(3, "start_run", {"task_id": big}),
        call(4, "get_feedback", {"run_id": big, "submission_id": big}),
        call(5, "submit_policy", {"run_id": big, "episodes": big, "files": {big: big}}),
        call(6, "finalize", {"run_id": big, "candidates": [big, big]}),
        call(7, "no_such_tool_" + big, {}),
        call(8, "run_status", {"run_id": big, big: big}),
        {"jsonrpc": "2.0", "id": 9, "method": "resources/read",
         "params": {"uri": "evopolicy://tasks/" + big}},
        {"jsonrpc": "2.0", "id": 10, "method": "resources/read",
         "params": {"uri": "evopolicy://nothing/" + big}},
        {"jsonrpc": "2.0", "id": 11, "method": "prompts/get",
         "params": {"name": "evolve_policy", "arguments": {"task_id": big}}},
        {"jsonrpc": "2.0", "id": 12, "method": "no/method/" + big, "params": {}},
    ]  # fmt: skip


def test_every_error_path_over_stdio_echoes_at_most_200_characters(tmp_path: Path) -> None:
    """The real server over stdio: tool errors, unknown tools, resources, prompts and
    methods, and the server's own log lines."""
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"},
        },
    }
    lines = [init, {"jsonrpc": "2.0", "method": "notifications/initialized"}, *_requests()]
    stdin = "".join(json.dumps(m) + "\n" for m in lines)
    stdin += '{"not json at all": "' + "x" * HUGE + "\n"
    log = tmp_path / "stderr.log"
    with open(log, "w") as errors:
        proc = subprocess.Popen(
            [sys.executable, "-m", "evopolicy_mcp", "serve", "--data-dir", str(tmp_path / "d")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
        )
    answers: dict[int, dict[str, object]] = {}
    assert proc.stdin is not None and proc.stdout is not None
    writer = threading.Thread(target=proc.stdin.write, args=(stdin,), daemon=True)
    writer.start()
    try:
        for line in proc.stdout:
            message = json.loads(line)
            answers[message["id"]] = message
            if len(answers) == len(lines) - 1:
                break
    finally:
        writer.join(60)
        proc.stdin.close()
        proc.wait(60)
    err = log.read_text()
    assert sorted(answers) == list(range(13))
    for i in range(1, 13):
        text = json.dumps(answers[i])
        assert "error" in answers[i] or answers[i]["result"]["isError"], text[:300]  # type: ignore[index]
        assert longest_run(text, "x") <= ECHO, f"request {i} echoed: {text[:300]}"
        assert len(text) < 3000
    assert err.strip()  # the server did log the failures
    for line in err.splitlines():
        assert len(line) <= LINE_CAP + 30 and longest_run(line, "x") <= LINE_CAP, line[:300]
