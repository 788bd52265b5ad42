"""The layers of DESIGN.md, read from the source with ``ast``: nothing imports upward, no cycles.

::

     cli                      operator commands (``evopolicy-mcp ...``)
      |      \\
    server   agents           the MCP surface; agent CLIs run headless against a run
       \\     /
        host                  authority: runs, pools, budgets, admission, finalize
       /    \\
 evaluation  store            one program over a list of episodes; SQLite + files
   |   |  \\
 runner |  adapters  tasks    the host's side of policy processes; environment plugins
   |    |    |
 kernel |  environments       inside the template and policy processes
   |    |
  policy                      the ABI submitted code implements, stdlib only

A module's layer is its subpackage (``evopolicy_mcp.kernel.frames`` is in
``kernel``). Imports inside functions and under ``TYPE_CHECKING`` count too: a
lazy import is still a dependency. The package's own ``__init__`` is the public
face: it may import anything (lazily), and nothing of the package imports it.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "evopolicy_mcp"

# Which layers each layer may import (its own is always allowed).
MAY_IMPORT: dict[str, set[str]] = {
    "policy": set(),
    "kernel": {"policy"},
    "runner": {"kernel"},
    "adapters": set(),
    "environments": {"adapters"},
    "tasks": set(),
    "evaluation": {"policy", "kernel", "runner", "adapters", "tasks"},
    "store": set(),
    "host": {"policy", "kernel", "runner", "adapters", "tasks", "evaluation", "store"},
    "server": {"kernel", "runner", "adapters", "tasks", "evaluation", "store", "host"},
    "agents": {"kernel", "runner", "adapters", "tasks", "evaluation", "store", "host"},
    "results": {"tasks", "evaluation", "store", "host"},
    "cli": {
        "policy",
        "kernel",
        "runner",
        "adapters",
        "environments",
        "tasks",
        "evaluation",
        "store",
        "host",
        "server",
        "agents",
        "results",
        "__main__",
    },
    "__main__": {"cli"},
    "face": set(),  # evopolicy_mcp/__init__.py: checked on its own below
}
LAYERS = set(MAY_IMPORT)

# The MCP SDK stays in the MCP surface and the MCP clients.
MCP_LAYERS = {"server", "cli"}
MCP_MODULES = {
    "evopolicy_mcp.agents.scripted_agent",  # an MCP client, as an agent CLI is
    "evopolicy_mcp.agents.check",  # starts a configured server with the SDK client
    "evopolicy_mcp.agents.client",  # the transports those clients share
}
# Simulators stay out of everything but the adapters (and the benchmark's raw loop), so
# listing tasks or starting the server imports none.
SIMULATOR_LAYERS = {"adapters", "environments"}
SIMULATOR_MODULES = {"evopolicy_mcp.cli.bench"}
SIMULATORS = {
    "gymnasium",
    "gym",
    "crafter",
    "mujoco",
    "ale_py",
    "minigrid",
    "highway_env",
    "Box2D",
    "pygame",
    "dm_control",
    "nle",
    "minihack",
    "gymnasium_robotics",
    "metaworld",
    "robosuite",
    "vizdoom",
    "stable_retro",
    "retro",
}
# Third-party packages allowed in the kernel and runner; the template process loads these.
KERNEL_THIRD_PARTY = {"numpy"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {
    module_name(path): path
    for path in sorted((ROOT / PACKAGE).rglob("*.py"))
    if "builtin" not in path.relative_to(ROOT / PACKAGE).parts  # task baselines: programs
}


def layer_of(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "face"
    return parts[1]


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


def internal(names: Iterable[str]) -> set[str]:
    return {n for n in names if n.split(".")[0] == PACKAGE}


def third_party(names: Iterable[str]) -> set[str]:
    return {
        n.split(".")[0]
        for n in names
        if n.split(".")[0] != PACKAGE and n.split(".")[0] not in sys.stdlib_module_names
    }


GRAPH = {m: {n for n in internal(imports_of(m)) if n in MODULES and n != m} for m in MODULES}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_every_module_lives_in_a_known_layer() -> None:
    unknown = sorted(m for m in MODULES if layer_of(m) not in LAYERS)
    assert not unknown, f"give these modules' folder a row in MAY_IMPORT: {unknown}"


def test_the_package_top_level_holds_only_the_face_the_abi_and_the_entry_point() -> None:
    top = sorted(
        m
        for m in MODULES
        if m.count(".") <= 1 and (ROOT / PACKAGE / f"{m.split('.')[-1]}.py").exists()
    )
    assert top == ["evopolicy_mcp.__main__", "evopolicy_mcp.policy"], top


@pytest.mark.parametrize("module", sorted(m for m in MODULES if layer_of(m) != "face"))
def test_no_module_imports_upward(module: str) -> None:
    layer = layer_of(module)
    allowed = MAY_IMPORT[layer] | {layer}
    upward = sorted(f"{n} ({layer_of(n)})" for n in GRAPH[module] if layer_of(n) not in allowed)
    assert not upward, f"{module} ({layer}) imports upward: {upward}"


def test_there_is_no_import_cycle_between_modules() -> None:
    assert cycles(GRAPH) == []


def test_the_cycle_check_finds_a_cycle() -> None:
    # The check above is only as good as this.
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_nothing_of_the_package_imports_its_public_face() -> None:
    importers = sorted(m for m in MODULES if PACKAGE in GRAPH[m] and m != PACKAGE)
    assert not importers, importers


def test_the_public_face_names_only_what_it_can_import() -> None:
    import evopolicy_mcp

    for name in evopolicy_mcp.__all__:
        assert getattr(evopolicy_mcp, name) is not None, name


def test_every_layer_says_what_it_owns_and_what_it_may_import() -> None:
    for layer in sorted(LAYERS - {"face", "policy", "__main__"}):
        init = ROOT / PACKAGE / layer / "__init__.py"
        tree = ast.parse(init.read_text())
        doc = ast.get_docstring(tree) or ""
        assert "May import" in doc, f"{init}: say what the layer may import"
        names = [
            n
            for n in tree.body
            if (
                isinstance(n, ast.Assign)
                and any(getattr(t, "id", "") == "__all__" for t in n.targets)
            )
            or (isinstance(n, ast.AnnAssign) and getattr(n.target, "id", "") == "__all__")
        ]
        assert names, f"{init}: a deliberate __all__"


def test_the_policy_abi_imports_only_the_standard_library() -> None:
    names = imports_of("evopolicy_mcp.policy")
    assert not internal(names) and not third_party(names), names


def test_the_kernel_and_the_runner_import_no_third_party_package_but_numpy() -> None:
    for module in sorted(m for m in MODULES if layer_of(m) in {"kernel", "runner"}):
        assert third_party(imports_of(module)) <= KERNEL_THIRD_PARTY, module


def test_only_the_mcp_surface_imports_mcp() -> None:
    importers = sorted(m for m in MODULES if "mcp" in third_party(imports_of(m)))
    strays = [m for m in importers if layer_of(m) not in MCP_LAYERS and m not in MCP_MODULES]
    assert not strays, strays
    assert "evopolicy_mcp.server.app" in importers, "the check sees the server's own imports"


def test_simulators_are_imported_only_by_adapters() -> None:
    importers = sorted(m for m in MODULES if third_party(imports_of(m)) & SIMULATORS)
    strays = [
        m for m in importers if layer_of(m) not in SIMULATOR_LAYERS and m not in SIMULATOR_MODULES
    ]
    assert not strays, strays
    assert "evopolicy_mcp.adapters.gym" in importers


def test_the_checker_resolves_relative_and_submodule_imports() -> None:
    # The rules above are only as good as this resolution.
    assert "evopolicy_mcp.kernel.frames" in imports_of("evopolicy_mcp.kernel.child")
    assert "evopolicy_mcp.host.authority" in imports_of("evopolicy_mcp.server.app")
    assert "evopolicy_mcp.agents.base" in imports_of("evopolicy_mcp.agents.claude")
