"""Review findings at the trust boundary and in the run rules, each with a real host, real
policy processes and the real MCP client."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp import Client

from evopolicy_mcp.cli.main import main
from evopolicy_mcp.host.authority import Host, HostError
from evopolicy_mcp.server.app import build_server
from tests.support.server import PD_FILES, write_task

TASK = "cartpole-mini"


@pytest.fixture
def tasks_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "tasks"
    write_task(directory)
    return directory


def test_a_fixed_serve_seed_cannot_be_replayed_with_the_public_evaluate_seed(
    tmp_path: Path, tasks_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with Host(tmp_path / "records", tasks_dirs=[tasks_dir], seed=7) as host:
        run_id = host.start_run(TASK).run_id
        submission = host.submit(run_id, "0", files=PD_FILES)
        assert host.wait(run_id, submission, 60).status == "complete"
        view = host.feedback(run_id, submission, episode=0)
        assert view.traces
        hidden_first = view.traces[0].steps[0].observation

    source = tmp_path / "program"
    source.mkdir()
    (source / "policy.py").write_text(PD_FILES["policy.py"])
    argv = ["evaluate", str(source), "--task", TASK, "--tasks-dir", str(tasks_dir)]
    assert main([*argv, "--seed", "7", "--episodes", "1", "--json"]) == 0
    public_first = json.loads(capsys.readouterr().out)["traces"][0]["steps"][0]["observation"]
    assert public_first != hidden_first


def test_the_max_runs_cap_still_holds_after_the_server_restarts(
    tmp_path: Path, tasks_dir: Path
) -> None:
    data_dir = tmp_path / "records"
    with Host(data_dir, tasks_dirs=[tasks_dir], max_runs=1) as host:
        host.start_run(TASK)
    with Host(data_dir, tasks_dirs=[tasks_dir], max_runs=1) as host:
        with pytest.raises(HostError) as info:
            host.start_run(TASK)
        assert info.value.code == "run_limit"


@pytest.mark.anyio
async def test_the_prompt_for_an_unknown_task_tells_the_agent_which_tasks_exist(
    tmp_path: Path, tasks_dir: Path
) -> None:
    with Host(tmp_path / "records", tasks_dirs=[tasks_dir]) as host:
        async with Client(build_server(host)) as client:
            with pytest.raises(Exception) as info:
                await client.get_prompt("evolve_policy", {"task_id": TASK + "x"})
            assert TASK in str(info.value)  # "did you mean ...", among many tasks
            # The server keeps serving after the bad request.
            tasks = await client.call_tool("list_tasks", {})
            assert not tasks.is_error


# Prints where its own code lives, reversed, which the plain-text redaction of the
# records' path cannot recognise.
WHERE_AM_I = """
import os

def make_policy(context):
    print(os.path.abspath(__file__)[::-1])
    return Balancer()

class Balancer:
    def act(self, observation):
        return 1 if observation[2] + 0.3 * observation[3] > 0 else 0
"""


def test_a_policy_cannot_tell_the_agent_where_the_run_records_are(
    tmp_path: Path, tasks_dir: Path
) -> None:
    with Host(tmp_path / "records", tasks_dirs=[tasks_dir]) as host:
        run_id = host.start_run(TASK).run_id
        view = host.wait(run_id, host.submit(run_id, "0", files={"policy.py": WHERE_AM_I}), 60)
        assert view.status == "complete"
        printed = view.episode_summaries[0].stderr or ""
        assert printed.strip(), "the policy printed nothing"
        assert str(host.data_dir)[::-1] not in printed


# Prints a lot, then fails the same way in every episode: the common first mistake.
NOISY_CRASH = """
def make_policy(context):
    return Noisy()

class Noisy:
    def act(self, observation):
        print("x" * 100_000)
        raise ValueError("v" * 5_000)
"""
# Claude Code refuses a tool result above 25,000 tokens by default (~100 kB of JSON).
AGENT_RESULT_BYTES = 100_000


@pytest.mark.anyio
async def test_the_feedback_of_twenty_identical_crashes_fits_in_one_tool_result(
    tmp_path: Path,
) -> None:
    tasks = tmp_path / "wide"
    write_task(tasks, "cartpole-wide", episodes=40, per_submission=20, pool=20)
    with Host(tmp_path / "records", tasks_dirs=[tasks]) as host:
        async with Client(build_server(host)) as client:
            run = await client.call_tool("start_run", {"task_id": "cartpole-wide"})
            run_id = run.structured_content["run_id"]  # type: ignore[index]
            result = await client.call_tool(
                "submit_policy",
                {"run_id": run_id, "episodes": "0:20", "files": {"policy.py": NOISY_CRASH}},
            )
            view = result.structured_content
            assert view is not None and view["status"] == "complete"
            assert view["failures"] == {"exception": 20}
            assert len(json.dumps(view)) <= AGENT_RESULT_BYTES
