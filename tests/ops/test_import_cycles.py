"""No import cycle among app's modules, counting imports inside functions too: a lazy import
hides a cycle from Python's start-up, not from the reader, and the layers contract of
pyproject.toml (import-linter) sees only imports between rooms, not those within one."""

from __future__ import annotations

import grimp


def import_cycles(package: str) -> list[list[str]]:
    """Each group of `package`'s modules that import one another in a circle (Tarjan's
    strongly connected components of more than one module), sorted."""
    graph = grimp.build_graph(package)
    modules = sorted(graph.modules)
    imports = {
        module: sorted(graph.find_modules_directly_imported_by(module)) for module in modules
    }
    index: dict[str, int] = {}
    lowest: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = lowest[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in imports.get(module, []):
            if imported not in index:
                visit(imported)
                lowest[module] = min(lowest[module], lowest[imported])
            elif imported in on_stack:
                lowest[module] = min(lowest[module], index[imported])
        if lowest[module] == index[module]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                cycles.append(sorted(group))

    for module in modules:
        if module not in index:
            visit(module)
    return sorted(cycles)


def test_no_module_of_app_imports_itself_round_a_circle() -> None:
    assert import_cycles("app") == []
