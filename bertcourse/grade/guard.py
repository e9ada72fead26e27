"""The in-kernel half of `bertcourse.grade`: run the test cells in a restored environment.

The grader never sends a test cell to the kernel as a cell. IPython would pass it through
the shell's input transformers, AST transformers, event callbacks, custom exception handlers
and display hook, all of which the student's code may have replaced (a transformer that
blanks every cell containing `check_`, a handler that swallows `AssertionError`, ...).
Instead the grader sends an empty cell whose *user expression* calls `run_test` below; IPython
evaluates user expressions with a plain `eval`, outside that machinery. `run_test`

1. restores everything `install` recorded before the first student cell ran: the attributes
   of every module of torch, numpy, bertcourse (the test helpers included), math, copy,
   functools, operator, inspect, contextlib, ast, traceback, json, types and of the classes
   they define (`torch.allclose = lambda *a, **k: True`, `torch.Tensor.__eq__ = ...`,
   `grading.check_close = ...` are undone), `builtins`, `sys.modules`, the import system,
   `sys.displayhook`/`excepthook`, trace and profile functions, gc callbacks, and the IPython
   shell's transformers, event callbacks, exception handlers and display formatters;
2. re-runs the instructor's import lines (from the locked cells of the source notebook) and
   puts back the names that earlier test cells bound, unless a solution cell defines them;
3. compiles the test cell with a fresh IPython transformer, executes it in the user
   namespace and catches every exception (`BaseException`) itself;
4. compares the environment again, so that code called by the test (the student's function)
   that patches torch or the helpers *during* the test is caught: the test then fails;
5. returns a verdict with the grader's per-request nonce, which the grader requires.

The grader judges a test cell only from that verdict: a test that did not run, did not
return, or returned without the nonce scores 0. Restored changes that look like cheating
(the new value was defined by the student) are reported, and the submission is marked
`tampered`. What this cannot stop (code that targets this module itself, e.g. by replacing
`run_test` before it is called) is listed in the instructors' guide; the real walls are
outside the kernel: no hidden tests on disk, no course files, no gradebook, no network.
"""

from __future__ import annotations

import ast
import builtins
import gc
import json
import sys
import threading
import traceback
import types
import warnings
from typing import Any

PROTECTED_PREFIXES = (
    "torch",
    "numpy",
    "bertcourse",
    "math",
    "cmath",
    "copy",
    "functools",
    "operator",
    "inspect",
    "contextlib",
    "ast",
    "traceback",
    "json",
    "types",
    "IPython.core.inputtransformer2",
    "IPython.core.interactiveshell",
    "IPython.core.formatters",
    "ipykernel.ipkernel",
    "ipykernel.kernelbase",
    "ipykernel.zmqshell",
)
_MISSING = object()

# references taken when this module is imported (before any student code): restored below too
_exec = builtins.exec
_eval = builtins.eval
_compile = builtins.compile
_isinstance = builtins.isinstance
_type = builtins.type
_id = builtins.id


class _State:
    """Everything recorded by `install`."""

    def __init__(self) -> None:
        self.modules: dict[str, tuple[types.ModuleType, dict[str, Any]]] = {}
        self.classes: list[tuple[type, dict[str, Any]]] = []
        self.builtins: dict[str, Any] = {}
        self.sys_attrs: dict[str, Any] = {}
        self.meta_path: list[Any] = []
        self.path_hooks: list[Any] = []
        self.gc_callbacks: list[Any] = []
        self.shell: Any = None
        self.shell_lists: dict[str, tuple[list[Any], list[Any]]] = {}
        self.events: dict[str, list[Any]] = {}
        self.formatters: dict[str, tuple[Any, dict[str, dict[Any, Any]]]] = {}
        self.shell_attrs: dict[str, Any] = {}
        self.instance_dicts: list[tuple[Any, set[str]]] = []
        self.test_names: dict[str, Any] = {}
        self.solution_names: set[str] = set()
        self.imports: str = ""
        self.threads: set[int] = set()
        self.user_files: tuple[str, ...] = ()


