"""Guards that keep the layout of docs/architecture.md: who imports whom, and the module lists.

One AST pass reads every import of ``anet_core/`` and ``plugins/*/anet_*``. Imports under
``if TYPE_CHECKING:`` only name types; every other one, at the top or inside a function, runs.
"""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from anet_core.plugins import KNOWN_MODULES

REPO = Path(__file__).parents[2]
PLUGIN_SURFACE = ("anet_core.api", "anet_core.wire", "anet_core.protocol")
"""What a module may import of the core (docs/plugins.md, "What a module imports")."""
NODE_SIDE = ("anet_core.link", "anet_core.tasks", "anet_core.store", "anet_core.node")
"""The node's link to the hub, its task layer, store and composition: never the hub's business."""
PROTOCOL_MAY_IMPORT = ("anet_core.protocol", "anet_core.identity", "anet_core.util",
                       "anet_core.wire", "anet_core.errors")
"""``anet_core.errors`` imports nothing; its ``ReasonError`` is the base of the protocol errors."""


@dataclass(frozen=True)
class Import:
    importer: str
    target: str
    """The module imported: ``from a.b import c`` is ``a.b.c`` when that is a module, else
    ``a.b``."""
    names: tuple[str, ...]
    where: str
    runtime: bool


def package_roots() -> list[Path]:
    """Directories whose children are top-level packages: the repository and each plugin."""
    return [REPO, *sorted(path.parent for path in (REPO / "plugins").glob("*/pyproject.toml"))]


def modules_under(roots: Iterable[Path]) -> dict[str, Path]:
    """Every module of the ``anet_*`` packages below ``roots``, by dotted name."""
    found = {}
    for root in roots:
        for package in sorted(root.glob("anet_*")):
            for path in sorted(package.rglob("*.py")):
                parts = path.relative_to(root).with_suffix("").parts
                found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imports_of(name: str, path: Path, known: Iterable[str]) -> Iterator[Import]:
    known = set(known)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]

    def walk(nodes: Iterable[ast.AST], runtime: bool) -> Iterator[Import]:
        for node in nodes:
            where = f"{path.relative_to(REPO) if path.is_relative_to(REPO) else path}:"
            if isinstance(node, ast.If) and _is_type_checking(node.test):
                yield from walk(node.body, False)
                yield from walk(node.orelse, runtime)
                continue
            if isinstance(node, ast.Import):
                for alias in node.names:
                    yield Import(name, alias.name, (), f"{where}{node.lineno}", runtime)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join([*parent, *([node.module] if node.module else [])])
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    yield Import(name, full if full in known else base, (alias.name,),
                                 f"{where}{node.lineno}", runtime)
            yield from walk(ast.iter_child_nodes(node), runtime)

    yield from walk(ast.parse(path.read_text()).body, True)


def all_imports(roots: Iterable[Path]) -> list[Import]:
    modules = modules_under(roots)
    return [found for name, path in modules.items() for found in imports_of(name, path, modules)]


def within(target: str, prefixes: Iterable[str]) -> bool:
    return any(target == prefix or target.startswith(f"{prefix}.") for prefix in prefixes)


def runtime_graph(imports: Iterable[Import], modules: Iterable[str]) -> dict[str, set[str]]:
    """Who runs whose import. Importing ``a.b.c`` first runs the package ``a.b`` (unless the
    importer is inside it, where the package is already being imported)."""
    modules = set(modules)
    graph: dict[str, set[str]] = {module: set() for module in modules}
    for found in imports:
        if not found.runtime or found.target not in modules:
            continue
        parts = found.target.split(".")
        for depth in range(1, len(parts) + 1):
            step = ".".join(parts[:depth])
            if step in modules and not within(found.importer, [step]):
                graph[found.importer].add(step)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for successor in sorted(graph[node]):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def surface_violations(roots: Iterable[Path]) -> list[str]:
    """Imports of modules below ``roots`` (plugin directories) that reach past the plugin
    surface, or into another module's package. Type-only imports count too."""
    roots = list(roots)
    imports = all_imports(roots)
    own = {name.partition(".")[0] for name in modules_under(roots)}
    wrong = []
    for found in imports:
        top = found.target.partition(".")[0]
        if top == "anet_core" and not within(found.target, PLUGIN_SURFACE):
            wrong.append(f"{found.where} imports {found.target} (use anet_core.api)")
        elif top in own and top != found.importer.partition(".")[0]:
            wrong.append(f"{found.where} imports {found.target} (modules never import each "
                         "other)")
    return wrong


