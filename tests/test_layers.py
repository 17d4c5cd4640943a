"""The package imports in one direction: no module of ``emst_dask`` imports,
directly or through others, a module that imports it back.

The graph is read from the source with ``ast`` (nothing is imported):

* a node is a module, that is one file: ``emst_dask/io/output.py`` is
  ``emst_dask.io.output``, a package's ``__init__.py`` is the package
  (``emst_dask.io``);
* every import statement is an edge, wherever it stands: at module level,
  inside a function or a class, under ``if TYPE_CHECKING:`` or in a
  ``try``; relative imports are resolved against the file's package;
* ``import a.b.c`` is an edge to ``a.b.c`` (the deepest of its names that
  is a file of the package);
* ``from P import x`` is an edge to ``P.x`` when that is a module (a
  submodule imported by name: in a package ``__init__``, ``from . import
  x`` is the package depending on its part ``x``), else to ``P``, the file
  that holds the name ``x`` (a package's ``__init__`` when ``P`` is a
  package: importing a name from a package's face depends on that face,
  and so on everything it imports);
* the parent packages that Python runs before a submodule are not edges:
  ``from .io.output import Output`` depends on ``io/output.py``, not on
  ``io/__init__.py`` (counting them would tie every part to its package's
  face, which re-exports the parts);
* imports by a computed name (``importlib.import_module``: the root
  package's lazy names) are not seen.

A cycle is reported as the chain of modules with the line of each import.
"""
from __future__ import annotations

import ast
import os
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "emst_dask"


def modules(root: str, package: str) -> dict:
    """{dotted module name: (path, is_package)} of every .py file of ``package``."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(os.path.join(root, package)):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith((".", "__pycache__")))
        for fn in sorted(filenames):
            if not fn.endswith(".py"):
                continue
            path = os.path.join(dirpath, fn)
            parts = os.path.relpath(path, root)[:-3].split(os.sep)
            is_pkg = parts[-1] == "__init__"
            found[".".join(parts[:-1] if is_pkg else parts)] = (path, is_pkg)
    return found


def _owner(name: str, mods: dict) -> str | None:
    """The deepest prefix of the dotted ``name`` that is a module, or None."""
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(root: str = ROOT, package: str = PACKAGE) -> dict:
    """{module: {imported module: first line}} by the rules of the module
    docstring (imports of other packages left out)."""
    mods = modules(root, package)
    graph = {}
    for name, (path, is_pkg) in mods.items():
        with open(path, encoding="utf-8") as fh:
            tree = ast.parse(fh.read(), filename=path)
        here = name if is_pkg else name.rpartition(".")[0]  # the package of the file
        out = graph.setdefault(name, {})

        def add(target, line):
            if target is not None and target != name:
                out.setdefault(target, line)

        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name == package or alias.name.startswith(package + "."):
                        add(_owner(alias.name, mods), node.lineno)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here.split(".")
                    base = base[:len(base) - (node.level - 1)]
                    assert base, f"{path}:{node.lineno}: relative import beyond the package"
                    src = ".".join(base + ([node.module] if node.module else []))
                else:
                    src = node.module or ""
                if not (src == package or src.startswith(package + ".")):
                    continue
                for alias in node.names:
                    sub = f"{src}.{alias.name}"
                    add(sub if sub in mods else _owner(src, mods), node.lineno)
    return graph


def cycles(graph: dict) -> list:
    """One cycle per strongly connected component of more than one module:
    (cycle, component), the cycle a list of (module, line of its import of
    the next) closing on the first, the component every module of the knot
    (sorted)."""
    index, low, stack, on_stack, comps = {}, {}, [], set(), []

    def visit(v):  # Tarjan, iterative (the graph is deep enough for recursion)
        work = [(v, iter(sorted(graph.get(v, ()))))]
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        while work:
            u, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    break
                if w in on_stack:
                    low[u] = min(low[u], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[u])
                if low[u] == index[u]:
                    comp = set()
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.add(w)
                        if w == u:
                            break
                    if len(comp) > 1:
                        comps.append(comp)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    found = []
    for comp in comps:  # the shortest way back to the smallest module, breadth first
        start = min(comp)
        prev = {start: None}
        queue = [start]
        while queue:
            u = queue.pop(0)
            for w in sorted(graph[u]):
                if w in comp and w not in prev:
                    prev[w] = u
                    queue.append(w)
        last = min((u for u in comp if start in graph[u]), key=lambda u: (len(_chain(prev, u)), u))
        chain = _chain(prev, last)
        found.append(([(u, graph[u][(chain + [start])[i + 1]]) for i, u in enumerate(chain)],
                      sorted(comp)))
    return sorted(found)


def _chain(prev, u):
    out = []
    while u is not None:
        out.append(u)
        u = prev[u]
    return out[::-1]


def describe(cycle, component=()) -> str:
    """``a (line 3) -> b (line 9) -> a``, and the other modules of the knot."""
    text = " -> ".join(f"{m} (line {line})" for m, line in cycle) + f" -> {cycle[0][0]}"
    others = [m for m in component if m not in {m for m, _ in cycle}]
    return text + (f"  [with {', '.join(others)}]" if others else "")


def test_no_import_cycles():
    found = cycles(import_graph())
    assert not found, f"{len(found)} import cycle(s) among the modules of {PACKAGE}:\n" \
        + "\n".join(describe(*c) for c in found)


def test_the_graph_sees_every_kind_of_import():
    """The edges the rules promise, on modules of the package (a graph that
    missed them would find no cycle)."""
    g = import_graph()
    assert len(g) > 100
    assert "emst_dask.io.source" in g["emst_dask.io.zarr_source"]  # from .source import
    assert "emst_dask.io.leftovers" in g["emst_dask.io.output"]  # inside a method
    assert "emst_dask.io.zarr_source" in g["emst_dask.io.resolve"]  # from . import zarr_source
    assert "emst_dask.distributed.fof" in g["emst_dask.fof_api"]  # from .distributed.fof
    assert "emst_dask.io" in g["emst_dask.distributed.job"]  # a name of a package's face
    assert "emst_dask.io.edge_store" in g["emst_dask.io"]  # the face on its parts
    assert "emst_dask.io" not in g["emst_dask.io.output"]  # parents are not edges


def test_cycles_found_and_named(tmp_path):
    """A made-up package with one cycle through a function-level relative
    import and one through a package ``__init__``: both reported, with lines."""
    files = {
        "pkg/__init__.py": "",
        "pkg/a.py": "import os\nfrom .b import f\n",
        "pkg/b.py": "def f():\n    from . import a\n    return a\n",
        "pkg/sub/__init__.py": "from . import c\nVALUE = 1\n",
        "pkg/sub/c.py": "from .. import a\n\ndef g():\n    from pkg.sub import VALUE\n",
        "pkg/sub/d.py": "import pkg.sub.c\nfrom ..b import f\n",
    }
    for rel, text in files.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))
    g = import_graph(str(tmp_path), "pkg")
    assert g["pkg.sub.d"] == {"pkg.sub.c": 1, "pkg.b": 2}
    found = cycles(g)
    assert [describe(*c) for c in found] == [
        "pkg.a (line 2) -> pkg.b (line 2) -> pkg.a",
        "pkg.sub (line 1) -> pkg.sub.c (line 4) -> pkg.sub",
    ]
