"""The `evopolicy-mcp` command: the main commands as real subprocesses (`python -m evopolicy_mcp`).

The subprocesses start at once in one module fixture and the tests read their
results: each costs an interpreter start (and building the parser imports the
MCP server), so one after the other they would dominate the suite. The other
bad-input cases call ``cli.main`` in this process, which runs the same code
from argument parsing to exit code.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from evopolicy_mcp.cli.main import main
from tests.support.kernel import GOOD_CARTPOLE, TASKS

FAILING = """
def make_policy(context):
    return Policy()

class Policy:
    def act(self, observation):
        raise ZeroDivisionError("cannot act")
"""

# A third-party environment whose step() is broken: a host fault, never the policy's.
BROKEN_ADAPTER = """
from evopolicy_mcp.adapters import spaces
from evopolicy_mcp.adapters.protocol import EnvSpec, Step


class Episode:
    def reset(self):
        return [0.0]

    def step(self, action):
        raise RuntimeError("the simulator lost its state")

    def metrics(self):
        return {}

    def close(self):
        pass


class BrokenAdapter:
    name = "brokensim"

    def spec(self, parameters):
        return EnvSpec(
            observation_space=spaces.box(-1.0, 1.0, (1,), names=["x"]),
            action_space=spaces.discrete(2),
            max_steps=10,
        )

    def make_episode(self, parameters, seed):
        return Episode()


def make_adapter():
    return BrokenAdapter()
"""

BROKEN_TASK = """
id = "brokensim"
title = "A broken simulator"
summary = "Its step() raises."
description = "Used by the tests to check that adapter faults are host faults."
adapter = "brokensim"
baseline = "baselines/brokensim"

[score]
failure_value = 0.0

[budget]
episodes = 10
submissions = 2
per_submission = 5
pool = 10

[validation]
episodes = 2
candidates = 1

