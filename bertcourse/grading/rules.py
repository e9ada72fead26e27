"""The rules of a part, decided by reading the learner's code, never by running it.

The referee calls `StudentCode(cells, context)` once per notebook with the code cells the
learner wrote (answer cells and any cell they added) and the instructor's set-up cells. Each
cell is read as the kernel runs it: after IPython's input transformation (`%` magics and `!`
lines become Python); a cell that still does not parse is reported, never skipped. Then:

- `machinery()` lists the places that reach for the grading machinery or the interpreter's
  insides: frames, `gc`, `inspect`, `ctypes`, `sys.modules`, `builtins`, trace / profile /
  audit hooks, torch function and dispatch modes, IPython's hooks and transformers, the
  grading package, assignments into imported modules (`torch.allclose = ...`). Any of them
  gives the submission the status `tampered`.
- `dynamic()` lists every dynamic place of every cell (module level, class and function
  bodies, and the bodies of magics such as `%%capture`, parsed as code), as
  `bertcourse.grading.dynamic` defines it once: each name and attribute chain is resolved to
  the objects it denotes and judged at every step (strings run as code, evaluators, writes
  into library objects, the import machinery, threads and processes, sockets, native code,
  the dispatcher's escape hatches, dunders, private names, re-exported modules, modules used
  as values); what cannot be resolved counts too, and so does a cell that does not parse:
  status `needs_review`, whose points are withheld until an instructor approves them.
- `violations(fn, forbidden, args, kwargs)`, before each call of the learner's function `fn`.
  Everything that can give the code of `fn` a value is read (`reachable`): its definition and,
  transitively, those of every global it names under Python's scoping, whatever the binding
  form (def, class, import, assignment, `for` / `with` targets, walrus, `global` in a helper,
  `except ... as`, `match`), every statement that changes a value it reads (`fns.append(...)`
  in another cell, `register(fns)`, `C.attr = ...`). In that code, for a part that forbids
  (`forbidden` not empty), every name is resolved to the object it denotes (import aliases,
  star imports, constant-string `getattr`, re-exports: objects are compared by identity) and
  judged against the part's allow-list (`grading.allow`): a forbidden object fails the call;
  an object outside the list, or a name that cannot be resolved, fails it too and is kept in
  `self.review` (status `needs_review`), with its cell and line. Calls of a module argument
  whose `forward` is forbidden (`module(x)`, `module.attention(x)`) fail the call, as do the
  accesses of the two scans above.

The analysis is deliberately conservative where code is dynamic, and exact where it is not.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import functools
import importlib
import sys
import types
from collections.abc import Iterable, Iterator
from typing import Any

import torch
from torch import nn

from bertcourse.grading import allow, dynamic
from bertcourse.grading.forbid import FORBIDDEN

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
    "torch.autograd.graph": "autograd's graph hooks",  # saved_tensors_hooks hides saved tensors from the probe
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
    "saved_tensors_hooks": "autograd's saved-tensor hooks",  # would hide a recorded graph (probe)
    "disable_saved_tensors_hooks": "autograd's saved-tensor hooks",
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


@dataclasses.dataclass(frozen=True)
class Finding:
    """One place in the learner's code: which cell, which line, what."""

    cell: int  # index of the cell in the submitted notebook
    line: int
    what: str
    review: bool = False  # outside the allow-list or unresolvable: a person looks

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


MAGIC_METHODS = {"run_line_magic", "run_cell_magic", "system", "getoutput"}
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)


@dataclasses.dataclass
class _Binding:
    """How a global name gets its value: `import` (target: a dotted path), `alias` (node: the
    chain on the right of `name = chain`), `code` (a def or class of the learner), `value`
    (any other binding: the unit is read), `unknown` (a relative import)."""

    kind: str
    unit: _Unit | None = None
    target: str = ""
    node: ast.AST | None = None


@dataclasses.dataclass(frozen=True)
class _Rule:
    """One part's rule, resolved to objects: what is forbidden, what is allowed."""

    forbidden: frozenset[int]  # ids of forbidden objects (functions, methods, classes)
    forbidden_paths: dict[int, str]
    methods: frozenset[str]  # forbidden tensor method names
    classes: dict[str, set[type]]  # for module arguments whose forward is forbidden
    allowed: frozenset[int]
    tensor_attrs: frozenset[str]


