"""A run started by a named client answers that client only; the operator sees all."""

from __future__ import annotations

from evopolicy_mcp.host.authority import Host
from tests.support.host import GOOD, finish, rejected


def test_a_run_started_by_a_client_is_unknown_to_every_other(host: Host) -> None:
    run = host.start_run("mini", client="a").run_id
    sub = host.submit(run, "0:2", files={"policy.py": GOOD}, client="a")
    assert host.wait(run, sub, 60, client="a").status == "complete"
    unknown = f"no run {run!r}; start one with start_run(task_id)"
    for other in ("b", None):
        for call in (
            lambda o=other: host.run_status(run, client=o),
            lambda o=other: host.feedback(run, sub, client=o),
            lambda o=other: host.wait(run, sub, 0, client=o),
            lambda o=other: host.submit(run, "0", files={"policy.py": GOOD}, client=o),
            lambda o=other: host.artifact(run, sub, 0, "x", client=o),
            lambda o=other: host.finalize(run, [sub], client=o),
        ):
            assert rejected(call, "unknown_run").message == unknown
    assert host.run_status(run, client="a").submissions_used == 1
    # An unnamed run (stdio, the operator) answers everyone; the operator sees all.
    shared = host.start_run("mini").run_id
    assert host.run_status(shared, client="b").run_id == shared
    assert {r.run_id for r in host.runs()} == {run, shared}
    host.finalize(run, [sub], client="a")
    assert host.wait_final(run, 120).state == "finalized"
    assert host.report(run).selected == sub
    assert finish(host, shared, "0", {"policy.py": GOOD}).status == "complete"
