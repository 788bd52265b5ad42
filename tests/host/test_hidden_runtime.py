"""The host judges hidden splits from a private copy of the runtime, whatever its executor.

A policy that fails when numpy's folder is a tmpfs mount (the private copy,
bound over the original) runs cleanly in training and fails in every
validation and assessment episode: those ran from the copy.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from evopolicy_mcp.host.authority import Host
from tests.support.host import SEED, finish
from tests.support.kernel import FAILS_WHEN_PRIVATE, needs


@needs("filesystem", "disk")
@pytest.mark.parametrize("executor", ["thread", "process"])
def test_validation_and_assessment_run_from_a_private_runtime(
    data_dir: Path, tasks_dir: Path, executor: str
) -> None:
    with Host(data_dir, tasks_dirs=[tasks_dir], seed=SEED, executor=executor, workers=1) as host:
        run = host.start_run("mini").run_id
        view = finish(host, run, "0:2", {"policy.py": FAILS_WHEN_PRIVATE})
        assert [e.status for e in view.episode_summaries] == ["ok", "ok"]
        host.finalize(run, [view.submission_id])
        assert host.wait_final(run, 120).state == "finalized"
        results = {r.split: r for r in host.store.results(run)}
        assert set(results) == {"validation", "test"}
        for result in results.values():
            assert result.policy_failures == result.episodes == 3, result
