"""The rules of a part, decided by reading the learner's code, never by running it.

The referee calls `StudentCode(cells)` once per notebook with the code cells the learner wrote
(answer cells and any cell they added), then:

- `machinery()` lists the places that reach for the grading machinery or the interpreter's
  insides: frames, `gc`, `inspect`, `ctypes`, `sys.modules`, `builtins`, trace / profile /
  audit hooks, torch function and dispatch modes, IPython's hooks and transformers, the
  grading package, assignments into imported modules (`torch.allclose = ...`). Any of them
  gives the submission the status `tampered`.
- `dynamic()` lists the dynamic accesses that could hide a call from this analysis: `getattr`
  / `setattr` with a computed name, `eval` / `exec` / `compile`, `importlib`, `__import__`,
  `globals()` / `vars()` / `locals()`. Anywhere in the notebook they give the status
  `needs_review`.
- `violations(fn, forbidden, args, kwargs)`, before each call of the learner's function `fn`:
  the code reachable from `fn` (its definition, the notebook functions and globals it names,
  transitively) may not name a forbidden reference (through any import alias, `from ... import
  ... as`, a constant-string `getattr`), call a module argument whose `forward` is forbidden
  (`module(x)`, `module.attention(x)`, `.forward(...)`), or contain one of the accesses above.
  A violation fails that call, so the part scores nothing.

The analysis is deliberately conservative where code is dynamic, and exact where it is not.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import importlib
import sys
from collections.abc import Iterable
from typing import Any

from torch import nn

MACHINERY_MODULES = {
    "gc": "the garbage collector (gc)",
    "inspect": "the inspect module",
    "ctypes": "ctypes",
    "builtins": "the builtins module",
    "importlib": None,  # dynamic, not machinery
    "marshal": "marshal",
    "pickle": "pickle",
    "dill": "dill",
    "types": None,
    "bertcourse.grading": "the grading package",
    "bertcourse.grade": "the grader",
    "torch.overrides": "torch function overrides",
    "torch.utils._python_dispatch": "torch dispatch modes",
    "IPython.core": "IPython's internals",
    "ipykernel": "the kernel's internals",
    "jupyter_client": "the kernel's messaging",
    "zmq": "the kernel's sockets",
}
MACHINERY_ATTRS = {
    "_getframe": "frame access (sys._getframe)",
    "f_back": "frame access",
    "f_globals": "frame access",
    "f_locals": "frame access",
    "f_builtins": "frame access",
    "tb_frame": "frame access",
    "gi_frame": "frame access",
    "cr_frame": "frame access",
    "settrace": "a trace hook",
    "setprofile": "a profile hook",
    "addaudithook": "an audit hook",
    "excepthook": "the exception hook",
    "modules": None,  # only as sys.modules (checked on the chain)
    "__code__": "a function's code object",
    "__globals__": "a function's globals",
    "__closure__": "a function's closure",
    "__builtins__": "the builtins",
    "__subclasses__": "the class hierarchy (__subclasses__)",
    "__torch_function__": "a torch function override",
    "__torch_dispatch__": "a torch dispatch override",
    "TorchFunctionMode": "a torch function mode",
    "TorchDispatchMode": "a torch dispatch mode",
    "input_transformers_post": "IPython input transformers",
    "input_transformers_cleanup": "IPython input transformers",
    "ast_transformers": "IPython AST transformers",
    "set_custom_exc": "IPython's exception handler",
    "events": None,  # only on get_ipython() (checked on the chain)
    "display_formatter": "IPython's display formatters",
    "user_ns": "the notebook namespace",
    "user_global_ns": "the notebook namespace",
}
MACHINERY_NAMES = {
    "get_ipython": "IPython's shell (get_ipython)",
    "__builtins__": "the builtins",
    "__import__": None,  # dynamic
}
DYNAMIC_CALLS = {"eval", "exec", "compile", "__import__", "globals", "vars", "locals", "breakpoint"}
ATTR_FUNCS = {"getattr", "setattr", "delattr", "hasattr"}


@dataclasses.dataclass(frozen=True)
class Finding:
    """One place in the learner's code: which cell, which line, what."""

    cell: int  # index of the cell in the submitted notebook
    line: int
    what: str

    def describe(self) -> str:
        return f"cell {self.cell + 1}, line {self.line}: {self.what}"


