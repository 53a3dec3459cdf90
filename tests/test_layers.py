"""The layout tells the truth: the import rules of the architecture, checked on the source.

records -> checks -> pipeline (and entailment's pure part) is the pure core: it imports no
adapter (Kafka, HTTP, the model judge, Spark, the command line, files and sources'
implementations), nothing of the outputs
(a summary's data belongs to the core, its rendering to outputs) and not the settings. The
settings import no adapter: they build the adapters' configurations (exporter.config), and
the adapters take those. No two modules import each other, directly or around a cycle
(imports under TYPE_CHECKING and inside functions count: a cycle is a cycle).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "exporter"
# the pure part of entailment belongs to the core (results, lexical, sampling, drawing, summary)
CORE = (
    "exporter.records",
    "exporter.checks",
    "exporter.pipeline",
    "exporter.entailment.results",
    "exporter.entailment.lexical",
    "exporter.entailment.sampling",
    "exporter.entailment.drawing",
    "exporter.entailment.summary",
)
ADAPTERS = (
    "exporter.kafka",
    "exporter.web",
    "exporter.spark",
    "exporter.cli",
    "exporter.demo",
    "exporter.files",
    "exporter.sources.jsonl",
    "exporter.postgres",
    "exporter.capture",
    "exporter.entailment.openai",
    "exporter.entailment.labels",
    "exporter.entailment.background",
    "exporter.entailment.thread",
    "exporter.entailment.judging",
)
OUTPUTS = ("exporter.outputs", "exporter.entailment.report")
SETTINGS = ("exporter.settings",)


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _imports(module: str) -> Iterator[tuple[str, int]]:
    """Every exporter module ``module`` imports (a name imported from a package counts as its
    submodule when it is one), with the line."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in MODULES:
                    yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            for alias in node.names:
                target = f"{base}.{alias.name}"
                if target in MODULES:
                    yield target, node.lineno
                elif base in MODULES:
                    yield base, node.lineno


def _within(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def _violations(sources: tuple[str, ...], forbidden: tuple[str, ...]) -> list[str]:
    return [
        f"{module} (line {line}) imports {target}"
        for module in MODULES
        if _within(module, sources)
        for target, line in _imports(module)
        if _within(target, forbidden)
    ]


def test_the_pure_core_imports_no_adapter_no_output_and_no_settings() -> None:
    assert _violations(CORE, ADAPTERS + OUTPUTS + SETTINGS) == []


def test_the_settings_import_no_adapter() -> None:
    assert _violations(SETTINGS, ADAPTERS) == []


def _cycles() -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan's algorithm)."""
    edges = {module: sorted({t for t, _ in _imports(module)} - {module}) for module in MODULES}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in edges[module]:
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for module in MODULES:
        if module not in index:
            visit(module)
    return groups


def test_no_import_cycle() -> None:
    assert _cycles() == []


@pytest.mark.parametrize(
    ("source", "forbidden", "imported"),
    [
        ("exporter.checks.engine", ADAPTERS, "exporter.kafka.runtime"),
        ("exporter.pipeline.core", OUTPUTS, "exporter.outputs.metrics"),
    ],
)
def test_a_violation_is_found_and_named(
    source: str, forbidden: tuple[str, ...], imported: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rules can fail: an import added to a core module is reported, by module and line."""
    original = _imports

    def with_one_more(module: str) -> Iterator[tuple[str, int]]:
        yield from original(module)
        if module == source:
            yield imported, 999

    monkeypatch.setitem(globals(), "_imports", with_one_more)
    assert _violations((source,), forbidden) == [f"{source} (line 999) imports {imported}"]


def test_a_cycle_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    original = _imports

    def with_a_loop(module: str) -> Iterator[tuple[str, int]]:
        yield from original(module)
        if module == "exporter.errors":
            yield "exporter.cli.common", 1

    monkeypatch.setitem(globals(), "_imports", with_a_loop)
    assert any("exporter.errors" in group for group in _cycles())


def test_every_dead_letter_of_a_check_that_raised_names_what_raised() -> None:
    """A ``check_failed`` dead letter made without ``exception=`` sends the DLQ's Connect
    header a bare "Exception" (found by a review in kafka/control.py): none may be made so."""
    missing = []
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "DeadLetter"):
                continue
            reasons = [arg.value for arg in node.args if isinstance(arg, ast.Constant)]
            named = {keyword.arg for keyword in node.keywords}
            if "check_failed" in reasons and "exception" not in named:
                missing.append(f"{module} line {node.lineno}")
    assert missing == []


def test_only_the_command_line_and_the_services_wiring_read_the_settings() -> None:
    """Adapters, engines and checks take their own configurations (exporter.config, Policy);
    the settings build them in the commands and in the service's composition root."""
    readers = sorted(
        module
        for module in MODULES
        if any(target == "exporter.settings" for target, _ in _imports(module))
    )
    allowed = [m for m in readers if m.startswith("exporter.cli.") or m == "exporter.kafka.runtime"]
    assert readers == allowed