_state: _State | None = None


def _protected(name: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in PROTECTED_PREFIXES)


def _looks_foreign(value: Any) -> bool:
    """Was `value` made by the student (in a notebook cell) rather than by a library?"""
    if value is _MISSING:
        return False
    try:
        module = getattr(value, "__module__", None)
        func = getattr(value, "__func__", value)
        code = getattr(func, "__code__", None)
    except Exception:  # an object whose attribute lookup raises: certainly not a library's
        return True
    if module == "__main__":
        return True
    if code is not None:
        filename = str(getattr(code, "co_filename", ""))
        # notebook cells compile to <ipython-input-...>, <string> or .../ipykernel_<pid>/<hash>.py
        if filename.startswith("<") or "/ipykernel_" in filename:
            return True
    if not _isinstance(module, str):
        return callable(value)
    return callable(value) and not _protected(module)


def _snapshot_modules(state: _State) -> None:
    seen: set[int] = set()
    for name, module in list(sys.modules.items()):
        if module is None or not _protected(name) or name in state.modules or name == __name__:
            continue  # (this module's own state must survive the restores)
        namespace = dict(vars(module))
        state.modules[name] = (module, namespace)
        for value in namespace.values():
            if (
                _isinstance(value, type)
                and _id(value) not in seen
                and getattr(value, "__module__", None) == name
            ):
                seen.add(_id(value))
                state.classes.append((value, dict(vars(value))))


def _snapshot_shell(state: _State) -> None:
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None:
        return
    state.shell = shell
    manager = getattr(shell, "input_transformer_manager", None)
    for owner, attr in (
        (shell, "input_transformers_post"),
        (shell, "ast_transformers"),
        (manager, "cleanup_transforms"),
        (manager, "line_transforms"),
        (manager, "token_transformers"),
    ):
        value = getattr(owner, attr, None)
        if _isinstance(value, list):
            state.shell_lists[f"{_id(owner)}.{attr}"] = (value, list(value))
    state.events = {k: list(v) for k, v in shell.events.callbacks.items()}
    for mime, formatter in shell.display_formatter.formatters.items():
        tables = {}
        for table in ("type_printers", "deferred_printers", "singleton_printers"):
            value = getattr(formatter, table, None)
            if _isinstance(value, dict):
                tables[table] = dict(value)
        state.formatters[mime] = (formatter, tables)
    for attr in (
        "custom_exceptions",
        "displayhook",
        "display_formatter",
        "input_transformer_manager",
        "events",
        "builtin_trap",
    ):
        state.shell_attrs[attr] = getattr(shell, attr, _MISSING)
    for obj in (shell, getattr(shell, "kernel", None)):
        if obj is not None and hasattr(obj, "__dict__"):
            state.instance_dicts.append((obj, set(vars(obj))))


def install(config_json: str) -> str:
    """Record the clean environment; the grader calls this before the first student cell."""
    global _state
    config = json.loads(config_json)
    state = _State()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in config.get("modules", []):
            try:
                __import__(name)
            except Exception:  # a module the course does not have: nothing to protect
                pass
        _snapshot_modules(state)
    state.builtins = dict(vars(builtins))
    state.sys_attrs = {
        k: getattr(sys, k)
        for k in ("stdout", "stderr", "stdin", "displayhook", "excepthook", "path_importer_cache")
    }
    state.meta_path = list(sys.meta_path)
    state.path_hooks = list(sys.path_hooks)
    state.gc_callbacks = list(gc.callbacks)
    state.imports = config.get("imports", "")
    state.solution_names = set(config.get("solution_names", []))
    state.threads = {t.ident for t in threading.enumerate() if t.ident is not None}
    _snapshot_shell(state)
    _state = state
    return json.dumps({"nonce": config["nonce"], "modules": len(state.modules)})


