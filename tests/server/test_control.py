"""The launcher's channel to a shared server: bindings on stdin, tokens nowhere else."""

from __future__ import annotations

import io
import json
import threading
from pathlib import Path

import pytest

from evopolicy_mcp.host.authority import Host
from evopolicy_mcp.server.bridge import token_client
from evopolicy_mcp.server.control import apply, follow
from evopolicy_mcp.server.http_auth import BearerTokenGate, Tokens
from tests.support.host import SEED

TOKEN = "t0k3n-" + "q" * 37


@pytest.fixture
def shared(data_dir: Path, tasks_dir: Path) -> Host:
    with Host(data_dir, tasks_dirs=[tasks_dir], bind=("mini", "ra"), seed=SEED) as h:
        h.prepare_run()
    host = Host(data_dir, tasks_dirs=[tasks_dir], bound_clients=True)
    yield host  # type: ignore[misc]
    host.close()


def _gate_admits(tokens: Tokens, token: str) -> bool:
    gate = BearerTokenGate(lambda *a: None, tokens)  # type: ignore[arg-type, return-value]
    scope = {"type": "http", "headers": [(b"authorization", f"Bearer {token}".encode())]}
    return gate._authorized(scope)


def test_a_binding_opens_the_server_to_its_run_and_a_drop_closes_it(
    shared: Host, tmp_path: Path
) -> None:
    tokens = Tokens()
    assert not _gate_admits(tokens, TOKEN)
    line = json.dumps({"bind": TOKEN, "task": "mini", "run": "ra", "program_root": str(tmp_path)})
    assert TOKEN not in apply(line, shared, tokens)
    assert _gate_admits(tokens, TOKEN) and not _gate_admits(tokens, TOKEN + "x")
    assert shared.start_run("mini", client=token_client(TOKEN)).run_id == "ra"
    apply(json.dumps({"drop": TOKEN}), shared, tokens)
    assert not _gate_admits(tokens, TOKEN)
    assert shared.bindings is not None and shared.bindings.runs() == []


@pytest.mark.parametrize(
    "line",
    [
        "not json",
        "[1, 2]",
        json.dumps({"bind": TOKEN}),
        json.dumps({"bind": TOKEN, "task": "nope", "run": "ra"}),
        json.dumps({"bind": TOKEN, "task": "mini", "run": "../../x"}),
        json.dumps({"bind": TOKEN, "task": "mini", "run": "ra", "program_root": "/no/such/dir"}),
        json.dumps({"what": TOKEN}),
    ],
)
def test_a_bad_line_changes_nothing_and_its_error_names_no_token(shared: Host, line: str) -> None:
    tokens = Tokens()
    with pytest.raises(ValueError) as info:
        apply(line, shared, tokens)
    assert TOKEN not in str(info.value)
    assert not _gate_admits(tokens, TOKEN)
    assert shared.bindings is not None and shared.bindings.runs() == []


def test_the_server_stops_when_its_launcher_closes_the_channel(shared: Host) -> None:
    stop = threading.Event()
    stream = io.StringIO("garbage\n" + json.dumps({"drop": TOKEN}) + "\n")
    follow(stream, shared, Tokens(), stop).join(10)
    assert stop.is_set()