class StudentCode:
    """The learner's code cells as the kernel runs them (after IPython's input transformation).

    A cell that does not parse even then is reported (`dynamic()`: `needs_review`), never
    skipped silently."""

    def __init__(self, cells: Iterable[tuple[int, str]], context: Iterable[str] = ()) -> None:
        """`cells`: (index, source) of the learner's cells; `context`: the instructor's set-up
        cells, whose imports (`import torch.nn.functional as F`) are names the learner uses
        and, for a part that forbids, building blocks its statement hands the learner."""
        self.units: list[_Unit] = []
        self.unparsed: list[Finding] = []
        self.review: set[Finding] = set()  # outside the allow-list, found by violations()
        self._verdicts: dict[tuple, list[Finding]] = {}
        self.aliases: dict[str, str] = {}  # every import anywhere (for the machinery scan)
        self.globals: dict[str, list[_Binding]] = {}
        self.mentions: dict[str, list[_Unit]] = {}  # units that name a global
        self.stored_into: dict[str, list[_Unit]] = {}  # units that set `name.x` / `name[k]`
        self.stars: list[str] = []  # modules of `from m import *`
        self.context: dict[str, _Binding] = {}
        self.context_stars: list[str] = []
        self._magic: set[int] = set()  # ids of `get_ipython` nodes IPython's transformer wrote
        self._globals_cache: dict[int, set[str]] = {}
        for source in context:
            tree, _ = _parse(source)
            if tree is None:
                continue
            self._mark_magics(tree)
            for node in ast.walk(tree):
                self._record_import(node)
            for node in tree.body:
                for name, binding in _module_bindings(node, None):
                    if binding.kind == "star":
                        self.context_stars.append(binding.target)
                    else:
                        self.context[name] = binding
        self._dynamic_cache: dict[int, list[Finding]] = {}
        for index, source in cells:
            tree, error = _parse(source)
            if tree is None:
                self.unparsed.append(
                    Finding(index, error, "the cell does not parse: the rules cannot read it")
                )
                continue
            trees = [tree, *_magic_bodies(tree)]
            for part in trees:
                self._mark_magics(part)
                for node in ast.walk(part):
                    self._record_import(node)
            for node in [n for part in trees for n in part.body]:
                unit = _Unit(index, node)
                self.units.append(unit)
                for name, binding in _module_bindings(node, unit):
                    if binding.kind == "star":
                        self.stars.append(binding.target)
                    else:
                        self.globals.setdefault(name, []).append(binding)
                for name in self._globals_of(unit):
                    self.mentions.setdefault(name, []).append(unit)
                for name in _stored_into(unit.node):
                    self.stored_into.setdefault(name, []).append(unit)

    def _mark_magics(self, tree: ast.AST) -> None:
        for node in ast.walk(tree):
            if _is_magic_call(node):
                self._magic.add(id(node.func.value.func))

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
            if not machinery:
                found += self._dynamic_in(unit)
                continue
            for node in ast.walk(unit.node):
                what = self._machinery(node)
                if what:
                    found.append(Finding(unit.cell, getattr(node, "lineno", 0), what))
        return sorted(set(found), key=lambda f: (f.cell, f.line, f.what))

    def machinery(self) -> list[Finding]:
        """Places that reach for the grading machinery (status `tampered`)."""
        return self._scan(self.units, machinery=True)

    def dynamic(self) -> list[Finding]:
        """Every dynamic place of every cell (`grading.dynamic` says what that is), and the
        cells that do not parse (status `needs_review`)."""
        return sorted(
            set(self._scan(self.units, machinery=False) + self.unparsed),
            key=lambda f: (f.cell, f.line, f.what),
        )

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
        if (
            isinstance(node, ast.Name)
            and MACHINERY_NAMES.get(node.id)
            and id(node) not in self._magic
        ):
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

    def _dynamic_in(self, unit: _Unit) -> list[Finding]:
        """The dynamic places of one unit (module level, class and function bodies)."""
        key = id(unit.node)
        if key not in self._dynamic_cache:
            parents = {id(c): p for p in ast.walk(unit.node) for c in ast.iter_child_nodes(p)}
            found = []
            for node, scopes in _scoped(unit.node):
                for what in self._dynamic_at(node, scopes, parents, unit):
                    found.append(Finding(unit.cell, getattr(node, "lineno", 0), what))
            self._dynamic_cache[key] = found
        return self._dynamic_cache[key]

    def _dynamic_at(self, node: ast.AST, scopes: tuple, parents: dict, unit: _Unit) -> list[str]:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            return self._dynamic_import(node)
        if _is_magic_call(node):
            why = dynamic.magic_reason(node.func.attr, _constants(node))
            return [why] if why else []
        found = []
        if isinstance(node, (ast.Attribute, ast.Subscript)) and not isinstance(node.ctx, ast.Load):
            found += self._dynamic_write(node, scopes)
        if isinstance(node, (ast.Name, ast.Attribute)) or (
            isinstance(node, ast.Call) and _chain(node) is not None
        ):
            found += self._dynamic_reference(node, scopes, parents.get(id(node)), unit)
        return found

    def _dynamic_reference(
        self, node: ast.AST, scopes: tuple, parent: ast.AST | None, unit: _Unit
    ) -> list[str]:
        """A name or attribute chain (`a.b.c`, `getattr(a, "b")`), judged step by step on the
        objects it resolves to; on a value the rules cannot type, by its names alone."""
        if _inside_chain(node, parent):
            return []
        chain = _chain(node)
        if chain is None:  # f().attr, x[0].attr: the attribute's name is all there is
            why = dynamic.dunder_reason(node.attr)
            return [why] if why else []
        dunders = [why for why in map(dynamic.dunder_reason, chain) if why]
        if dunders or _is_local(chain[0], scopes):
            return dunders
        load = isinstance(getattr(node, "ctx", ast.Load()), ast.Load)
        attrs = chain[1:] if load else chain[1:-1]
        if not load and not attrs:
            return []  # a name being bound
        if isinstance(node, ast.Name) and _constant_attribute_call(node, parent):
            return []  # hasattr(x, "name"): the name is judged as part of a chain
        found = []
        for kind, obj, dotted in self._resolve_global(chain[0]):
            if kind == "object":
                why, obj = _walk(obj, attrs, dotted)
                if why:
                    found.append(why)
                elif load and dynamic.is_module(obj) and not _is_alias_value(node, unit):
                    if not (_constant_attribute_call(getattr(parent, "func", None), parent)):
                        found.append(f"uses the module {obj.__name__} as a value")
        return found

    def _dynamic_write(self, node: ast.Attribute | ast.Subscript, scopes: tuple) -> list[str]:
        """`x.a = ...`, `x[k] = ...`, `del x.a` (any binding form): a write into a library
        object, or into something the rules cannot name, is dynamic."""
        base = node.value
        while isinstance(base, (ast.Attribute, ast.Subscript)):
            base = base.value
        what = f"writes {ast.unparse(node)[:80]}"
        if not isinstance(base, ast.Name):
            return [
                f"{what}, into a value the rules cannot name (it may write attributes of modules or types)"
            ]
        if _is_local(base.id, scopes):
            return []
        if any(kind in ("object", "unknown") for kind, _, _ in self._resolve_global(base.id)):
            return [f"{what}: it {dynamic.WRITES}"]
        return []  # the learner's own function, class or value

    def _dynamic_import(self, node: ast.Import | ast.ImportFrom) -> list[str]:
        if isinstance(node, ast.Import):
            found = []
            for alias in node.names:
                why = dynamic.module_reason(alias.name)
                if why:
                    found.append(f"imports {alias.name}: it {why}")
                elif _import_object(alias.name) is None:
                    found.append(f"imports {alias.name}, a module the rules cannot read")
            return found
        module = node.module or ""
        if node.level or not module:
            return ["a relative import, which the rules cannot read"]
        why = dynamic.module_reason(module)
        owner = None if why else _import_object(module)
        if why or owner is None:
            return [f"imports from {module}: it {why or 'is a module the rules cannot read'}"]
        found = []
        for alias in node.names:
            if alias.name == "*":
                if module in dynamic.PLAIN_MEMBERS:
                    found.append(f"imports every name of {module}: it {dynamic.INSIDES}")
                continue
            dotted = f"{module}.{alias.name}"
            why = dynamic.step_reason(owner, alias.name, module)
            if why is None:
                obj = getattr(owner, alias.name, None) or _import_object(dotted)
                why = (
                    dynamic.reached_reason(owner, alias.name, obj, dotted)
                    if obj is not None
                    else f"imports {dotted}, which the rules cannot read"
                )
            if why:
                found.append(why)
        return found

    # --- one call ---------------------------------------------------------------------------

    def _globals_of(self, unit: _Unit) -> set[str]:
        """The global names a unit reads or writes (Python's scoping: parameters, locals,
        comprehension variables and class bodies are not globals)."""
        key = id(unit.node)
        if key not in self._globals_cache:
            names = set()
            for node, scopes in _scoped(unit.node):
                if isinstance(node, ast.Name) and not _is_local(node.id, scopes):
                    names.add(node.id)
            self._globals_cache[key] = names
        return self._globals_cache[key]

    def reachable(self, name: str, replaced: set[str] = frozenset()) -> list[_Unit]:
        """Every unit that can give the code of `name` a value: its definitions, those of every
        global they name (every binding form), the statements that change a value they read
        (`fns.append(...)`, `table[k] = ...`, `register(fns)`, from any cell) and the
        statements that set an attribute of a function or class they use, transitively. Names
        in `replaced` are swapped for references during the call: not followed."""
        seen: set[str] = set(replaced) - {name}
        todo = [name]
        units: list[_Unit] = []
        while todo:
            current = todo.pop()
            if current in seen:
                continue
            seen.add(current)
            bindings = self.globals.get(current, [])
            found = [b.unit for b in bindings if b.unit is not None]
            if any(b.kind in ("value", "alias") for b in bindings):
                touching = self.mentions.get(current, [])
                found += touching
                for unit in touching:  # a helper that touches the value: every call of it
                    if isinstance(unit.node, _DEFINITIONS):
                        found += self.mentions.get(unit.node.name, [])
            found += self.stored_into.get(current, [])
            for unit in found:
                if unit not in units:
                    units.append(unit)
                    todo.extend(self._globals_of(unit) - seen)
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

        Findings outside the allow-list are also kept in `self.review` (the submission's
        status becomes `needs_review`). The answer depends on the arguments only through the
        modules among them, so it is computed once per function, rule and module types."""
        modules = tuple(
            (i, type(v))
            for i, v in enumerate([*args, *kwargs.values()])
            if isinstance(v, nn.Module)
        )
        key = (name, tuple(forbidden), frozenset(replaced), modules, tuple(kwargs))
        if key not in self._verdicts:
            found = self._violations(name, forbidden, args, kwargs, replaced)
            self.review |= {f for f in found if f.review}
            self._verdicts[key] = found
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
            return sorted(set(found), key=lambda f: (f.cell, f.line, f.what))
        if not self.globals.get(name) and name not in replaced:
            found.append(
                Finding(-1, 0, f"{name} is not defined by a cell the rules can read", True)
            )
        rule = _rule(tuple(forbidden), self._context_objects())
        for kind, obj, dotted in self._resolve_global(name):  # the graded name itself
            verdict = _judge(obj, rule) if kind == "object" else "allowed"
            if verdict != "allowed" or kind == "unknown":
                what = f"{name} is {dotted} itself, not a function of yours"
                found.append(Finding(-1, 0, what, verdict != "forbidden"))
        module_params = _module_parameters(units, name, args, kwargs)
        for unit in units:
            found += self._check_unit(unit, rule, module_params)
        return sorted(set(found), key=lambda f: (f.cell, f.line, f.what))

    # resolution --------------------------------------------------------------------------

    def _context_objects(self) -> tuple[int, ...]:
        """ids of the objects the instructor's set-up imports by name (building blocks)."""
        out = []
        for binding in self.context.values():
            if binding.kind == "import":
                obj = _import_object(binding.target)
                if obj is not None and not isinstance(obj, types.ModuleType):
                    out.append(id(obj))
        return tuple(sorted(out))

    def _resolve_global(self, name: str, depth: int = 0) -> list[tuple[str, Any, str]]:
        """What a global name can denote: ("object", obj, dotted), ("value", None, name),
        ("code", None, name) or ("unknown", None, why)."""
        if depth > 20:
            return [("unknown", None, f"{name} (aliases too deep)")]
        bindings = self.globals.get(name) or ([self.context[name]] if name in self.context else [])
        out: list[tuple[str, Any, str]] = []
        for binding in bindings:
            if binding.kind == "import":
                obj = _import_object(binding.target)
                out.append(
                    ("object", obj, binding.target)
                    if obj is not None
                    else ("unknown", None, binding.target)
                )
            elif binding.kind == "alias":
                chain = _chain(binding.node)
                if chain is None:
                    out.append(("value", None, name))
                    continue
                for kind, obj, dotted in self._resolve_global(chain[0], depth + 1):
                    if kind == "object":
                        out.append(_follow_attrs(obj, chain[1:], dotted))
                    else:
                        out.append((kind, None, name))
            elif binding.kind in ("code", "value"):
                out.append((binding.kind, None, name))
            else:
                out.append(("unknown", None, name))
        # a star import binds the name until (and unless) a later binding runs: both count
        for module in self.stars + ([] if bindings else self.context_stars):
            obj = _import_object(module)
            if obj is not None and hasattr(obj, name):
                out.append(("object", getattr(obj, name), f"{module}.{name}"))
        if not bindings:
            if not out and hasattr(builtins, name):
                out.append(("object", getattr(builtins, name), f"builtins.{name}"))
            if not out:
                out.append(("unknown", None, name))
        return out

    def _check_unit(self, unit: _Unit, rule: _Rule, module_params: dict[str, Any]) -> list[Finding]:
        found: list[Finding] = []
        parents = {id(c): p for p in ast.walk(unit.node) for c in ast.iter_child_nodes(p)}
        alias_value = (
            unit.node.value
            if isinstance(unit.node, ast.Assign)
            and len(unit.node.targets) == 1
            and isinstance(unit.node.targets[0], ast.Name)
            else None
        )

        def add(node: ast.AST, what: str, review: bool) -> None:
            found.append(Finding(unit.cell, getattr(node, "lineno", 0), what, review))

        for node, scopes in _scoped(unit.node):
            if _is_magic_call(node):
                add(
                    node, "uses an IPython magic or shell escape, which the rules cannot read", True
                )
                continue
            if not isinstance(node, (ast.Name, ast.Attribute, ast.Call)):
                continue
            parent = parents.get(id(node))
            if _inside_chain(node, parent):
                continue
            chain = _chain(node)
            if chain is None:
                if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
                    self._value_attrs([node.attr], node, rule, add)
                continue
            ctx = getattr(node, "ctx", ast.Load())
            if not isinstance(ctx, ast.Load) and len(chain) == 1:
                continue  # a name being bound
            attrs = chain[1:] if isinstance(ctx, ast.Load) else chain[1:-1]
            if _is_local(chain[0], scopes):
                if chain[0] in module_params and len(scopes) == 1:
                    continue  # a module argument: its calls are checked below
                self._value_attrs(attrs, node, rule, add)
                continue
            for kind, obj, dotted in self._resolve_global(chain[0]):
                if kind == "object":
                    kind, obj, dotted = _follow_attrs(obj, attrs, dotted)
                if kind == "value":
                    self._value_attrs(attrs, node, rule, add)
                elif kind == "unknown":
                    add(node, f"uses {'.'.join(chain)}, which the rules cannot resolve", True)
                elif kind == "object" and isinstance(ctx, ast.Load):
                    if isinstance(obj, types.ModuleType) and node is alias_value:
                        continue  # `F = torch.nn.functional`: followed where F is used
                    verdict = _judge(obj, rule)
                    if verdict == "forbidden":
                        path = rule.forbidden_paths.get(id(dynamic.unwrap(obj)), dotted)
                        add(node, f"uses {path}, which this part asks you to write yourself", False)
                    elif verdict == "review":
                        what = "the module " if isinstance(obj, types.ModuleType) else ""
                        add(
                            node,
                            f"uses {what}{dotted}, which is not among the building blocks "
                            "this part allows",
                            True,
                        )
        for node in ast.walk(unit.node):  # calls of module arguments whose forward is forbidden
            if isinstance(node, ast.Call):
                chain = _chain(node.func)
                if chain and chain[0] in module_params:
                    target = _follow(module_params[chain[0]], chain[1:])
                    if target is not None:
                        for owners in rule.classes.values():
                            if isinstance(target, tuple(owners)):
                                add(
                                    node,
                                    f"calls {'.'.join(chain)}(...), a {type(target).__name__} "
                                    "whose forward this part asks you to write yourself",
                                    False,
                                )
        return found

    def _value_attrs(self, attrs: list[str], node: ast.AST, rule: _Rule, add) -> None:
        """Attributes of a value the rules cannot type (a tensor, most often)."""
        for attr in attrs:
            if attr in rule.methods:
                add(node, f"uses .{attr}, which this part asks you to write yourself", False)
            elif hasattr(torch.Tensor, attr) and attr not in rule.tensor_attrs:
                add(
                    node,
                    f"uses .{attr}, a tensor method that is not among the building blocks "
                    "this part allows",
                    True,
                )