def _restore(state: _State) -> list[str]:
    """Put the recorded environment back; returns what was changed by student code."""
    changed: list[str] = []
    sys.settrace(None)
    sys.setprofile(None)
    threading.settrace(None)  # type: ignore[arg-type]
    threading.setprofile(None)  # type: ignore[arg-type]
    # builtins: restore changed and removed names, drop added ones
    current = vars(builtins)
    for key, value in state.builtins.items():
        if current.get(key, _MISSING) is not value:
            if key != "_" and _looks_foreign(current.get(key)):
                changed.append(f"builtins.{key}")
            current[key] = value
    for key in [k for k in current if k not in state.builtins]:
        if _looks_foreign(current[key]):
            changed.append(f"builtins.{key} (added)")
        del current[key]
    # modules and the classes they define
    for name, (module, namespace) in state.modules.items():
        if sys.modules.get(name, module) is not module:
            changed.append(f"sys.modules[{name!r}]")
        sys.modules[name] = module
        current = vars(module)
        for key, value in namespace.items():
            now = current.get(key, _MISSING)
            if now is not value:
                if _looks_foreign(now) or (name.startswith("bertcourse") and callable(now)):
                    changed.append(f"{name}.{key}")
                current[key] = value
    for cls, namespace in state.classes:
        current = cls.__dict__
        for key, value in namespace.items():
            now = current.get(key, _MISSING)
            if now is not value:
                try:
                    setattr(cls, key, value)
                except (TypeError, AttributeError):
                    continue
                if _looks_foreign(now) or (
                    cls.__module__.startswith("bertcourse") and callable(now)
                ):
                    changed.append(f"{cls.__module__}.{cls.__qualname__}.{key}")
        # added attributes: libraries add some lazily (copyreg's __slotnames__, caches), so
        # only those the student wrote are removed
        for key in [k for k in current if k not in namespace and _looks_foreign(current[k])]:
            try:
                delattr(cls, key)
            except (TypeError, AttributeError):
                continue
            changed.append(f"{cls.__module__}.{cls.__qualname__}.{key} (added)")
    # the interpreter
    for key, value in state.sys_attrs.items():
        if getattr(sys, key) is not value:
            if key not in ("stdout", "stderr", "path_importer_cache"):
                changed.append(f"sys.{key}")
            setattr(sys, key, value)
    if sys.meta_path != state.meta_path:
        changed.append("sys.meta_path")
        sys.meta_path[:] = state.meta_path
    if sys.path_hooks != state.path_hooks:
        changed.append("sys.path_hooks")
        sys.path_hooks[:] = state.path_hooks
    if gc.callbacks != state.gc_callbacks:
        changed.append("gc.callbacks")
        gc.callbacks[:] = state.gc_callbacks
    # the IPython shell
    shell = state.shell
    if shell is not None:
        for attr, value in state.shell_attrs.items():
            if value is not _MISSING and getattr(shell, attr, _MISSING) is not value:
                changed.append(f"shell.{attr}")
                try:
                    setattr(shell, attr, value)
                except Exception:
                    pass
        for key, (lst, items) in state.shell_lists.items():
            if lst != items:
                changed.append(f"shell {key.split('.', 1)[1]}")
                lst[:] = items
        for event, callbacks in state.events.items():
            if shell.events.callbacks.get(event) != callbacks:
                # %matplotlib and friends register callbacks too: reset, but do not report
                shell.events.callbacks[event] = list(callbacks)
        for formatter, tables in state.formatters.values():
            for table, content in tables.items():
                live = getattr(formatter, table)
                if live != content:
                    # IPython moves deferred printers into type_printers on first use
                    if any(_looks_foreign(v) for k, v in live.items() if content.get(k) is not v):
                        changed.append(f"display formatter {table}")
                    live.clear()
                    live.update(content)
        for obj, keys in state.instance_dicts:
            for key in [k for k in vars(obj) if k not in keys]:
                value = vars(obj)[key]
                if _looks_foreign(value):
                    changed.append(f"{type(obj).__name__}.{key} (instance attribute)")
                    del vars(obj)[key]
    return changed


