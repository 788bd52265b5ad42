"""The rollout dataset's schema: tables, columns, their types and who could see them.

One definition serves the JSON-lines and Parquet writers, the Arrow schema,
the manifest of every bundle and ``docs/results.md`` (a test checks the doc
names every column). Bump :data:`VERSION` on any change a reader would notice.

Visibility of a column:

- ``agent``: what the agent saw, or could have asked for, during its run
  (its programs, the selectors, feedback as the host's public views give it,
  step traces of traced training episodes, its own CLI's output). Built with
  the host's public view functions; a test scans these columns for anything
  hidden.
- ``operator``: the host's hidden results (validation and assessment), never
  shown to the agent. Seeds and run secrets are in no column at all.
- ``record``: bookkeeping about the run (agent identity, confinement, timing,
  budget, tokens) that the agent was not shown but that is not hidden either.
"""

from __future__ import annotations

import types
import typing
from dataclasses import dataclass
from typing import Any, Literal

from evopolicy_mcp.results.summary import RunSummary

__all__ = [
    "NAME",
    "TABLES",
    "VERSION",
    "Column",
    "Table",
    "Visibility",
    "arrow_schema",
]

NAME = "evopolicy-rollouts"
VERSION = 1
Visibility = Literal["agent", "operator", "record"]
# Column types, as Arrow names them. "files" is list<struct<path, text, encoding>>.
TYPES = (
    "string",
    "int64",
    "float64",
    "bool",
    "list<string>",
    "list<int64>",
    "list<float64>",
    "files",
)


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    visibility: Visibility
    doc: str


@dataclass(frozen=True)
class Table:
    name: str
    doc: str
    columns: tuple[Column, ...]

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]


def _summary_type(annotation: Any) -> str:
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType) and len(args) == 1:
        return _summary_type(args[0])
    if origin is Literal or annotation is str:
        return "string"
    return {int: "int64", float: "float64", bool: "bool"}[annotation]


_OPERATOR_SUMMARY = {"validation_score", "assessment_score"}


def _runs() -> Table:
    columns = tuple(
        Column(
            name,
            _summary_type(f.annotation),
            "operator" if name in _OPERATOR_SUMMARY else "record",
            f.description or name.replace("_", " "),
        )
        for name, f in RunSummary.model_fields.items()
    )
    return Table("runs", "one row per run: who played, how, and the outcome", columns)


def _c(name: str, type_: str, visibility: Visibility, doc: str) -> Column:
    assert type_ in TYPES, type_
    return Column(name, type_, visibility, doc)


_RUN = _c("run_id", "string", "record", "the run")
_SUB = _c("submission_id", "string", "agent", "the submission (s1, s2, ...)")

TABLES: dict[str, Table] = {
    t.name: t
    for t in (
        _runs(),
        Table(
            "programs",
            "every program version a run submitted, with its source files",
            (
                _RUN,
                _c("program_digest", "string", "agent", "sha256 of the program's manifest"),
                _c("first_submission_id", "string", "agent", "the first submission of it"),
                _c("files", "files", "agent", "path, text, encoding (utf-8 or base64)"),
            ),
        ),
        Table(
            "submissions",
            "every submission with its feedback as the agent saw it",
            (
                _RUN,
                _SUB,
                _c("ordinal", "int64", "agent", "1, 2, ... in order of admission"),
                _c("selector", "string", "agent", "the episodes as submitted ('0:4,8')"),
                _c("indices", "list<int64>", "agent", "training-pool indices evaluated"),
                _c("charged", "int64", "agent", "episodes charged"),
                _c("episodes_spent", "int64", "agent", "episodes charged up to and with it"),
                _c("program_digest", "string", "agent", "the program evaluated"),
                _c("previous_program_digest", "string", "agent", "the submission before's"),
                _c("status", "string", "agent", "complete, failed (a host fault) or running"),
                _c("score", "float64", "agent", "public score on its episodes"),
                _c("policy_failures", "int64", "agent", "episodes ended by a policy failure"),
                _c("created", "float64", "record", "admitted at (unix time)"),
                _c("finished", "float64", "record", "feedback committed at"),
                _c(
                    "feedback",
                    "string",
                    "agent",
                    "JSON: score, metrics, failures, every episode's public summary "
                    "(tracebacks, output, report) and step traces, as get_feedback gives them",
                ),
            ),
        ),
        Table(
            "episodes",
            "step traces of traced training episodes (all of them with --trace-all)",
            (
                _RUN,
                _SUB,
                _c("index", "int64", "agent", "training-pool index"),
                _c("status", "string", "agent", "ok or failed"),
                _c("failure", "string", "agent", "failure code, if failed"),
                _c("episode_return", "float64", "agent", "sum of rewards of the whole episode"),
                _c("steps", "int64", "agent", "steps of the whole episode"),
                _c("trace_truncated", "bool", "agent", "the trace keeps fewer steps"),
                _c("observations", "list<string>", "agent", "JSON of each step's observation"),
                _c("actions", "list<string>", "agent", "JSON of each step's action"),
                _c("rewards", "list<float64>", "agent", "each step's reward"),
                _c("artifacts", "list<string>", "agent", "files saved (replay.gif, ...)"),
            ),
        ),
        Table(
            "transcripts",
            "the agent CLI's own output stream (stream-json or JSON lines)",
            (
                _RUN,
                _c("agent", "string", "record", "the CLI"),
                _c("model", "string", "record", "the model asked for"),
                _c("lines", "list<string>", "agent", "stdout, one entry per line"),
                _c("stderr", "string", "agent", "stderr"),
                _c("dropped_bytes", "int64", "record", "output beyond the launcher's cap"),
            ),
        ),
        Table(
            "outcomes",
            "hidden results: validation of each candidate, assessment of the selected",
            (
                _RUN,
                _c("split", "string", "operator", "validation or assessment"),
                _c("submission_id", "string", "operator", "the candidate"),
                _c("episodes", "int64", "operator", "hidden episodes evaluated"),
                _c("score", "float64", "operator", "its score on them"),
                _c("policy_failures", "int64", "operator", "policy failures among them"),
                _c("failures", "string", "operator", "JSON: count per failure code"),
                _c("selected", "bool", "operator", "the host selected this candidate"),
            ),
        ),
    )
}


def arrow_schema(table: Table) -> Any:
    """The table's ``pyarrow.Schema``, with each column's visibility and doc as metadata."""
    import pyarrow as pa

    def list_of(item: Any) -> Any:
        return pa.list_(pa.field("element", item))  # Parquet's name: it reads back the same

    files = list_of(
        pa.struct([("path", pa.string()), ("text", pa.string()), ("encoding", pa.string())])
    )
    kinds = {
        "string": pa.string(),
        "int64": pa.int64(),
        "float64": pa.float64(),
        "bool": pa.bool_(),
        "list<string>": list_of(pa.string()),
        "list<int64>": list_of(pa.int64()),
        "list<float64>": list_of(pa.float64()),
        "files": files,
    }
    return pa.schema(
        [
            pa.field(c.name, kinds[c.type], metadata={"visibility": c.visibility, "doc": c.doc})
            for c in table.columns
        ],
        metadata={"schema": f"{NAME}/{VERSION}", "table": table.name},
    )