def _parse(source: str) -> tuple[ast.Module | None, int]:
    """The cell as the kernel runs it: IPython's input transformation (magics, shell escapes,
    `?` help), then Python's parser. (None, line) when it does not parse."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager

        code = TransformerManager().transform_cell(source)
    except Exception:
        code = source
    try:
        return ast.parse(code), 0
    except SyntaxError as error:
        return None, error.lineno or 0
    except (ValueError, RecursionError, MemoryError):
        return None, 0


def _walk(obj: Any, attrs: list[str], dotted: str) -> tuple[str | None, Any]:
    """(why it is dynamic, None) or (None, the object) for `obj.attr1.attr2...`, judged at
    every step: nothing reached through an object's attributes escapes the judgement."""
    why = dynamic.object_reason(obj)
    if why:
        return f"uses {dotted}: it {why}", None
    for attr in attrs:
        why = dynamic.step_reason(obj, attr, dotted)
        if why:
            return why, None
        reached = _attribute(obj, attr)
        if reached is _MISSING:
            return f"uses {dotted}.{attr}, which the rules cannot resolve", None
        why = dynamic.reached_reason(obj, attr, reached, f"{dotted}.{attr}")
        if why:
            return why, None
        obj, dotted = reached, f"{dotted}.{attr}"
    return None, obj