@dataclasses.dataclass
class _Unit:
    """A top-level definition or statement of the learner's code."""

    cell: int
    node: ast.AST


def _chain(node: ast.AST) -> list[str] | None:
    """["F", "scaled_dot_product_attention"] for `F.scaled_dot_product_attention`, also through
    `getattr(F, "name")` with a constant name; None for anything else."""
    parts: list[str] = []
    while True:
        if isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "getattr"
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):
            parts.append(node.args[1].value)
            node = node.args[0]
        elif isinstance(node, ast.Name):
            parts.append(node.id)
            return list(reversed(parts))
        else:
            return None


class StudentCode:
    """The learner's code cells, parsed once (cells that do not parse are skipped: they raise
    in the kernel and define nothing)."""

    def __init__(self, cells: Iterable[tuple[int, str]], context: Iterable[str] = ()) -> None:
        """`cells`: (index, source) of the learner's cells; `context`: the instructor's set-up
        cells, whose imports (`import torch.nn.functional as F`) are names the learner uses."""
        self.units: list[_Unit] = []
        self._verdicts: dict[tuple, list[Finding]] = {}  # violations() per call shape
        self.aliases: dict[str, str] = {}  # local name -> dotted module path or object path
        self.defs: dict[str, list[_Unit]] = {}  # global name -> definitions / assignments
        for source in context:
            try:
                tree = ast.parse(_strip_magics(source))
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                continue
            for node in ast.walk(tree):
                self._record_import(node)
        for index, source in cells:
            try:
                tree = ast.parse(_strip_magics(source))
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                continue
            for node in tree.body:
                unit = _Unit(index, node)
                self.units.append(unit)
                for name in _bound_names(node):
                    self.defs.setdefault(name, []).append(unit)
            for node in ast.walk(tree):
                self._record_import(node)

    def _record_import(self, node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    self.aliases[alias.asname] = alias.name
                else:
                    top = alias.name.split(".")[0]
                    self.aliases[top] = top
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                self.aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"

    def _dotted(self, chain: list[str]) -> str:
        head = self.aliases.get(chain[0], chain[0])
        return ".".join([head, *chain[1:]])

    # --- whole-notebook scans ---------------------------------------------------------------

    def _scan(self, units: Iterable[_Unit], machinery: bool) -> list[Finding]:
        found: list[Finding] = []
        for unit in units:
            for node in ast.walk(unit.node):
                what = self._machinery(node) if machinery else self._dynamic(node)
                if what:
                    found.append(Finding(unit.cell, getattr(node, "lineno", 0), what))
        return sorted(set(found), key=lambda f: (f.cell, f.line, f.what))

    def machinery(self) -> list[Finding]:
        """Places that reach for the grading machinery (status `tampered`)."""
        return self._scan(self.units, machinery=True)

    def dynamic(self) -> list[Finding]:
        """Dynamic accesses that could hide a call (status `needs_review`)."""
        return self._scan(self.units, machinery=False)

    def _machinery(self, node: ast.AST) -> str | None:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
            )
            for name in names:
                for module, what in MACHINERY_MODULES.items():
                    if what and (name == module or name.startswith(module + ".")):
                        return f"imports {what}"
        if isinstance(node, ast.Name) and MACHINERY_NAMES.get(node.id):
            return f"uses {MACHINERY_NAMES[node.id]}"
        if isinstance(node, ast.Attribute):
            what = MACHINERY_ATTRS.get(node.attr)
            if what:
                return f"uses {what}"
            chain = _chain(node)
            if chain:
                dotted = self._dotted(chain)
                if dotted.startswith("sys.modules"):
                    return "uses sys.modules"
                if node.attr == "events" and chain[0] == "get_ipython":
                    return "uses IPython's event hooks"
        if isinstance(node, ast.FunctionDef) and node.name in (
            "__torch_function__",
            "__torch_dispatch__",
        ):
            return f"defines {node.name}"
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for target in targets:
                chain = _chain(target) if isinstance(target, ast.Attribute) else None
                if chain and chain[0] in self.aliases and len(chain) >= 2:
                    return f"changes {self._dotted(chain)} (an attribute of an imported module)"
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("setattr", "delattr")
            and node.args
        ):
            chain = _chain(node.args[0])
            if chain and chain[0] in self.aliases:
                return f"changes an attribute of {self._dotted(chain)} (an imported module)"
        return None

    def _dynamic(self, node: ast.AST) -> str | None:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            name = node.func.id
            if name in DYNAMIC_CALLS:
                return f"calls {name}()"
            if name in ATTR_FUNCS and not (
                len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
            ):
                return f"calls {name}() with a computed attribute name"
        if isinstance(node, ast.Attribute) and node.attr in (
            "import_module",
            "__import__",
            "__dict__",
        ):
            return f"uses .{node.attr}"
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
            )
            if any(n == "importlib" or n.startswith("importlib.") for n in names):
                return "imports importlib"
            if any(n in ("operator", "functools") for n in names) and isinstance(
                node, ast.ImportFrom
            ):
                if any(a.name in ("attrgetter", "methodcaller") for a in node.names):
                    return "imports operator.attrgetter/methodcaller"
        if isinstance(node, ast.Attribute) and node.attr in ("attrgetter", "methodcaller"):
            return f"uses operator.{node.attr}"
        return None

    # --- one call ---------------------------------------------------------------------------

    def reachable(self, name: str, replaced: set[str] = frozenset()) -> list[_Unit]:
        """The definitions of `name` and of every notebook global they name, transitively
        (names in `replaced` are swapped for references during the call: not followed)."""
        seen: set[str] = set(replaced) - {name}
        todo = [name]
        units: list[_Unit] = []
        while todo:
            current = todo.pop()
            if current in seen:
                continue
            seen.add(current)
            for unit in self.defs.get(current, []):
                if unit not in units:
                    units.append(unit)
                for node in ast.walk(unit.node):
                    if isinstance(node, ast.Name) and node.id in self.defs and node.id not in seen:
                        todo.append(node.id)
        return units

    def violations(
        self,
        name: str,
        forbidden: list[str],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        replaced: set[str] = frozenset(),
    ) -> list[Finding]:
        """Why the call `name(*args, **kwargs)` may not be graded (empty: it may).

        The answer depends on the arguments only through the modules among them, so it is
        computed once per function, rule and module types (a test may call a function 1,500
        times)."""
        modules = tuple(
            (i, type(v))
            for i, v in enumerate([*args, *kwargs.values()])
            if isinstance(v, nn.Module)
        )
        key = (name, tuple(forbidden), frozenset(replaced), modules, tuple(kwargs))
        if key not in self._verdicts:
            self._verdicts[key] = self._violations(name, forbidden, args, kwargs, replaced)
        return list(self._verdicts[key])

    def _violations(
        self,
        name: str,
        forbidden: list[str],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        replaced: set[str],
    ) -> list[Finding]:
        units = self.reachable(name, replaced)
        found = self._scan(units, machinery=True) + self._scan(units, machinery=False)
        if not forbidden:
            return found
        exact, methods, classes = _forbidden_sets(tuple(forbidden))
        module_params = _module_parameters(units, name, args, kwargs)
        for unit in units:
            for node in ast.walk(unit.node):
                what = self._forbidden_use(node, exact, methods, classes, module_params)
                if what:
                    found.append(Finding(unit.cell, getattr(node, "lineno", 0), what))
        return sorted(set(found), key=lambda f: (f.cell, f.line, f.what))

    def _forbidden_use(
        self,
        node: ast.AST,
        exact: set[str],
        methods: set[str],
        classes: dict[str, set[type]],
        module_params: dict[str, Any],
    ) -> str | None:
        if isinstance(node, ast.Attribute) and node.attr in methods:
            return f"uses .{node.attr}, which this part asks you to write yourself"
        if isinstance(node, (ast.Name, ast.Attribute)) or (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "getattr"
        ):
            chain = _chain(node)
            if chain:
                dotted = self._dotted(chain)
                for path in exact | set(classes):
                    if dotted == path or dotted.startswith(path + "."):
                        return f"uses {path}, which this part asks you to write yourself"
        if isinstance(node, ast.Call):
            chain = _chain(node.func)
            if chain and chain[0] in module_params:
                target = _follow(module_params[chain[0]], chain[1:])
                if target is not None:
                    for owners in classes.values():
                        if isinstance(target, tuple(owners)):
                            return (
                                f"calls {'.'.join(chain)}(...), a {type(target).__name__} whose "
                                f"forward this part asks you to write yourself"
                            )
        if isinstance(node, (ast.ImportFrom, ast.Import)):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [f"{node.module}.{a.name}" for a in node.names]
            )
            for imported in names:
                for path in exact | set(classes):
                    if imported == path:
                        return f"imports {path}, which this part asks you to write yourself"
        return None


