"""The package boundaries hold: no import cycle at run time, and no plugin reads another's untyped side channels."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

from ..helpers import REPO

PACKAGES = sorted(p for p in [*REPO.glob("src/*"), *REPO.glob("*/src/*"), *REPO.glob("*/*/src/*")]
                  if p.is_dir() and p.name.startswith("maxkernel") and (p / "__init__.py").exists())
#: Where a backend's ``Evaluation.details`` / ``Profile.details`` are written, and may be read back (display).
DETAILS_OWNERS = {"maxkernel_tpu_pallas", "maxkernel_gpu_pallas", "maxkernel_pallas_judge"}
#: Where a ``Task.metadata`` is written (the Pallas task formats) and may be read: the Pallas backends alone.
METADATA_OWNERS = DETAILS_OWNERS


def python_files(package: Path) -> list[Path]:
    return sorted(package.rglob("*.py"))


def module_name(package: Path, path: Path) -> str:
    parts = [package.name, *path.relative_to(package).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def runtime_imports(package: Path, path: Path, modules: set[str], typing_too: bool = False) -> set[str]:
    """Modules this file imports when it runs (the top level and function bodies, not ``if TYPE_CHECKING``
    unless ``typing_too``): ``from pkg import mod`` depends on ``pkg.mod`` when that is a module, else on ``pkg``."""
    name = module_name(package, path)
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text())
    skipped = set() if typing_too else {
        id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for n in ast.walk(node)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.add(sub if sub in modules else target)
    return found & modules


def import_graph(typing_too: bool = False) -> dict[str, set[str]]:
    modules = {module_name(pkg, path): (pkg, path) for pkg in PACKAGES for path in python_files(pkg)}
    names = set(modules)
    return {name: runtime_imports(*where, names, typing_too) - {name} for name, where in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10000))

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_the_walk_sees_every_package():
    names = {p.name for p in PACKAGES}
    assert {"maxkernel_core", "maxkernel_agents", "maxkernel_tpu_pallas", "maxkernel_tpu_offline", "maxkernel_synthesis",
            "maxkernel_strategies", "maxkernel_llm_providers", "maxkernel_ray"} <= names, names


def test_no_runtime_import_cycle():
    graph = import_graph()
    assert sum(len(v) for v in graph.values()) > 100  # the walk resolves real edges
    found = cycles(graph)
    assert not found, "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


def test_no_import_cycle_even_for_type_names():
    """Imports under ``if TYPE_CHECKING`` count too: a module that names another's type depends on it."""
    graph = import_graph(typing_too=True)
    assert sum(len(v) for v in graph.values()) > sum(len(v) for v in import_graph().values())
    found = cycles(graph)
    assert not found, "import cycles (type-only imports counted): " + "; ".join(" <-> ".join(c) for c in found)


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c"]]


def test_no_plugin_reads_another_plugins_details_or_context_extras():
    reads = re.compile(r"\bdetails\s*(\[\s*['\"]|\.get\()|details\s+or\s+\{\}\)\s*(\[|\.get\()")
    offenders = []
    for package in PACKAGES:
        for path in python_files(package):
            text = path.read_text()
            if re.search(r"\bctx\.extras\b|\.extras\s*\[", text):
                offenders.append(f"{path.relative_to(REPO)}: ctx.extras")
            if package.name not in DETAILS_OWNERS:
                for number, line in enumerate(text.splitlines(), 1):
                    if reads.search(line) and not re.search(r"details\s*\[[^]]+\]\s*=[^=]", line):
                        offenders.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


def metadata_reads(source: str) -> list[int]:
    """Lines reading a string key of some ``X.metadata`` (``X.metadata["k"]``, ``X.metadata.get("k")``), an
    attrs field's own metadata (``f.metadata``, ``field.metadata``) aside."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        target = node.value if isinstance(node, ast.Subscript) else (
            node.func.value if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get" else None)
        if (isinstance(target, ast.Attribute) and target.attr == "metadata"
                and not (isinstance(target.value, ast.Name) and target.value.id in ("f", "field", "a", "attribute"))):
            lines.append(node.lineno)
    return lines


def test_no_package_reads_another_packages_task_metadata():
    """A task's ``metadata`` is its backend's description of its files: another package reads typed fields
    (``Task.notes``) or the backend's public API (``reference_entry``), never its string keys."""
    offenders = []
    for package in PACKAGES:
        if package.name in METADATA_OWNERS:
            continue
        for path in python_files(package):
            text = path.read_text()
            offenders += [f"{path.relative_to(REPO)}:{n}: {text.splitlines()[n - 1].strip()}" for n in metadata_reads(text)]
    assert not offenders, "\n".join(offenders)


def test_the_metadata_check_would_catch_a_read():
    assert metadata_reads('fn = getattr(module, task.metadata["entry"])') == [1]
    assert metadata_reads("notes = str(task.metadata.get('shortcut') or '')") == [1]
    assert metadata_reads('low = f.metadata.get("min")\n"""a ``task.metadata["k"]`` in prose"""') == []


def test_the_side_channel_check_would_catch_a_read(tmp_path):
    reads = re.compile(r"\bdetails\s*(\[\s*['\"]|\.get\()|details\s+or\s+\{\}\)\s*(\[|\.get\()")
    assert reads.search('over = (evaluation.details.get("compile") or {}).get("error")')
    assert reads.search('"sandbox": (e.details or {}).get("sandbox")')
    assert not reads.search('seconds = e.profile.seconds')


def test_the_core_names_no_plugin():
    """The core's code never special-cases a plugin by name (what is known of them is data: plugin_directory.toml)."""
    core = REPO / "src" / "maxkernel_core"
    names = ("synthesizer", "offline", "ray", "tpu_pallas", "gemini", "litellm")
    offenders = []
    for path in python_files(core):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#")[0]
            if re.search(r"==\s*['\"](%s)['\"]" % "|".join(names), code):
                offenders.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


def test_the_core_needs_neither_matplotlib_nor_pyyaml():
    """The core installs without what only the bench's figures (matplotlib, the ``bench`` extra) and the task
    formats (pyyaml, the judge's and JaxBench's own dependency) use, and importing it and its CLI loads neither."""
    import tomllib

    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    names = [re.split(r"[<>=\[ ;]", dep)[0].lower() for dep in declared["dependencies"]]
    assert "matplotlib" not in names and "pyyaml" not in names, names
    assert any(dep.startswith("matplotlib") for dep in declared["optional-dependencies"]["bench"])
    code = ("import sys, maxkernel_core, maxkernel_core.cli, maxkernel_core.bench; "
            "print([m for m in ('matplotlib', 'yaml') if m in sys.modules])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr
