"""The import direction of DESIGN.md, read from the source with ``ast``: nothing imports upward.

::

     surface       cli, server and the other MCP / operator entry points
        |
       host        runs, pools, budgets, admission, validation, views
      /    \\
 evaluation  store
   |    \\
 runner  plugins, leaves   (adapters and their helpers; tasks, seeds, snapshots)
   |
 kernel            what runs inside the template and policy processes
   |
  abi              policy.py, a stdlib-only leaf

Every module must be given a tier below; a new module fails this test until
it is placed. Imports inside functions and under ``TYPE_CHECKING`` count too:
a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("evopolicy_mcp", "environments")

TIERS: dict[str, set[str]] = {
    "abi": {"evopolicy_mcp.policy"},
    "kernel": {
        "evopolicy_mcp.frames",
        "evopolicy_mcp.mailbox",
        "evopolicy_mcp.scratch",
        "evopolicy_mcp.confine",
        "evopolicy_mcp.linux",
        "evopolicy_mcp.cgroups",
        "evopolicy_mcp.sandbox",
        "evopolicy_mcp.child",
        "evopolicy_mcp.zygote",
    },
    "runner": {"evopolicy_mcp.runner", "evopolicy_mcp.process"},
    "leaves": {
        "evopolicy_mcp.adapters",
        "evopolicy_mcp.tasks",
        "evopolicy_mcp.seeds",
        "evopolicy_mcp.snapshot",
    },
    "plugins": {
        "evopolicy_mcp.actions",
        "evopolicy_mcp.spaces",
        "evopolicy_mcp.conformance",
        "environments",
        "environments.gymnasium_adapter",
        "environments.gymnasium_catalog",
        "environments.crafter_adapter",
        "environments.crafter_report",
        "environments.crafter_scoring",
        "environments.crafter_world",
    },
    "evaluation": {
        "evopolicy_mcp.evaluation",
        "evopolicy_mcp.executor",
        "evopolicy_mcp.feedback",
        "evopolicy_mcp.scoring",
    },
    "store": {"evopolicy_mcp.store", "evopolicy_mcp.records", "evopolicy_mcp.instances"},
    "host": {
        "evopolicy_mcp.host",
        "evopolicy_mcp.admission",
        "evopolicy_mcp.errors",
        "evopolicy_mcp.guide",
        "evopolicy_mcp.judge",
        "evopolicy_mcp.public",
        "evopolicy_mcp.reports",
        "evopolicy_mcp.selection",
        "evopolicy_mcp.selectors",
        "evopolicy_mcp.views",
        "evopolicy_mcp.workers",
    },
    "surface": {
        "evopolicy_mcp",
        "evopolicy_mcp.__main__",
        "evopolicy_mcp.cli",
        "evopolicy_mcp.operator",
        "evopolicy_mcp.agent_config",
        "evopolicy_mcp.bench",
        "evopolicy_mcp.bench_mcp",
        "evopolicy_mcp.server",
        "evopolicy_mcp.bridge",
        "evopolicy_mcp.http_auth",
        "evopolicy_mcp.demo",
        "evopolicy_mcp.options",
        "evopolicy_mcp.agents",
        "evopolicy_mcp.agents.base",
        "evopolicy_mcp.agents.launch",
        "evopolicy_mcp.agents.check",
        "evopolicy_mcp.agents.command",
        "evopolicy_mcp.agents.claude",
        "evopolicy_mcp.agents.codex",
        "evopolicy_mcp.agents.kimi",
        "evopolicy_mcp.agents.qoder",
        "evopolicy_mcp.agents.scripted",
        "evopolicy_mcp.agents.procs",
        "evopolicy_mcp.agents.policy_family",
        "evopolicy_mcp.agents.scripted_agent",
    },
}

# Which tiers each tier may import (its own included).
MAY_IMPORT: dict[str, set[str]] = {
    "abi": set(),
    "kernel": {"abi", "kernel"},
    "runner": {"kernel", "runner"},
    "leaves": set(),
    "plugins": {"leaves", "plugins"},
    "evaluation": {"abi", "kernel", "runner", "leaves", "plugins", "evaluation"},
    "store": {"store"},
    "host": {"abi", "kernel", "runner", "leaves", "plugins", "evaluation", "store", "host"},
    "surface": set(TIERS),
}

# The MCP surface: the only modules that may import the MCP SDK.
MCP_MODULES = {
    "evopolicy_mcp.server",
    "evopolicy_mcp.bridge",
    "evopolicy_mcp.http_auth",
    "evopolicy_mcp.demo",
    "evopolicy_mcp.bench_mcp",
    "evopolicy_mcp.agents.scripted_agent",  # an MCP client, as an agent CLI is
    "evopolicy_mcp.agents.check",  # starts a configured server with the SDK client
}
# Simulators stay out of everything but the adapters (and the benchmark's raw loop), so
# listing tasks or starting the server imports none.
SIMULATOR_MODULES = {
    "environments.gymnasium_adapter",
    "environments.crafter_world",  # imported lazily by the crafter adapter
    "evopolicy_mcp.spaces",  # describes gymnasium spaces for the adapter, imported lazily
    "evopolicy_mcp.bench",
}
SIMULATORS = {"gymnasium", "gym", "crafter", "mujoco", "ale_py"}
# Third-party packages allowed below the evaluation; the template process loads these tiers.
KERNEL_THIRD_PARTY = {"numpy"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {
    module_name(path): path
    for package in PACKAGES
    for path in sorted((ROOT / package).rglob("*.py"))
}
TIER_OF = {module: tier for tier, modules in TIERS.items() for module in modules}


def imports_of(module: str) -> set[str]:
    """Every module ``module`` imports, as absolute names (submodules resolved)."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            for alias in node.names:
                # `from pkg import submodule` imports the submodule.
                candidate = f"{target}.{alias.name}"
                found.add(candidate if candidate in MODULES else target)
    return found