def _bound_names(tree: ast.Module) -> set[str]:
    """Names a cell binds at its top level."""
    names: set[str] = set()

    def targets(node: ast.AST) -> None:
        if _isinstance(node, ast.Name):
            names.add(node.id)
        elif _isinstance(node, (ast.Tuple, ast.List)):
            for elt in node.elts:
                targets(elt)
        elif _isinstance(node, ast.Starred):
            targets(node.value)

    for stmt in tree.body:
        if _isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(stmt.name)
        elif _isinstance(stmt, ast.Assign):
            for t in stmt.targets:
                targets(t)
        elif _isinstance(stmt, (ast.AugAssign, ast.AnnAssign)):
            targets(stmt.target)
        elif _isinstance(stmt, (ast.For, ast.AsyncFor)):
            targets(stmt.target)
        elif _isinstance(stmt, (ast.With, ast.AsyncWith)):
            for item in stmt.items:
                if item.optional_vars is not None:
                    targets(item.optional_vars)
        elif _isinstance(stmt, (ast.Import, ast.ImportFrom)):
            for alias in stmt.names:
                names.add((alias.asname or alias.name).split(".")[0])
    return names


# dunder methods through which a returned object could make a comparison succeed
_DANGEROUS = frozenset(
    """__eq__ __ne__ __lt__ __le__ __gt__ __ge__ __bool__ __len__ __int__ __float__ __index__
    __complex__ __abs__ __neg__ __sub__ __rsub__ __add__ __radd__ __mul__ __rmul__ __truediv__
    __getattr__ __getattribute__ __instancecheck__ __class__ __torch_function__
    __torch_dispatch__ __array__ __array_ufunc__ __array_function__ __array_priority__
    __float__ __round__ __hash__ item tolist all any sum max min abs""".split()
)


class RejectedValue(TypeError):
    """A graded function returned an object built to fool comparisons."""


def _in_cell(value: Any) -> bool:
    """Was this function (or method) compiled from a notebook cell?"""
    code = getattr(getattr(value, "__func__", value), "__code__", None)
    filename = str(getattr(code, "co_filename", ""))
    return filename.startswith("<") or "/ipykernel_" in filename


def _student_class(cls: type) -> bool:
    """Defined in a notebook cell (its module is __main__, or one of its methods is a cell's)."""
    if cls.__dict__.get("__module__") == "__main__":
        return True
    try:
        return any(_in_cell(v) for v in list(cls.__dict__.values()))
    except Exception:
        return True


def _suspicious_class(cls: type) -> str | None:
    """The dangerous method a student-defined class (or one of its bases) defines, if any."""
    for klass in cls.__mro__:
        if klass is object or not _student_class(klass):
            continue
        for name in klass.__dict__:
            if name in _DANGEROUS:
                if name in ("__eq__", "__hash__") and getattr(klass, "__dataclass_fields__", None):
                    continue  # dataclass-generated comparison of fields
                return f"{klass.__qualname__}.{name}"
    return None


def _check_value(value: Any, where: str, depth: int = 0) -> None:
    cls = _type(value)
    found = _suspicious_class(cls)
    if found is not None:
        raise RejectedValue(
            f"{where} returned a {cls.__qualname__}, whose class defines {found}: graded "
            "functions must return plain values (tensors, numbers, tuples, lists, dicts)"
        )
    if depth >= 4:
        return
    if cls in (tuple, list) or (_isinstance(value, tuple) and hasattr(value, "_fields")):
        for item in list(value)[:1000]:
            _check_value(item, where, depth + 1)
    elif cls is dict:
        for item in list(value.values())[:1000]:
            _check_value(item, where, depth + 1)


def _checked(fn: Any, name: str) -> Any:
    import functools

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        result = fn(*args, **kwargs)
        _check_value(result, f"{name}(...)")
        return result

    wrapper.__bertcourse_checked__ = True  # type: ignore[attr-defined]
    # bertcourse.grading reaches the learner's function through `__func__` (as for a method)
    # to patch its globals, defaults and closure (forbidden aliases, earlier parts)
    wrapper.__func__ = fn  # type: ignore[attr-defined]
    return wrapper