def api_origins() -> dict[str, str]:
    """Each name ``anet_core.api`` exports, with the module it comes from: its imports, and
    its table of names imported on first use (``_LAZY``)."""
    modules = modules_under([REPO])
    path = REPO / "anet_core" / "api.py"
    origins = {name: found.target for found in imports_of("anet_core.api", path, modules)
               for name in found.names}
    table = next(node.value for node in ast.parse(path.read_text()).body
                 if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "_LAZY")
    for module, names in ast.literal_eval(table).items():
        origins |= dict.fromkeys(names, module)
    return origins


# --- (a) no runtime import cycles ---------------------------------------------------------------

def test_no_runtime_import_cycles() -> None:
    modules = modules_under(package_roots())
    assert cycles(runtime_graph(all_imports(package_roots()), modules)) == []


def test_the_cycle_check_sees_a_cycle_through_a_package() -> None:
    graph = {"a": {"b.inner"}, "b": {"b.inner"}, "b.inner": {"a"}}
    assert cycles(graph) == [{"a", "b.inner"}]
    imports = [Import("a", "b.inner", (), "a.py:1", True), Import("b", "b.inner", (), "b:1", True),
               Import("b.inner", "c", (), "b/inner.py:1", True),
               Import("c", "a", (), "c.py:1", True), Import("c", "b", (), "c.py:2", False)]
    graph = runtime_graph(imports, ["a", "b", "b.inner", "c"])
    assert graph["a"] == {"b", "b.inner"} and graph["b"] == {"b.inner"}  # b is inside b
    assert graph["c"] == {"a"}  # the type-only import of b is no edge
    assert cycles(graph) == [{"a", "b", "b.inner", "c"}]


# --- (b) modules import only the plugin surface -------------------------------------------------

def plugin_directories() -> list[Path]:
    """Every module in plugins/, and the third-party backend kind the tests install."""
    return [*package_roots()[1:], REPO / "tests" / "backends" / "kind_command"]


def test_modules_import_only_the_plugin_surface() -> None:
    assert surface_violations(plugin_directories()) == []


def test_a_module_importing_a_core_internal_is_caught(tmp_path: Path) -> None:
    package = tmp_path / "anet_fake"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "plugin.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "from anet_core.api import hookimpl\n"
        "from anet_core.protocol.tasks import Reason\n"
        "from anet_core.store import Store\n"
        "from anet_core import hookimpl as marker\n"
        "import anet_a2a.card\n"
        "if TYPE_CHECKING:\n"
        "    from anet_core.node import Node\n"
        "def later():\n"
        "    from anet_core.tasks.layer import TaskLayer\n")
    (tmp_path / "anet_a2a").mkdir()
    (tmp_path / "anet_a2a" / "card.py").write_text("")
    wrong = [line for line in surface_violations([tmp_path]) if "anet_fake" in line]
    assert [re.sub(r".*plugin\.py:(\d+) imports (\S+).*", r"\1 \2", line) for line in wrong] == [
        "4 anet_core.store", "5 anet_core", "6 anet_a2a.card", "8 anet_core.node",
        "10 anet_core.tasks.layer"]


# --- (c) the hub module imports nothing of the node ---------------------------------------------

def test_the_hub_imports_no_node_side_module() -> None:
    origins = api_origins()
    wrong = []
    for found in all_imports([REPO / "plugins" / "hub"]):
        sources = [origins[name] for name in found.names] if found.target == "anet_core.api" \
            else [found.target]
        wrong += [f"{found.where} imports {', '.join(found.names) or found.target} from {source}"
                  for source in sources if within(source, NODE_SIDE)]
    assert wrong == []


def test_api_origins_are_read_from_its_imports() -> None:
    origins = api_origins()
    assert origins["TaskLayer"] == "anet_core.tasks" and origins["Node"] == "anet_core.node"
    assert origins["hookimpl"] == "anet_core"


def test_api_exports_exactly_its_names_each_from_its_origin() -> None:
    """Every name of ``__all__`` has one origin, and the name loaded on first use is the one
    its module defines."""
    import anet_core.api as api

    origins = api_origins()
    assert set(origins) - {"annotations", "Any"} == set(api.__all__)
    for name in api.__all__:
        assert getattr(api, name) is getattr(importlib.import_module(origins[name]), name), name


# --- (d) leaves stay leaves ---------------------------------------------------------------------