def _strip_magics(source: str) -> str:
    """IPython magics and shell escapes are not Python: blank them for the parser."""
    return "\n".join(
        "" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines()
    )


def _bound_names(node: ast.AST) -> list[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    names = []
    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            for sub in ast.walk(target):
                if isinstance(sub, ast.Name):
                    names.append(sub.id)
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        names += [(a.asname or a.name).split(".")[0] for a in node.names]
    return names


def _resolve(dotted: str) -> Any:
    parts = dotted.split(".")
    for i in range(len(parts) - 1, 0, -1):
        name = ".".join(parts[:i])
        module = sys.modules.get(name)
        if module is None:
            try:
                module = importlib.import_module(name)
            except Exception:
                continue
        obj: Any = module
        try:
            for attr in parts[i:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return None
        return obj
    return None


@functools.lru_cache(maxsize=256)
def _forbidden_sets(forbidden: tuple[str, ...]) -> tuple[set[str], set[str], dict[str, set[type]]]:
    """(module-level paths, method names of torch.Tensor, class path -> classes whose method
    is forbidden)."""
    exact: set[str] = set()
    methods: set[str] = set()
    classes: dict[str, set[type]] = {}
    for path in forbidden:
        owner_path, _, attr = path.rpartition(".")
        owner = _resolve(owner_path)
        if isinstance(owner, type):
            if owner_path == "torch.Tensor":
                methods.add(attr)
                exact.add(path)
            else:
                classes.setdefault(owner_path, set()).add(owner)
                # subclasses share the method (Adam.step covers AdamW): name them too
                for sub in _subclasses(owner):
                    if attr not in vars(sub):
                        classes.setdefault(f"{sub.__module__}.{sub.__qualname__}", set()).add(sub)
        else:
            exact.add(path)
    return exact, methods, classes


def _subclasses(cls: type) -> list[type]:
    out, todo = [], list(cls.__subclasses__())
    while todo:
        sub = todo.pop()
        out.append(sub)
        todo.extend(sub.__subclasses__())
    return out


def _module_parameters(
    units: list[_Unit], name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> dict[str, Any]:
    """Parameter name -> the nn.Module argument the referee is about to send for it."""
    out: dict[str, Any] = {}
    for unit in units:
        node = unit.node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            params = [a.arg for a in node.args.posonlyargs + node.args.args]
            for param, value in zip(params, args):
                if isinstance(value, nn.Module):
                    out[param] = value
            for key, value in kwargs.items():
                if isinstance(value, nn.Module):
                    out[key] = value
            for sub in ast.walk(node):  # local aliases: attention = module.attention
                if isinstance(sub, ast.Assign) and len(sub.targets) == 1:
                    target = sub.targets[0]
                    chain = _chain(sub.value)
                    if isinstance(target, ast.Name) and chain and chain[0] in out:
                        followed = _follow(out[chain[0]], chain[1:])
                        if followed is not None:
                            out[target.id] = followed
    return out


def _follow(obj: Any, attrs: list[str]) -> Any:
    """getattr along `attrs` on the referee's own module (trusted); `.forward` and `.__call__`
    stand for the module itself."""
    for attr in attrs:
        if attr in ("forward", "__call__"):
            continue
        if not isinstance(obj, nn.Module):
            return None
        obj = getattr(obj, attr, None)
    return obj if isinstance(obj, nn.Module) else None