def internal(names: set[str]) -> set[str]:
    return {n for n in names if n.split(".")[0] in PACKAGES}


def third_party(names: set[str]) -> set[str]:
    return {
        n.split(".")[0]
        for n in names
        if n.split(".")[0] not in PACKAGES and n.split(".")[0] not in sys.stdlib_module_names
    }


def test_every_module_has_a_tier() -> None:
    unplaced = sorted(set(MODULES) - set(TIER_OF))
    assert not unplaced, f"place these modules in a tier of tests/test_layers.py: {unplaced}"
    gone = sorted(set(TIER_OF) - set(MODULES))
    assert not gone, f"these modules no longer exist; remove them from the tiers: {gone}"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_imports_upward(module: str) -> None:
    tier = TIER_OF.get(module)
    if tier is None:
        pytest.skip("not placed in a tier (see test_every_module_has_a_tier)")
    upward = sorted(
        f"{name} ({TIER_OF.get(name, 'no tier')})"
        for name in internal(imports_of(module))
        if name in MODULES and TIER_OF.get(name) not in MAY_IMPORT[tier]
    )
    assert not upward, f"{module} ({tier}) imports upward: {upward}"


def test_the_policy_abi_imports_only_the_standard_library() -> None:
    names = imports_of("evopolicy_mcp.policy")
    assert not internal(names) and not third_party(names), names


def test_the_kernel_and_the_runner_import_nothing_of_the_layers_above() -> None:
    for module in sorted(TIERS["kernel"] | TIERS["runner"]):
        names = imports_of(module)
        above = sorted(
            n for n in internal(names) if TIER_OF.get(n) not in {"abi", "kernel", "runner"}
        )
        assert not above, f"{module} imports {above}"
        assert third_party(names) <= KERNEL_THIRD_PARTY, f"{module}: {third_party(names)}"


def test_evaluation_imports_neither_host_nor_store_nor_surface() -> None:
    for module in sorted(TIERS["evaluation"]):
        tiers = {TIER_OF.get(n) for n in internal(imports_of(module))}
        assert not tiers & {"host", "store", "surface"}, (module, tiers)


def test_the_host_imports_neither_server_nor_mcp() -> None:
    for module in sorted(TIERS["host"]):
        names = imports_of(module)
        assert "mcp" not in third_party(names), module
        assert not {TIER_OF.get(n) for n in internal(names)} & {"surface"}, module


def test_the_store_imports_nothing_of_host_or_surface() -> None:
    for module in sorted(TIERS["store"]):
        tiers = {TIER_OF.get(n) for n in internal(imports_of(module))}
        assert tiers <= {"store"}, (module, tiers)


def test_only_the_mcp_surface_imports_mcp() -> None:
    importers = sorted(m for m in MODULES if "mcp" in third_party(imports_of(m)))
    assert set(importers) <= MCP_MODULES, importers
    assert "evopolicy_mcp.server" in importers, "the check sees the server's own imports"


def test_simulators_are_imported_only_by_adapters() -> None:
    importers = sorted(m for m in MODULES if third_party(imports_of(m)) & SIMULATORS)
    assert set(importers) <= SIMULATOR_MODULES, importers
    assert "environments.gymnasium_adapter" in importers


def test_the_checker_resolves_relative_and_submodule_imports() -> None:
    # The rules above are only as good as this resolution.
    assert "evopolicy_mcp.frames" in imports_of("evopolicy_mcp.child")  # from pkg import module
    assert "evopolicy_mcp.records" in imports_of("evopolicy_mcp.store")  # from .records import
    assert "evopolicy_mcp.host" in imports_of("evopolicy_mcp.server")
