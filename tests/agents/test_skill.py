"""The operator's skill: its front matter, its reference pages, the commands it shows,
installing it where Claude Code and Codex look, and keeping it out of agent runs."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from evopolicy_mcp.agents.launch import run_agent
from evopolicy_mcp.agents.skill import SKILL_NAME, front_matter, install_skill, skill_source
from evopolicy_mcp.cli.main import build_parser, main
from tests.support.agents import fake_cli, options

REPO = Path(__file__).resolve().parents[2]


def _pages() -> list[Path]:
    return sorted(skill_source().rglob("*.md"))


def _shown_commands() -> list[str]:
    """Every ``evopolicy-mcp ...`` line inside a fenced code block of the skill's pages."""
    out = []
    for page in _pages():
        for block in re.findall(r"```(?:bash)?\n(.*?)```", page.read_text(), re.S):
            for line in block.splitlines():
                command = line.split("  #")[0].split(" > ")[0].split(" | ")[0].strip()
                if command.startswith("evopolicy-mcp "):
                    out.append(command)
    return out


def test_the_front_matter_names_the_skill_and_says_it_is_not_for_the_agent_under_test() -> None:
    meta = front_matter((skill_source() / "SKILL.md").read_text())
    assert meta["name"] == SKILL_NAME == skill_source().name
    description = meta["description"].lower()
    assert len(description) <= 1024  # the skills standard's limit
    assert "operator" in description and "never" in description
    assert "agent under test" in description


def test_the_skill_names_every_reference_page_and_every_page_it_names_exists() -> None:
    text = (skill_source() / "SKILL.md").read_text()
    named = set(re.findall(r"references/[a-z-]+\.md", text))
    present = {f"references/{p.name}" for p in (skill_source() / "references").glob("*.md")}
    assert named == present and len(present) >= 5


def test_the_repository_links_the_shipped_skill() -> None:
    linked = REPO / "agent_configs" / "skills" / SKILL_NAME
    assert linked.is_dir() and linked.resolve() == skill_source().resolve()


def test_every_command_the_skill_shows_parses_and_its_help_runs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    commands = _shown_commands()
    assert len(commands) >= 20
    helped: set[tuple[str, ...]] = set()
    for command in commands:
        argv = shlex.split(command)[1:]
        args, extra = build_parser(argv[0]).parse_known_args(argv)  # exits 2 on a bad option
        assert not extra or argv[0] == "export", command  # export takes RUN... OUT
        path = tuple(argv[:2] if argv[0] == "agent" else argv[:1])
        if path in helped:
            continue
        helped.add(path)
        with pytest.raises(SystemExit) as done:
            main([*path, "--help"])
        assert done.value.code == 0, command
        assert "usage: evopolicy-mcp" in capsys.readouterr().out


@pytest.mark.parametrize(("client", "home"), [("claude", ".claude"), ("codex", ".agents")])
def test_agent_config_installs_the_skill_where_each_cli_looks(
    client: str, home: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["agent-config", client, "--skill", str(tmp_path)]) == 0
    target = tmp_path / home / "skills" / SKILL_NAME
    assert str(target) in capsys.readouterr().out
    assert (target / "SKILL.md").read_text() == (skill_source() / "SKILL.md").read_text()
    assert sorted(p.name for p in (target / "references").iterdir()) == sorted(
        p.name for p in (skill_source() / "references").iterdir()
    )
    # Again: an older copy is replaced, not merged with.
    (target / "references" / "stale.md").write_text("old")
    install_skill(client, tmp_path)
    assert not (target / "references" / "stale.md").exists()


def test_a_cli_without_skills_is_told_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["agent-config", "kimi", "--skill", str(tmp_path)]) == 2
    assert "--skill is for claude and codex" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_agent_run_puts_nothing_of_the_skill_where_the_agent_can_see(
    agent_env: Path, tmp_path: Path, tasks_dir: Path
) -> None:
    # The fake CLI lists what its workspace and home hold; it never reaches its run.
    fake_cli(
        agent_env,
        "claude",
        """
        import json, os
        seen = []
        for root in {os.getcwd(), os.environ.get("HOME", "/nonexistent")}:
            for folder, _dirs, files in os.walk(root):
                seen += [os.path.join(folder, f) for f in files]
        with open("listing.json", "w") as f:
            json.dump(seen, f)
        """,
    )
    run_agent(options(tmp_path, tasks_dir))
    seen = (tmp_path / "ws" / "listing.json").read_text()
    assert "TASK.md" in seen  # the listing covered the workspace
    assert "SKILL.md" not in seen and SKILL_NAME + "/references" not in seen
