"""Export runs as a rollout dataset bundle, and read a bundle's runs back.

A bundle is a directory::

    manifest.json              schema name and version, producer, tables, row counts, columns
    runs.jsonl | runs.parquet  one file per table of :data:`~.dataset.TABLES`
    ...

Each table loads on its own: ``pyarrow.parquet.read_table``, ``pandas``, or the
Hugging Face loaders (``load_dataset("json", data_files=...)``,
``load_dataset("parquet", ...)``). Values whose shape differs between
environments (observations, actions, feedback) are JSON text. Rows are
written as they are made (Parquet in row groups), so memory stays bounded by
one run's largest submission.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import IO, Any, Literal

from evopolicy_mcp.host.public import submission_status
from evopolicy_mcp.results.dataset import NAME, TABLES, VERSION, Table, arrow_schema
from evopolicy_mcp.results.extras import require
from evopolicy_mcp.results.programs import file_entries, program_files
from evopolicy_mcp.results.seen import feedback_document, read_feedback, redactor
from evopolicy_mcp.results.summary import RunSummary, summarize
from evopolicy_mcp.store.database import Store
from evopolicy_mcp.store.records import StoreError

__all__ = ["Format", "export_runs", "read_bundle_runs", "run_rows"]

Format = Literal["jsonl", "parquet"]
ROW_GROUP = 256
SPLITS = {"validation": "validation", "test": "assessment"}


class _Writer:
    """Rows of one table into one file, in the bundle's format."""

    def __init__(self, table: Table, directory: Path, fmt: Format) -> None:
        self.table, self.fmt, self.rows = table, fmt, 0
        self.path = directory / f"{table.name}.{fmt}"
        self._batch: list[dict[str, Any]] = []
        self._fh: IO[str] | None = None
        self._pq: Any = None
        if fmt == "jsonl":
            self._fh = self.path.open("w", encoding="utf-8")
        else:
            pq = require("pyarrow.parquet", "Parquet export")
            self._schema = arrow_schema(table)
            self._pq = pq.ParquetWriter(self.path, self._schema)

    def write(self, row: dict[str, Any]) -> None:
        assert list(row) == self.table.names, (self.table.name, list(row))
        self.rows += 1
        if self._fh is not None:
            self._fh.write(json.dumps(row, ensure_ascii=False, allow_nan=False) + "\n")
            return
        self._batch.append(row)
        if len(self._batch) >= ROW_GROUP:
            self._flush()

    def _flush(self) -> None:
        if self._pq is not None and self._batch:
            import pyarrow as pa

            self._pq.write_table(pa.Table.from_pylist(self._batch, schema=self._schema))
            self._batch = []

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
        else:
            self._flush()
            self._pq.close()


def _num(value: float | None) -> float | None:
    """Finite floats only (JSON has no NaN or infinity)."""
    return value if value is None or value == value and abs(value) != float("inf") else None