def _constant_attribute_call(node: ast.AST | None, parent: ast.AST | None) -> bool:
    """`hasattr(x, "name")`: called directly, with a constant name."""
    return (
        isinstance(node, ast.Name)
        and node.id in ("hasattr", "getattr")
        and isinstance(parent, ast.Call)
        and parent.func is node
        and len(parent.args) >= 2
        and isinstance(parent.args[1], ast.Constant)
        and isinstance(parent.args[1].value, str)
        and dynamic.dunder_reason(parent.args[1].value) is None
    )


def _is_alias_value(node: ast.AST, unit: _Unit) -> bool:
    """Is `node` the right side of a top-level `name = chain` (a binding the rules follow)?"""
    top = unit.node
    return (
        isinstance(top, ast.Assign)
        and top.value is node
        and len(top.targets) == 1
        and isinstance(top.targets[0], ast.Name)
    )


def _is_magic_call(node: ast.AST) -> bool:
    """`get_ipython().run_cell_magic(...)` and its kin: how IPython's transformer spells
    `%%name`, `%name` and `!command` (and how a learner may spell them by hand)."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in MAGIC_METHODS
        and isinstance(node.func.value, ast.Call)
        and isinstance(node.func.value.func, ast.Name)
        and node.func.value.func.id == "get_ipython"
        and not node.func.value.args
    )


def _constants(call: ast.Call) -> list[str | None]:
    """The call's positional arguments: each constant string, or None."""
    return [
        a.value if isinstance(a, ast.Constant) and isinstance(a.value, str) else None
        for a in call.args
    ]


