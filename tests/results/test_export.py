"""The rollout dataset: it round-trips through pyarrow with its schema, and no column
marked agent-visible holds anything hidden."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from evopolicy_mcp.agents.launch import AgentOptions, run_agent
from evopolicy_mcp.cli.main import main
from evopolicy_mcp.evaluation import seeds
from evopolicy_mcp.host.authority import Host
from evopolicy_mcp.results.dataset import TABLES, arrow_schema
from evopolicy_mcp.results.export import export_runs, read_bundle_runs
from evopolicy_mcp.store.database import Store
from tests.support.results import finished_run
from tests.support.server import BASELINE_FILES, CRASHING_FILES, PD_FILES, make_tasks_dir

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
pajson = pytest.importorskip("pyarrow.json")

LEAK = "cartpole-leak"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, list[str]]]:
    """A run played by the scripted agent through the launcher with every training
    episode traced, and a run made by direct host calls with a crashing program."""
    root = tmp_path_factory.mktemp("export")
    tasks = make_tasks_dir(root / "tasks")
    data = root / "data"
    outcome = run_agent(
        AgentOptions(
            agent="scripted",
            task=LEAK,
            data_dir=data,
            tasks_dirs=(tasks,),
            workspace=root / "ws",
            seed=3,
            timeout=120,
            trace_all=True,
        )  # fmt: skip
    )
    assert outcome.run_state == "finalized", outcome
    with Host(data, tasks_dirs=[tasks], seed=3) as host:
        direct, _ = finished_run(
            host,
            LEAK,
            [("0:4", PD_FILES), ("0:4", BASELINE_FILES), ("4:6", CRASHING_FILES)],
            [2, 1],
        )
    yield data, [outcome.run_id, direct]


def _bundle(data: Path, ids: list[str], out: Path, fmt: str) -> dict:  # type: ignore[type-arg]
    store = Store(data, create=False)
    try:
        return export_runs(store, ids, out, fmt)  # type: ignore[arg-type]
    finally:
        store.close()


def test_parquet_tables_round_trip_with_the_documented_schema(
    runs: tuple[Path, list[str]], tmp_path: Path
) -> None:
    data, ids = runs
    manifest = _bundle(data, ids, tmp_path / "pq", "parquet")
    assert manifest["schema"] == "evopolicy-rollouts" and manifest["version"] == 1
    for name, table in TABLES.items():
        read = pq.read_table(tmp_path / "pq" / f"{name}.parquet")
        assert read.schema.equals(arrow_schema(table), check_metadata=True), name
        assert read.num_rows == manifest["tables"][name]["rows"], name
    subs = pq.read_table(tmp_path / "pq" / "submissions.parquet").to_pylist()
    direct = [s for s in subs if s["run_id"] == ids[1]]
    assert [s["selector"] for s in direct] == ["0:4", "0:4", "4:6"]
    assert [s["episodes_spent"] for s in direct] == [4, 8, 10]
    crash = json.loads(direct[2]["feedback"])
    assert crash["failures"] == {"exception": 2}
    assert "deliberate" in crash["episode_summaries"][0]["traceback"]
    programs = pq.read_table(tmp_path / "pq" / "programs.parquet").to_pylist()
    assert {f["path"] for p in programs for f in p["files"]} == {"policy.py"}
    assert any("Crasher" in p["files"][0]["text"] for p in programs)
    # --trace-all: every episode of every submission of the agent's run has its trace.
    episodes = pq.read_table(tmp_path / "pq" / "episodes.parquet").to_pylist()
    traced = {(e["submission_id"], e["index"]) for e in episodes if e["run_id"] == ids[0]}
    agent_subs = [s for s in subs if s["run_id"] == ids[0] and s["status"] == "complete"]
    assert traced == {(s["submission_id"], i) for s in agent_subs for i in s["indices"]}
    one = next(e for e in episodes if e["run_id"] == ids[0])
    assert len(one["observations"]) == len(one["actions"]) == len(one["rewards"]) > 0
    assert len(json.loads(one["observations"][0])) == 4  # CartPole's 4 numbers
    outcomes = pq.read_table(tmp_path / "pq" / "outcomes.parquet").to_pylist()
    assert {o["split"] for o in outcomes if o["run_id"] == ids[1]} == {"validation", "assessment"}
    transcripts = pq.read_table(tmp_path / "pq" / "transcripts.parquet").to_pylist()
    assert [t["run_id"] for t in transcripts] == [ids[0]] and transcripts[0]["lines"]


def test_jsonl_tables_load_with_pyarrow_and_bundles_feed_the_leaderboard(
    runs: tuple[Path, list[str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data, ids = runs
    out = tmp_path / "jl"
    assert main(["export", *ids, "--data-dir", str(data), str(out)]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    for name, table in TABLES.items():
        read = pajson.read_json(out / f"{name}.jsonl") if manifest["tables"][name]["rows"] else None
        if read is not None:
            assert read.num_rows == manifest["tables"][name]["rows"]
            assert set(read.column_names) <= set(table.names), name
    assert [r.run_id for r in read_bundle_runs(out)] == ids
    capsys.readouterr()
    assert main(["leaderboard", "--bundle", str(out), "--json"]) == 0
    board = json.loads(capsys.readouterr().out)
    assert sorted(board["tasks"][0]["run_ids"]) == sorted(ids) or board["runs"] == 2
    assert main(["export", *ids, "--data-dir", str(data), str(out)]) == 2  # not empty
    assert "not an empty directory" in capsys.readouterr().err


def _number_pattern(value: float) -> re.Pattern[str]:
    texts = {repr(value), f"{value:.4g}", f"{value:.6g}"}
    return re.compile(r"(?<![\d.])(" + "|".join(re.escape(t) for t in texts) + r")(?![\d])")


def test_no_agent_visible_column_holds_a_hidden_score_seed_secret_or_path(
    runs: tuple[Path, list[str]], tmp_path: Path
) -> None:
    data, ids = runs
    _bundle(data, ids, tmp_path / "scan", "jsonl")
    corpus_parts = []
    for name, table in TABLES.items():
        agent_cols = [c.name for c in table.columns if c.visibility == "agent"]
        for line in (tmp_path / "scan" / f"{name}.jsonl").read_text().splitlines():
            row = json.loads(line)
            corpus_parts += [json.dumps(row[c]) for c in agent_cols]
    corpus = "\n".join(corpus_parts)
    assert "Crasher" in corpus and "deliberate" in corpus  # the scan sees the columns
    store = Store(data, create=False)
    try:
        for rid in ids:
            run = store.get_run(rid)
            assert run is not None
            public = {s.score for s in store.list_submissions(rid)}
            hidden = [r.score for r in store.results(rid)]
            checked = [h for h in hidden if h is not None and h not in public and h % 1]
            assert checked, f"hidden scores {hidden} cannot be told from public numbers"
            for value in checked:
                assert not _number_pattern(value).search(corpus), f"hidden score {value} leaked"
            assert run.secret.hex() not in corpus
            for split, count in (("train", 8), ("validation", 7), ("test", 9)):
                for i in range(count):
                    for seed in (
                        seeds.episode_seed(run.secret, LEAK, split, i),
                        seeds.policy_seed(run.secret, LEAK, split, i),
                    ):
                        assert str(seed) not in corpus, f"{split} seed {i} leaked"
        assert str(store.data_dir) not in corpus
    finally:
        store.close()


def test_the_doc_describes_every_column() -> None:
    doc = (ROOT / "docs" / "results.md").read_text()
    for table in TABLES.values():
        assert f"`{table.name}`" in doc, table.name
        for column in table.columns:
            assert f"`{column.name}`" in doc, f"{table.name}.{column.name}"