[assessment]
episodes = 2
"""


@dataclass
class Result:
    code: int
    out: str
    err: str


def layout(root: Path) -> None:
    """Program directories, a tasks directory and a third-party package under ``root``."""
    paths = {name: root / name for name in ("good", "failing", "empty", "syntax", "plugin")}
    for path in paths.values():
        path.mkdir()
    (paths["good"] / "policy.py").write_text(GOOD_CARTPOLE)
    (paths["failing"] / "policy.py").write_text(FAILING)
    (paths["empty"] / "notes.txt").write_text("no policy here")
    (paths["syntax"] / "policy.py").write_text("def make_policy(context)\n    return None\n")
    (root / "file.txt").write_text("a file, not a directory")
    plugin = paths["plugin"]
    (plugin / "brokensim.py").write_text(BROKEN_ADAPTER)
    info = plugin / "brokensim-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: brokensim\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[evopolicy_mcp.environments]\nbrokensim = brokensim:make_adapter\n"
    )
    tasks = root / "tasks"
    (tasks / "baselines" / "brokensim").mkdir(parents=True)
    (tasks / "brokensim.toml").write_text(BROKEN_TASK)
    (tasks / "baselines" / "brokensim" / "policy.py").write_text(
        textwrap.dedent(
            """
            def make_policy(context):
                return Policy()

            class Policy:
                def act(self, observation):
                    return 0
            """
        )
    )


# Run as real processes.
COMMANDS: dict[str, Callable[[Path], list[str]]] = {
    "evaluate-json": lambda r: ["evaluate", "--task", "cartpole", "--json"],
    "evaluate-dir": lambda r: [
        "evaluate",
        str(r / "good"),
        "--task",
        "cartpole",
        "--episodes",
        "5",
    ],
    "evaluate-dir-processes": lambda r: [
        *("evaluate", str(r / "good"), "--task", "cartpole", "--episodes", "5"),
        *("--executor", "process", "--workers", "2"),
    ],
    "tasks": lambda r: ["tasks"],
    "tasks-json": lambda r: ["tasks", "--json"],
    "version": lambda r: ["--version"],
    "runs-empty": lambda r: ["runs", "--data-dir", str(r / "empty")],
    "check-adapter": lambda r: ["check-adapter", "gymnasium"],
    "adapter-fault": lambda r: [
        *("evaluate", "--task", "brokensim", "--tasks-dir", str(r / "tasks"), "--episodes", "2")
    ],
}

# Run through cli.main in this process.
IN_PROCESS: dict[str, Callable[[Path], list[str]]] = {
    "evaluate-split": lambda r: [
        *("evaluate", str(r / "good"), "--task", "cartpole", "--episodes", "3"),
        *("--split", "validation", "--seed", "4", "--workers", "2", "--json"),
    ],
    "evaluate-failing": lambda r: [
        *("evaluate", str(r / "failing"), "--task", "cartpole", "--episodes", "2")
    ],
    "unknown-task": lambda r: ["evaluate", "--task", "no-such-task"],
    "missing-policy": lambda r: ["evaluate", str(r / "empty"), "--task", "cartpole"],
    "not-a-directory": lambda r: ["evaluate", str(r / "file.txt"), "--task", "cartpole"],
    "no-such-path": lambda r: ["evaluate", str(r / "nowhere"), "--task", "cartpole"],
    "episodes-text": lambda r: ["evaluate", "--task", "cartpole", "--episodes", "many"],
    "episodes-zero": lambda r: ["evaluate", "--task", "cartpole", "--episodes", "0"],
    "syntax-error": lambda r: ["evaluate", str(r / "syntax"), "--task", "cartpole"],
    "bad-parameters": lambda r: ["check-adapter", "gymnasium", "--parameters", "{not json"],
    "no-tasks-dir": lambda r: ["tasks", "--tasks-dir", str(r / "nowhere")],
    "evaluate-many": lambda r: ["evaluate", "--task", "cartpole", "--episodes", "60"],
    "evaluate-failing-json": lambda r: [
        *("evaluate", str(r / "failing"), "--task", "cartpole", "--episodes", "2", "--json")
    ],
}


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cli")
    layout(root)
    return root


@pytest.fixture(scope="module")
def cli(root: Path) -> dict[str, Result]:
    env = {k: v for k, v in os.environ.items() if k != "EVOPOLICY_TASKS"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root / "plugin"), env.get("PYTHONPATH")]))
    started = {
        name: subprocess.Popen(
            [sys.executable, "-m", "evopolicy_mcp", *args(root)],
            cwd=root,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name, args in COMMANDS.items()
    }
    results = {}
    for name, proc in started.items():
        try:
            out, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        results[name] = Result(proc.returncode, out, err)
    return results


@pytest.fixture
def run(
    root: Path,
    cli: dict[str, Result],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> Callable[[str], Result]:
    """The result of a named command: from its subprocess, or from cli.main here."""
    monkeypatch.delenv("EVOPOLICY_TASKS", raising=False)

    def result(name: str) -> Result:
        if name in cli:
            return cli[name]
        capsys.readouterr()
        code = main(IN_PROCESS[name](root))
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return result


def succeeded(result: Result) -> None:
    assert result.code == 0, result
    assert "Traceback" not in result.err, result.err


def test_evaluate_json_prints_one_json_document_of_the_baseline(
    run: Callable[[str], Result],
) -> None:
    result = run("evaluate-json")
    succeeded(result)
    feedback = json.loads(result.out)  # the whole of stdout is one document
    assert feedback["task_id"] == "cartpole"
    assert len(feedback["episode_summaries"]) == 10
    assert feedback["failures"] == {}
    assert all(e["status"] == "ok" for e in feedback["episode_summaries"])
    assert 0 < feedback["score"] < 100, "the baseline is weak"
    assert feedback["traces"], "--json includes the traces"


def test_evaluate_a_program_directory_prints_a_line_per_episode(
    run: Callable[[str], Result],
) -> None:
    result = run("evaluate-dir")
    succeeded(result)
    lines = result.out.splitlines()
    assert lines[0].startswith("cartpole: score 500 ")
    episodes = [line for line in lines if line.strip().startswith("episode")]
    assert len(episodes) == 5
    assert all(" ok " in line and "steps    500" in line for line in episodes)


def test_evaluate_on_worker_processes_prints_what_evaluate_on_a_thread_prints(
    run: Callable[[str], Result],
) -> None:
    threads, processes = run("evaluate-dir"), run("evaluate-dir-processes")
    succeeded(processes)
    assert processes.out.split("[")[0] == threads.out.split("[")[0]
    assert processes.out.split("]")[1] == threads.out.split("]")[1]


def test_the_ray_executor_without_ray_says_which_extra_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    assert main(["evaluate", "--task", "cartpole", "--episodes", "1", "--executor", "ray"]) == 2
    err = capsys.readouterr().err
    assert "pip install 'evopolicy-mcp[ray]'" in err and len(err.splitlines()) == 1
    assert "Traceback" not in err


def test_split_seed_and_workers_options_are_honoured(run: Callable[[str], Result]) -> None:
    result = run("evaluate-split")
    succeeded(result)
    feedback = json.loads(result.out)
    assert [e["index"] for e in feedback["episode_summaries"]] == [0, 1, 2]
    assert feedback["score"] == 500.0


def test_a_policy_failing_every_episode_is_feedback_with_exit_status_1(
    run: Callable[[str], Result],
) -> None:
    result = run("evaluate-failing")
    assert result.code == 1 and "Traceback" not in result.err, result
    assert "every episode ended in a policy failure" in result.err
    assert "2 policy failures" in result.out
    assert "exception: in act(): ZeroDivisionError: cannot act" in result.out
    assert 'File "policy.py", line 7, in act' in result.out


def test_evaluate_json_names_its_fields_as_the_agent_feedback_does(
    run: Callable[[str], Result],
) -> None:
    from evopolicy_mcp.host.views import EpisodeView, SubmissionView

    result = run("evaluate-failing-json")
    assert result.code == 1, result
    document = json.loads(result.out)
    own = {"task_id", "split", "seconds"}  # what a submission has under other names
    assert set(document) - own <= set(SubmissionView.model_fields), set(document)
    assert isinstance(document["episode_summaries"], list)
    for summary in document["episode_summaries"]:
        assert set(summary) <= set(EpisodeView.model_fields), set(summary)
        assert summary["failure"] == "exception" and "cannot act" in summary["traceback"]
    assert document["failures"] == {"exception": 2} and document["policy_failures"] == 2


def test_a_long_evaluation_reports_progress_on_stderr(run: Callable[[str], Result]) -> None:
    result = run("evaluate-many")
    succeeded(result)
    progress = [line for line in result.err.splitlines() if line.startswith("evaluate: ")]
    assert len(progress) >= 10, result.err
    assert progress[-1].startswith("evaluate: 60/60 episodes")
    assert all("/60 episodes" in line for line in progress)
    assert "evaluate:" not in result.out


def test_version_and_an_empty_data_directory_are_not_errors(
    run: Callable[[str], Result],
) -> None:
    from importlib.metadata import version

    shown = run("version")
    succeeded(shown)
    assert shown.out.strip() == f"evopolicy-mcp {version('evopolicy-mcp')}"
    runs = run("runs-empty")
    succeeded(runs)
    assert "no runs in" in runs.out


def test_evaluate_help_states_its_exit_status(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["evaluate", "--help"])
    assert "1 when every episode" in " ".join(capsys.readouterr().out.split())


def test_tasks_lists_every_task_as_a_table_and_as_json(run: Callable[[str], Result]) -> None:
    table = run("tasks")
    succeeded(table)
    rows = table.out.splitlines()
    listed = [row.split()[0] for row in rows if row.startswith("  ")]
    assert sorted(listed) == sorted(TASKS)
    assert rows[0].startswith("atari (208 tasks)")  # families in order, tasks under each
    assert "classic-control (5 tasks)" in rows
    assert rows[-1].startswith(f"{len(TASKS)} tasks in ") or "not installed" in rows[-1]
    listing = run("tasks-json")
    succeeded(listing)
    data = json.loads(listing.out)
    assert [t["id"] for t in data] == sorted(TASKS)
    cartpole = next(t for t in data if t["id"] == "cartpole")
    assert cartpole["adapter"] == "gymnasium" and cartpole["budget"]["episodes"] >= 1
    assert cartpole["family"] == "classic-control" and cartpole["available"] is True


def test_check_adapter_passes_the_gymnasium_adapter(run: Callable[[str], Result]) -> None:
    result = run("check-adapter")
    succeeded(result)
    assert result.out.splitlines()[-1].endswith(" passed, 0 failed")
    assert "FAIL" not in result.out


BAD_INPUT = {
    "unknown-task": "unknown task 'no-such-task'",
    "missing-policy": "has no policy.py",
    "not-a-directory": "is not a directory",
    "no-such-path": "is not a directory",
    "episodes-text": "--episodes wants a number",
    "episodes-zero": "--episodes must be at least 1",
    "syntax-error": "policy.py",
    "bad-parameters": "--parameters is not JSON",
    "no-tasks-dir": "does not exist",
    "adapter-fault": "the simulator lost its state",
}


@pytest.mark.parametrize(("name", "says"), list(BAD_INPUT.items()), ids=list(BAD_INPUT))
def test_bad_input_exits_non_zero_with_a_one_line_reason(
    run: Callable[[str], Result], name: str, says: str
) -> None:
    result = run(name)
    assert result.code != 0, result
    assert "Traceback" not in result.err, result.err
    assert result.out == ""
    lines = result.err.strip().splitlines()
    assert len(lines) == 1, result.err
    assert says in lines[0], lines[0]
    assert lines[0].startswith("evopolicy-mcp ")


def test_a_syntax_error_names_the_line_to_fix(run: Callable[[str], Result]) -> None:
    assert "line 1" in run("syntax-error").err


def test_an_adapter_fault_is_reported_as_a_host_fault(run: Callable[[str], Result]) -> None:
    err = run("adapter-fault").err
    assert "adapter fault" in err and "policy failure" not in err


def test_doctor_names_every_layer_of_both_sandboxes_and_how_episodes_hand_over(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from evopolicy_mcp.agents import confine
    from evopolicy_mcp.kernel import mailbox
    from evopolicy_mcp.kernel.sandbox import LAYERS, Isolation, probe

    code = main(["doctor"])
    out = capsys.readouterr().out
    found = probe()
    policies, agents = out.split("agent CLIs under `agent run`")
    for layer in LAYERS:
        mark = "ok" if found.layers[layer].available else "MISSING"
        assert any(line.split()[:2] == [mark, layer] for line in policies.splitlines()), layer
    for layer in confine.probe().values():
        mark = "ok" if layer.available else "MISSING"
        assert any(line.split()[:2] == [mark, layer.name] for line in agents.splitlines()), layer
    agent_missing = not all(layer.available for layer in confine.probe().values())
    assert code == (1 if found.missing(Isolation()) or agent_missing else 0)
    hand_over = next(line for line in out.splitlines() if "hand-over" in line)
    cpus = len(os.sched_getaffinity(0))
    assert f"{cpus} CPU" in hand_over
    if cpus >= 2:
        assert "spin" in hand_over
        assert ("mailbox" in hand_over) == mailbox.supported()


def test_a_detached_judge_runs_episodes_where_its_server_does() -> None:
    from evopolicy_mcp.cli.judge import judge_argv
    from evopolicy_mcp.cli.main import build_parser

    served = build_parser("serve").parse_args(
        ["serve", "--executor", "ray", "--ray-address", "127.0.0.1:6379", "--workers", "3"]
    )
    argv = judge_argv("run-1", Path("/records"), [], served)
    judge = build_parser("judge").parse_args(argv[argv.index("judge") :])
    assert (judge.executor, judge.ray_address, judge.workers) == ("ray", "127.0.0.1:6379", 3)
    assert (judge.run_id, judge.isolation) == ("run-1", "default")