def _magic_bodies(tree: ast.AST, depth: int = 0) -> list[ast.Module]:
    """The code inside the magics of a cell, parsed as the kernel would run it: a cell
    magic's body (`%%capture`, `%%time`, ...), a line magic's argument (`%time x = f()`, after
    its options), nested magics included. Line numbers are the cell's."""
    found: list[ast.Module] = []
    for node in ast.walk(tree):
        if not _is_magic_call(node) or depth > 3:
            continue
        for text in _constants(node)[1:]:
            body = _parse_magic_argument(text or "")
            if body is not None:
                ast.increment_lineno(body, node.lineno - (1 if text and "\n" not in text else 0))
                found += [body, *_magic_bodies(body, depth + 1)]
    return found


def _parse_magic_argument(text: str) -> ast.Module | None:
    """The longest tail of a magic's argument that parses (`-n 10 f(x)` gives `f(x)`)."""
    words = text.split(" ")
    for start in range(min(len(words), 8)):  # options come first; a body is never long here
        tree, _ = _parse(" ".join(words[start:]))
        if tree is not None and tree.body:
            return tree
    return None


def _inside_chain(node: ast.AST, parent: ast.AST | None) -> bool:
    """Is `node` the inner part of a longer chain (`torch` in `torch.softmax`, `F` in
    `getattr(F, "x")`, the `getattr` name itself)?"""
    if parent is None:
        return False
    if isinstance(parent, ast.Attribute) and parent.value is node:
        return _chain(parent) is not None or isinstance(node, ast.Call)
    if (
        isinstance(parent, ast.Call)
        and _chain(parent) is not None
        and (parent.func is node or (parent.args and parent.args[0] is node))
    ):
        return True
    return False