def test_util_imports_nothing_of_anet() -> None:
    wrong = [f"{found.where} imports {found.target}" for found in all_imports([REPO])
             if found.importer.startswith("anet_core.util.") and found.target.startswith("anet")]
    assert wrong == []


def test_protocol_imports_only_protocol_identity_util_and_wire() -> None:
    wrong = [f"{found.where} imports {found.target}" for found in all_imports([REPO])
             if found.importer.startswith("anet_core.protocol.")
             and found.target.startswith("anet") and not within(found.target, PROTOCOL_MAY_IMPORT)]
    assert wrong == []


# --- (e) one list of modules ----------------------------------------------------------------------

def _pins(requirements: Iterable[str]) -> dict[str, str]:
    return dict(re.fullmatch(r"([A-Za-z0-9_.-]+)==(\S+)", requirement).groups()  # type: ignore[union-attr]
                for requirement in requirements)


def test_the_module_lists_agree() -> None:
    root = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    version = root["version"]
    extras = {name: _pins(pins) for name, pins in root["optional-dependencies"].items()
              if name not in {"all", "test", "fast"}}
    assert extras == {module: {dist: version} for module, dist in KNOWN_MODULES.items()}
    hub = tomllib.loads((REPO / "plugins" / "hub" / "pyproject.toml").read_text())["project"]
    assert root["optional-dependencies"]["fast"] == hub["optional-dependencies"]["fast"]
    assert _pins(root["optional-dependencies"]["all"]) == {
        dist: version for dist in KNOWN_MODULES.values()}

    published = {}
    for pyproject in sorted((REPO / "plugins").glob("*/pyproject.toml")):
        project = tomllib.loads(pyproject.read_text())["project"]
        module = pyproject.parent.name
        published[module] = project["name"]
        assert project["version"] == version, pyproject
        assert project["entry-points"] == {"anet.modules": {module: f"anet_{module}.plugin"}}
        assert f"{root['name']}=={version}" in project["dependencies"], pyproject
    assert published == KNOWN_MODULES

    makefile = (REPO / "Makefile").read_text()
    distributions = re.search(r"^DISTRIBUTIONS := (.*)$", makefile, re.MULTILINE).group(1)  # type: ignore[union-attr]
    assert set(re.findall(r"-e plugins/(\w+)", distributions)) == set(KNOWN_MODULES)

    script = (REPO / "scripts" / "check-no-a2a.sh").read_text()
    installed = set(re.findall(r"-e plugins/(\w+)", script))
    removed_dists = set(re.search(r"pip uninstall [^\n]*--yes ([^>\n]*)", script)  # type: ignore[union-attr]
                        .group(1).split())
    removed = {module for module, dist in KNOWN_MODULES.items() if dist in removed_dists}
    assert removed_dists == {KNOWN_MODULES[module] for module in removed}
    assert installed | removed == set(KNOWN_MODULES) and not installed & removed
    said_missing = re.search(r"assert \{([^}]*)\} <= missing", script).group(1)  # type: ignore[union-attr]
    said_installed = re.search(r"assert \{([^}]*)\} <= installed", script).group(1)  # type: ignore[union-attr]
    assert set(re.findall(r'"(\w+)"', said_missing)) == removed
    assert set(re.findall(r'"(\w+)"', said_installed)) == installed


# --- (f) lint -----------------------------------------------------------------------------------

def test_ruff_passes() -> None:
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", str(REPO)],
                            capture_output=True, text=True, timeout=120, cwd=REPO)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_map_names_every_room() -> None:
    """docs/architecture.md's "Rooms" names every package of the core and every module, and
    names nothing that is gone."""
    page = (REPO / "docs" / "architecture.md").read_text()
    rooms = page.split("## Rooms", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"^ {0,2}([a-z_0-9]+/)", rooms, re.MULTILINE))
    core = {f"{path.name}/" for path in (REPO / "anet_core").iterdir()
            if (path / "__init__.py").exists()}
    assert core - listed == set(), f"docs/architecture.md does not show {sorted(core - listed)}"
    shown_modules = set(re.findall(r"^plugins/([a-z0-9]+)/", rooms, re.MULTILINE))
    assert shown_modules == set(KNOWN_MODULES), "the map's modules differ from KNOWN_MODULES"
    module_rooms = {f"{path.name}/" for path in (REPO / "plugins").glob("*/anet_*/*")
                    if (path / "__init__.py").exists()}
    stale = listed - core - module_rooms - {"anet_core/", "plugins/", "tests/"}
    assert not stale, f"docs/architecture.md shows rooms that do not exist: {sorted(stale)}"
