"""The per-run HTML report: one self-contained file whose charts headless Chromium draws."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from evopolicy_mcp.cli.main import main
from evopolicy_mcp.host.authority import Host
from tests.support.results import CRAFTER_BASELINE, finished_run, write_crafter_task

pytest.importorskip("plotly")

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _chromium() -> str:
    if CHROMIUM is None:
        if os.environ.get("EVOPOLICY_REQUIRE_CHROMIUM"):
            pytest.fail("chromium is required here (EVOPOLICY_REQUIRE_CHROMIUM) but missing")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return CHROMIUM


@pytest.fixture(scope="module")
def crafter_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    root = tmp_path_factory.mktemp("page")
    tasks = write_crafter_task(root / "tasks")
    baseline = {"policy.py": (CRAFTER_BASELINE / "policy.py").read_text()}
    tweaked = {"policy.py": baseline["policy.py"] + "\n# second version\n"}
    with Host(root / "data", tasks_dirs=[tasks], seed=4) as host:
        rid, _ = finished_run(host, "crafter-short", [("0:1", baseline), ("1:2", tweaked)], [1, 0])
    yield root / "data", rid


def test_the_report_page_loads_in_headless_chromium_with_its_charts_and_replays(
    crafter_run: tuple[Path, str], tmp_path: Path
) -> None:
    data, rid = crafter_run
    page = tmp_path / "run.html"
    assert main(["report", rid, "--data-dir", str(data), "--html", str(page)]) == 0
    text = page.read_text()
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=\"https?:", text), "fetches"
    assert text.count('<img class="replay" src="data:image/gif;base64,') == 2
    assert "# second version" in text and "+# second version" in text  # the diff
    dom = subprocess.run(
        [
            _chromium(),
            *CHROMIUM_FLAGS,
            f"--user-data-dir={tmp_path / 'profile'}",
            "--virtual-time-budget=15000",
            "--dump-dom",
            page.as_uri(),
        ],  # fmt: skip
        capture_output=True,
        text=True,
        timeout=180,
    ).stdout
    for chart, layer in (("learning-curve", "scatterlayer"), ("failures", "barlayer")):
        start = dom.index(f'id="{chart}"')
        drawn = dom[start : start + 200_000]
        assert "main-svg" in drawn and layer in drawn, f"{chart} was not drawn"
    # The learning curve holds the public scores, best so far, validation and assessment.
    curve = dom[dom.index('id="learning-curve"') :][:200_000]
    for name in ("public score", "best so far", "validation of candidates", "assessment of"):
        assert name in curve, name


def test_without_plotly_the_report_says_which_extra_to_install(
    crafter_run: tuple[Path, str], tmp_path: Path
) -> None:
    data, rid = crafter_run
    code = (
        "import sys; sys.modules['plotly'] = None\n"
        "from evopolicy_mcp.cli.main import main\n"
        f"sys.exit(main(['report', {rid!r}, '--data-dir', {str(data)!r}, "
        f"'--html', {str(tmp_path / 'x.html')!r}]))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "pip install 'evopolicy-mcp[results]'" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "x.html").exists()