def _scoped(root: ast.AST) -> Iterator[tuple[ast.AST, tuple[tuple[str, frozenset[str]], ...]]]:
    """Every node under `root` with the scopes it is in (innermost last): ("function", locals)
    or ("class", names of the class body)."""
    stack: list[tuple[ast.AST, tuple]] = [(root, ())]
    while stack:
        node, scopes = stack.pop()
        yield node, scopes
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            args = node.args
            outer = [*args.defaults, *[d for d in args.kw_defaults if d is not None]]
            if not isinstance(node, ast.Lambda):
                outer += node.decorator_list + ([node.returns] if node.returns else [])
                every = [*args.posonlyargs, *args.args, *args.kwonlyargs]
                every += [a for a in (args.vararg, args.kwarg) if a]
                outer += [a.annotation for a in every if a.annotation is not None]
            stack += [(c, scopes) for c in outer]
            inner = (*scopes, ("function", frozenset(_function_locals(node))))
            body = node.body if isinstance(node.body, list) else [node.body]
            stack += [(c, inner) for c in body]
        elif isinstance(node, ast.ClassDef):
            outer = node.decorator_list + node.bases + [k.value for k in node.keywords]
            stack += [(c, scopes) for c in outer]
            names = frozenset(_scope_stores(node.body) - _declared_global(node.body))
            stack += [(c, (*scopes, ("class", names))) for c in node.body]
        elif isinstance(node, _COMPREHENSIONS):
            generators = node.generators
            stack.append((generators[0].iter, scopes))
            targets = frozenset(
                n.id for g in generators for n in ast.walk(g.target) if isinstance(n, ast.Name)
            )
            inner = (*scopes, ("function", targets))
            rest: list[ast.AST] = [g.target for g in generators]
            rest += [i for g in generators for i in g.ifs] + [g.iter for g in generators[1:]]
            rest += [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
            stack += [(c, inner) for c in rest]
        else:
            stack += [(c, scopes) for c in ast.iter_child_nodes(node)]


def _is_local(name: str, scopes: tuple) -> bool:
    """Python's lookup: the innermost scope, then the enclosing functions (class bodies are
    skipped from inside a function)."""
    for depth, (kind, names) in enumerate(reversed(scopes)):
        if kind == "class" and depth > 0:
            continue
        if name in names:
            return True
    return False


def _scope_nodes(body: list[ast.AST]) -> Iterator[ast.AST]:
    """The nodes of one scope (nested functions' and classes' bodies left out; their
    decorators and defaults, evaluated here, kept; comprehensions entered: their walrus
    targets bind here)."""
    todo = list(body)
    while todo:
        node = todo.pop()
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            todo += node.args.defaults + [d for d in node.args.kw_defaults if d is not None]
            if not isinstance(node, ast.Lambda):
                todo += node.decorator_list
        elif isinstance(node, ast.ClassDef):
            todo += node.decorator_list + node.bases + [k.value for k in node.keywords]
        elif isinstance(node, ast.comprehension):
            todo += [node.iter, *node.ifs]  # the target is the comprehension's own
        else:
            todo += list(ast.iter_child_nodes(node))


def _scope_stores(body: list[ast.AST]) -> set[str]:
    """Names bound in one scope, `global` declarations not excluded."""
    names: set[str] = set()
    for node in _scope_nodes(body):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names if a.name != "*"}
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            names.add(node.rest)
    return names