def _wrap_student_functions(ns: dict[str, Any], skip: set[str]) -> dict[str, Any]:
    """Replace the student's functions in `ns` by checked wrappers; returns the originals."""
    originals = {}
    for name, value in list(ns.items()):
        if name.startswith("_") or name in skip:
            continue
        if _isinstance(value, types.FunctionType) and _looks_foreign(value):
            if getattr(value, "__bertcourse_checked__", False):
                continue
            originals[name] = value
            ns[name] = _checked(value, name)
    return originals


def _user_ns() -> dict[str, Any]:
    shell = _state.shell if _state is not None else None
    if shell is not None:
        return shell.user_ns
    return vars(sys.modules["__main__"])


def _format_error(error: BaseException) -> dict[str, Any]:
    """ename/evalue/traceback of an exception, without this module's frames."""
    tb = error.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
        tb = tb.tb_next
    lines = traceback.format_exception(_type(error), error, tb)
    text = "".join(lines)
    if len(text) > 20000:
        text = text[:10000] + "\n... traceback truncated ...\n" + text[-10000:]
    return {
        "ename": _type(error).__name__,
        "evalue": str(error)[:20000],
        "traceback": text.split("\n"),
    }


def run_test(request_json: str) -> str:
    """Run one test cell (see the module docstring); returns the verdict as JSON."""
    request = json.loads(request_json)
    verdict: dict[str, Any] = {"nonce": request["nonce"], "cell": request["cell"]}
    state = _state
    if state is None:
        verdict.update(
            passed=False,
            error={"ename": "GraderError", "evalue": "guard not installed", "traceback": []},
        )
        return json.dumps(verdict)
    before = _restore(state)
    ns = _user_ns()
    for name, value in state.test_names.items():
        if name not in state.solution_names and ns.get(name, _MISSING) is not value:
            ns[name] = value
    error: dict[str, Any] | None = None
    partial: float | None = None
    try:
        if state.imports:
            _exec(_compile(state.imports, "<instructor imports>", "exec"), ns)
    except BaseException as exc:  # an import that fails is the course's problem, not a pass
        error = _format_error(exc)
    tree = None
    if error is None:
        try:
            from IPython.core.inputtransformer2 import TransformerManager

            source = TransformerManager().transform_cell(request["source"])
            tree = ast.parse(source, filename=f"<test {request['cell']}>")
            last = None
            if tree.body and _isinstance(tree.body[-1], ast.Expr):
                last = ast.Expression(tree.body.pop().value)
            body = _compile(tree, f"<test {request['cell']}>", "exec")
            tail = _compile(last, f"<test {request['cell']}>", "eval") if last else None
        except BaseException as exc:
            error = _format_error(exc)
    originals = _wrap_student_functions(ns, set(state.test_names))
    if error is None:
        trap = getattr(state.shell, "builtin_trap", None)
        sys.settrace(None)
        sys.setprofile(None)
        try:
            if trap is not None:  # get_ipython(), display() as in a normal cell
                trap.__enter__()
            try:
                _exec(body, ns)
                value = _eval(tail, ns) if tail is not None else None
            finally:
                if trap is not None:
                    trap.__exit__(None, None, None)
            if _type(value) in (int, float):
                partial = float(value)
        except BaseException as exc:  # KeyboardInterrupt on timeout, SystemExit, ...
            error = _format_error(exc)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    for name, fn in originals.items():  # the student's cells see their own functions again
        if getattr(ns.get(name), "__wrapped__", None) is fn:
            ns[name] = fn
    during = _restore(state)  # patches made while the test ran (by the code it called)
    if tree is not None:
        for name in _bound_names(tree):
            if name in ns and name not in state.solution_names:
                state.test_names[name] = ns[name]
    new_threads = [
        t.name for t in threading.enumerate() if t.ident not in state.threads and t.is_alive()
    ]
    if error is not None and error["ename"] == "RejectedValue":
        during = [*during, error["evalue"].split(":")[0]]
    verdict.update(
        passed=error is None and not during,
        error=error,
        partial=partial,
        tampered_before=before,
        tampered_during=during,
        threads=new_threads[:10],
    )
    return json.dumps(verdict)