def run_rows(store: Store, summary: RunSummary) -> Iterator[tuple[str, dict[str, Any]]]:
    """(table name, row) for every row of one run."""
    run_id = summary.run_id
    yield (
        "runs",
        {k: _num(v) if isinstance(v, float) else v for k, v in summary.model_dump().items()},
    )
    redact = redactor(store)
    seen_programs: set[str] = set()
    spent = 0
    previous: str | None = None
    for sub in store.list_submissions(run_id):
        if sub.program_digest not in seen_programs:
            seen_programs.add(sub.program_digest)
            files = program_files(store, sub.program_digest)
            yield (
                "programs",
                {
                    "run_id": run_id,
                    "program_digest": sub.program_digest,
                    "first_submission_id": sub.id,
                    "files": file_entries(files),
                },
            )
        status = submission_status(sub.state)
        if status != "failed":
            spent += sub.charged
        fb = read_feedback(store, run_id, sub.id) if status == "complete" else None
        yield (
            "submissions",
            {
                "run_id": run_id,
                "submission_id": sub.id,
                "ordinal": sub.ordinal,
                "selector": sub.selector,
                "indices": list(sub.indices),
                "charged": sub.charged if status != "failed" else 0,
                "episodes_spent": spent,
                "program_digest": sub.program_digest,
                "previous_program_digest": previous,
                "status": status,
                "score": _num(sub.score) if status == "complete" else None,
                "policy_failures": sub.policy_failures if status == "complete" else None,
                "created": sub.created,
                "finished": sub.finished,
                "feedback": json.dumps(feedback_document(fb, redact)) if fb else None,
            },
        )
        previous = sub.program_digest
        if fb is None:
            continue
        summaries = {e.index: e for e in fb.episodes}
        for trace in fb.traces:
            episode = summaries.get(trace.index)
            yield (
                "episodes",
                {
                    "run_id": run_id,
                    "submission_id": sub.id,
                    "index": trace.index,
                    "status": episode.status if episode else None,
                    "failure": episode.failure.value if episode and episode.failure else None,
                    "episode_return": _num(episode.episode_return) if episode else None,
                    "steps": episode.steps if episode else None,
                    "trace_truncated": trace.truncated,
                    "observations": [json.dumps(s.observation) for s in trace.steps],
                    "actions": [json.dumps(s.action) for s in trace.steps],
                    "rewards": [s.reward for s in trace.steps],
                    "artifacts": list(trace.artifacts),
                },
            )
    agent_dir = store.run_dir(run_id) / "agent"
    if summary.agent is not None and agent_dir.is_dir():
        ended = next((e for e in reversed(store.events(run_id)) if e.kind == "agent_ended"), None)
        yield (
            "transcripts",
            {
                "run_id": run_id,
                "agent": summary.agent,
                "model": summary.model,
                "lines": _lines(agent_dir / "stdout.jsonl"),
                "stderr": _read(agent_dir / "stderr.log"),
                "dropped_bytes": int(ended.detail.get("dropped_bytes", 0)) if ended else None,
            },
        )
    run = store.get_run(run_id)
    for r in store.results(run_id):
        yield (
            "outcomes",
            {
                "run_id": run_id,
                "split": SPLITS[r.split],
                "submission_id": r.submission_id,
                "episodes": r.episodes,
                "score": _num(r.score),
                "policy_failures": r.policy_failures,
                "failures": json.dumps(r.failures),
                "selected": run is not None and r.submission_id == run.selected,
            },
        )


def _read(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return None


def _lines(path: Path) -> list[str]:
    text = _read(path)
    return text.splitlines() if text else []


def export_runs(
    store: Store,
    run_ids: list[str],
    out: Path,
    fmt: Format,
    *,
    experiment: str | None = None,
) -> dict[str, Any]:
    """Write the runs as a bundle in ``out`` (a new or empty directory); return its manifest."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise StoreError(f"{out} exists and is not an empty directory; give a new one")
    summaries = []
    for run_id in run_ids:
        summary = summarize(store, run_id, experiment=experiment)
        if summary is None:
            raise StoreError(f"no run {run_id[:200]!r} in {store.data_dir}")
        summaries.append(summary)
    if fmt == "parquet":
        require("pyarrow.parquet", "Parquet export")
    out.mkdir(parents=True, exist_ok=True)
    writers = {name: _Writer(table, out, fmt) for name, table in TABLES.items()}
    try:
        for summary in summaries:
            for name, row in run_rows(store, summary):
                writers[name].write(row)
    finally:
        for w in writers.values():
            w.close()
    manifest = {
        "schema": NAME,
        "version": VERSION,
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "producer": f"evopolicy-mcp {_version()}",
        "format": fmt,
        "experiment": experiment,
        "runs": [s.run_id for s in summaries],
        "tables": {
            name: {
                "file": w.path.name,
                "rows": w.rows,
                "doc": w.table.doc,
                "columns": [c.__dict__ for c in w.table.columns],
            }
            for name, w in writers.items()
        },
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def _version() -> str:
    try:
        return metadata.version("evopolicy-mcp")
    except metadata.PackageNotFoundError:
        return "unknown"


def read_bundle_runs(bundle: Path) -> list[RunSummary]:
    """The runs table of an exported bundle (this machine's or another's)."""
    try:
        manifest = json.loads((bundle / "manifest.json").read_text())
    except (OSError, ValueError) as exc:
        raise StoreError(f"{bundle} is not an exported bundle (manifest.json: {exc})") from None
    if manifest.get("schema") != NAME:
        raise StoreError(f"{bundle}: not an {NAME} bundle")
    if not isinstance(manifest.get("version"), int) or manifest["version"] > VERSION:
        raise StoreError(
            f"{bundle}: schema version {manifest.get('version')} is newer than this "
            f"evopolicy-mcp reads ({VERSION}); upgrade evopolicy-mcp"
        )
    path = bundle / manifest["tables"]["runs"]["file"]
    if path.suffix == ".parquet":
        pq = require("pyarrow.parquet", "reading a Parquet bundle")
        rows = pq.read_table(path).to_pylist()
    else:
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    known = set(RunSummary.model_fields)
    return [RunSummary.model_validate({k: v for k, v in r.items() if k in known}) for r in rows]