def _declared_global(body: list[ast.AST]) -> set[str]:
    return {n for node in _scope_nodes(body) if isinstance(node, ast.Global) for n in node.names}


def _function_locals(node: ast.AST) -> set[str]:
    args = node.args
    params = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
    params |= {a.arg for a in (args.vararg, args.kwarg) if a}
    body = node.body if isinstance(node.body, list) else [node.body]
    return (params | _scope_stores(body)) - _declared_global(body)


def _module_bindings(node: ast.AST, unit: _Unit | None) -> list[tuple[str, _Binding]]:
    """The global names a top-level statement binds, and how (every binding form: def,
    class, import, assignment and augmented assignment, `for` and `with` targets, walrus,
    `except ... as`, `match` captures, and `global` names set inside functions and class
    bodies)."""
    out: list[tuple[str, _Binding]] = []
    if isinstance(node, ast.Import):
        for alias in node.names:
            name = alias.asname or alias.name.split(".")[0]
            target = alias.name if alias.asname else name
            out.append((name, _Binding("import", unit, target)))
        return out
    if isinstance(node, ast.ImportFrom):
        for alias in node.names:
            if alias.name == "*":
                kind = "star" if node.level == 0 and node.module else "unknown"
                out.append(("*", _Binding(kind, unit, node.module or "")))
            elif node.level or not node.module:
                out.append((alias.asname or alias.name, _Binding("unknown", unit)))
            else:
                target = f"{node.module}.{alias.name}"
                out.append((alias.asname or alias.name, _Binding("import", unit, target)))
        return out
    stores = _scope_stores([node])
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        out.append((node.name, _Binding("code", unit)))
        stores.discard(node.name)
    simple_alias = (
        isinstance(node, ast.Assign)
        and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Name)
        and _chain(node.value) is not None
    )
    for name in sorted(stores):
        kind = "alias" if simple_alias else "value"
        out.append((name, _Binding(kind, unit, node=node.value if simple_alias else None)))
    for sub in ast.walk(node):  # `global g` in any function or class body: g = ... binds g
        if isinstance(sub, _DEFINITIONS):
            declared = _declared_global(sub.body)
            for name in sorted(declared & _scope_stores(sub.body)):
                out.append((name, _Binding("value", unit)))
    return out


def _stored_into(node: ast.AST) -> set[str]:
    """Heads of the attribute and item targets a unit writes (`f.x = ...`, `T[k] = ...`,
    `C.s += ...`, `del T[k]`)."""
    heads: set[str] = set()
    for sub in ast.walk(node):
        targets: list[ast.AST] = []
        if isinstance(sub, (ast.Assign, ast.Delete)):
            targets = list(sub.targets)
        elif isinstance(sub, (ast.AugAssign, ast.AnnAssign)):
            targets = [sub.target]
        for target in targets:
            for t in ast.walk(target):
                if isinstance(t, (ast.Attribute, ast.Subscript)):
                    head = t
                    while isinstance(head, (ast.Attribute, ast.Subscript)):
                        head = head.value
                    if isinstance(head, ast.Name):
                        heads.add(head.id)
    return heads


def _import_object(dotted: str) -> Any:
    """The object a dotted path names, importing only modules of packages the course uses
    (never a module the learner names): None when it cannot be found."""
    top = dotted.split(".")[0]
    if top not in sys.modules and top not in IMPORTABLE:
        return None
    found = _resolve(dotted) if "." in dotted else None
    if found is None:  # a module (or a submodule not imported yet)
        try:
            return importlib.import_module(dotted)
        except Exception:
            return None
    return found


IMPORTABLE = {
    "torch", "math", "random", "typing", "collections", "itertools", "functools",
    "dataclasses", "operator", "copy", "warnings", "re", "string", "unicodedata",
    "bertcourse", "transformers", "tokenizers", "numpy", "matplotlib", "__future__", "time",
    "json", "statistics", "fractions", "decimal", "heapq", "bisect", "enum", "abc",
    "contextlib", "textwrap", "pprint", "datetime", "pathlib", "os", "sys", "types",
}  # fmt: skip


_MISSING = object()


def _attribute(obj: Any, attr: str) -> Any:
    """`obj.attr` as the kernel may see it: a submodule not imported here yet (`torch.optim.
    adam`) is imported (from the packages the course uses); `_MISSING` when it is not there."""
    try:
        return getattr(obj, attr)
    except Exception:
        pass
    name = f"{getattr(obj, '__name__', '')}.{attr}"
    if dynamic.is_module(obj) and not attr.startswith("_") and name.split(".")[0] in IMPORTABLE:
        try:
            return importlib.import_module(name)
        except Exception:
            pass
    return _MISSING


def _follow_attrs(obj: Any, attrs: list[str], dotted: str) -> tuple[str, Any, str]:
    """("object", obj, dotted) at the end of the chain, or ("unknown", None, where). The
    route itself (a private name, `typing.sys`) is judged by the dynamic scan."""
    for attr in attrs:
        obj = _attribute(obj, attr)
        if obj is _MISSING:
            return ("unknown", None, f"{dotted}.{attr}")
        dotted = f"{dotted}.{attr}"
    return ("object", obj, dotted)


_PLAIN = (int, float, complex, str, bytes, bool, type(None), torch.dtype, torch.device)


def _judge(obj: Any, rule: _Rule) -> str:
    """ "forbidden", "allowed" or "review" for one resolved object."""
    try:
        key = id(dynamic.unwrap(obj))
    except Exception:
        return "review"
    if key in rule.forbidden or id(obj) in rule.forbidden:
        return "forbidden"
    if isinstance(obj, _PLAIN) or key in rule.allowed or id(obj) in rule.allowed:
        return "allowed"
    if isinstance(obj, type) and issubclass(obj, BaseException):
        return "allowed"
    if getattr(obj, "__self__", None) in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        return "allowed"  # print's relatives: sys.stderr.write
    return "review"


@functools.lru_cache(maxsize=256)
def _rule(forbidden: tuple[str, ...], context: tuple[int, ...]) -> _Rule:
    exact, methods, classes = _forbidden_sets(forbidden)
    ids: set[int] = set()
    paths: dict[int, str] = {}
    for path in exact | set(classes):
        obj = _resolve(path)
        if obj is not None:
            ids.add(id(dynamic.unwrap(obj)))
            paths[id(dynamic.unwrap(obj))] = path
    for owners in classes.values():
        for cls in owners:
            ids.add(id(cls))
    entries = list(allow.BASE)
    chosen = set(forbidden)
    for group, extra in allow.EXTRA.items():
        if chosen & set(FORBIDDEN.get(group, ())):
            entries += extra
    for module, extra in allow.EXTRA_BY_MODULE.items():
        if any(p == module or p.startswith(module + ".") for p in chosen):
            entries += extra
    allowed: set[int] = set(context)
    tensor_attrs = set(allow.TENSOR_ATTRS)
    for entry in entries:
        if entry.endswith(".*"):
            try:
                module = importlib.import_module(entry[:-2])
            except ImportError:
                continue
            allowed |= {id(v) for k, v in vars(module).items() if _building_block(k, v)}
            continue
        obj = _resolve(entry)
        if obj is not None:
            allowed.add(id(dynamic.unwrap(obj)))
            allowed.add(id(obj))
        if entry.startswith("torch.Tensor."):
            tensor_attrs.add(entry.rsplit(".", 1)[1])
    tensor_attrs -= methods
    return _Rule(
        frozenset(ids),
        paths,
        frozenset(methods),
        classes,
        frozenset(allowed - ids),
        frozenset(tensor_attrs),
    )


def _building_block(name: str, value: Any) -> bool:
    """What `<module>.*` allows: its public callables, never a module (`typing.sys`) nor a
    dynamic object (`typing.get_type_hints`, an evaluator)."""
    return (
        not name.startswith("_")
        and callable(value)
        and not dynamic.is_module(value)
        and dynamic.object_reason(value) is None
    )


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
