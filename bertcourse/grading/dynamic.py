"""What "dynamic" means for the static rules: one closed definition, judged on objects.

Code is *dynamic* when the rules, which read it without running it, cannot be sure what it
does: it runs strings as code, writes attributes of modules or types, reaches the import
machinery, starts threads or processes, opens sockets, calls native code, or reaches the
dispatcher's escape hatches. The rules (`rules.StudentCode.dynamic`) resolve every name and
attribute chain of every cell to the object it denotes and ask this module about each step:

- `object_reason(obj)`: the object is a member of the closed sets below (`MODULES` by name or
  package, `OBJECTS` by identity, and anything defined in one of `MODULES`);
- `step_reason(owner, attr, obj)`: reaching `obj` as `owner.attr` leaves the public surface
  of the libraries: a private name, a module that is not `owner`'s own submodule
  (`typing.sys`, `warnings.sys`), a member of `sys` or `os` outside their plain helpers;
- `dunder_reason(name)`: a double-underscore name outside `PLAIN_DUNDERS`, on any value
  (`__setattr__`, `__dict__`, `__class__`, `__globals__`, `__subclasses__`, ...);
- `magic_reason(...)`: an IPython magic or shell escape other than `%matplotlib`.

Whatever the rules cannot resolve (an import of a module they may not import, a write whose
target they cannot name) is a finding too: the definition fails closed.
"""

from __future__ import annotations

import functools
import sys
import types
from typing import Any

RUNS_CODE = "runs code given as a string or bytes"
IMPORTS = "reaches the import machinery"
NAMESPACE = "reaches a namespace as a dictionary"
WRITES = "writes attributes of modules or types"
THREADS = "starts threads or processes"
SOCKETS = "opens sockets"
NATIVE = "calls native code"
DISPATCH = "reaches the dispatcher's escape hatches"
EVALUATES = "evaluates strings (annotations, attribute names)"
INSIDES = "reaches the interpreter's insides"

# modules (and packages) whose every member is dynamic
MODULES: dict[str, str] = {
    "__main__": NAMESPACE,
    **dict.fromkeys(("importlib", "imp", "pkgutil", "runpy", "zipimport", "modulefinder"), IMPORTS),
    **dict.fromkeys(
        ("code", "codeop", "timeit", "cProfile", "profile", "pdb", "bdb", "trace", "doctest"),
        RUNS_CODE,
    ),
    **dict.fromkeys(("pickle", "_pickle", "marshal", "shelve", "copyreg", "dill"), RUNS_CODE),
    **dict.fromkeys(
        ("threading", "_thread", "multiprocessing", "concurrent", "subprocess", "_posixsubprocess"),
        THREADS,
    ),
    **dict.fromkeys(("asyncio", "signal", "_signal", "pty", "atexit", "sched"), THREADS),
    **dict.fromkeys(("socket", "_socket", "ssl", "select", "selectors", "socketserver"), SOCKETS),
    **dict.fromkeys(("http", "urllib", "ftplib", "smtplib", "xmlrpc", "webbrowser"), SOCKETS),
    **dict.fromkeys(("ctypes", "_ctypes", "cffi", "mmap"), NATIVE),
    "unittest.mock": WRITES,
    **dict.fromkeys(
        ("torch.library", "torch.overrides", "torch.utils._python_dispatch", "torch._ops"),
        DISPATCH,
    ),
    **dict.fromkeys(("torch.jit", "torch.fx", "torch.compiler", "torch.export"), RUNS_CODE),
    **dict.fromkeys(("torch.package", "torch.hub"), IMPORTS),
    "torch.utils.cpp_extension": NATIVE,
    "torch.multiprocessing": THREADS,
    "torch.distributed": SOCKETS,
}
# single objects, by dotted path (compared by identity)
OBJECTS: dict[str, str] = {
    **dict.fromkeys(("builtins.exec", "builtins.eval", "builtins.compile"), RUNS_CODE),
    "builtins.breakpoint": RUNS_CODE,
    "builtins.__import__": IMPORTS,
    **dict.fromkeys(("builtins.globals", "builtins.locals", "builtins.vars"), NAMESPACE),
    **dict.fromkeys(("builtins.setattr", "builtins.delattr"), WRITES),
    # plain only when called directly with a constant name (rules.StudentCode checks that)
    **dict.fromkeys(("builtins.getattr", "builtins.hasattr"), EVALUATES),
    **dict.fromkeys(("operator.attrgetter", "operator.methodcaller"), EVALUATES),
    # forward references in annotations are strings that these evaluate
    "typing.get_type_hints": EVALUATES,
    "functools.singledispatch": EVALUATES,
    "functools.singledispatchmethod": EVALUATES,
    "torch.compile": RUNS_CODE,
    "torch.ops.load_library": NATIVE,
    "torch.classes.load_library": NATIVE,
}
# modules of which only these members are plain helpers (the rest is the process's insides)
PLAIN_MEMBERS: dict[str, frozenset[str]] = {
    "sys": frozenset(
        "stdout stderr maxsize float_info version_info version platform byteorder".split()
    ),
    # files and folders (the jail is their wall), never processes, signals or descriptors
    "os": frozenset(
        "path sep linesep curdir pardir getcwd listdir getenv cpu_count fspath makedirs "
        "mkdir remove unlink rename replace rmdir removedirs stat lstat walk scandir "
        "getpid _exit".split()
    ),
}
PLAIN_MEMBERS["posix"] = PLAIN_MEMBERS["os"]  # where os's functions are defined
# documented aliases of another module (`os.path` is `posixpath`)
MODULE_ALIASES = {("os", "path")}
# double-underscore names that only compute (the data model's protocol, names and versions)
PLAIN_DUNDERS = frozenset(
    "__init__ __post_init__ __name__ __qualname__ __doc__ __version__ __len__ __iter__ "
    "__next__ __getitem__ __contains__ __call__ __enter__ __exit__ __repr__ __str__ "
    "__debug__ __future__".split()
)
PLAIN_MAGICS = frozenset({"matplotlib"})  # magics whose argument is not code


def is_dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def dunder_reason(name: str) -> str | None:
    """Why `x.<name>` (or the name itself) is dynamic, for a double-underscore name."""
    if is_dunder(name) and name not in PLAIN_DUNDERS:
        return f"uses {name}: it {INSIDES}"
    return None


def module_reason(name: str, private: bool = True) -> str | None:
    """Why the module called `name` is dynamic (a member of `MODULES`, or, with `private`,
    a private module: `torch._C`)."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        prefix = ".".join(parts[:i])
        if prefix in MODULES:
            return MODULES[prefix]
    if private and name != "__future__" and any(p.startswith("_") for p in parts):
        return INSIDES
    return None


@functools.cache
def _objects() -> dict[int, str]:
    """id -> why, for the `OBJECTS` the referee's process can resolve."""
    found: dict[int, str] = {}
    for path, why in OBJECTS.items():
        owner, _, attr = path.rpartition(".")
        module = sys.modules.get(owner.split(".")[0])
        obj: Any = module
        for name in owner.split(".")[1:] + [attr]:
            obj = getattr(obj, name, None)
        if obj is not None:
            found[id(unwrap(obj))] = why
    return found


def unwrap(obj: Any) -> Any:
    while isinstance(obj, functools.partial):
        obj = obj.func
    return getattr(obj, "__func__", obj)


_DEFINED = (type, types.FunctionType, types.BuiltinFunctionType, types.MethodType)


def object_reason(obj: Any) -> str | None:
    """Why the object is dynamic: a module of `MODULES`, one of `OBJECTS`, or defined in one
    of `MODULES` (`threading.Thread`, `socket.socket`, `torch.jit.script`)."""
    if isinstance(obj, types.ModuleType):
        return module_reason(obj.__name__)
    try:
        why = _objects().get(id(unwrap(obj)))
        module = getattr(obj, "__module__", None) if isinstance(obj, _DEFINED) else None
    except Exception:  # an object whose attributes raise: nothing the rules can trust
        return INSIDES
    if why:
        return why
    if isinstance(module, str) and module in PLAIN_MEMBERS:
        name = getattr(obj, "__name__", None)
        return None if name in PLAIN_MEMBERS[module] else INSIDES
    # where it is defined, not where it is reached from: torch.nn.functional.linear is
    # defined in torch._C._nn, a private module that is the library's own business
    return module_reason(module, private=False) if isinstance(module, str) else None


def step_reason(owner: Any, attr: str, dotted: str) -> str | None:
    """Why `owner.attr` (`owner` spelled `dotted`) leaves the public surface before it is
    even looked up: a dunder, a private name, a member of `sys` / `os` outside their plain
    helpers."""
    plain = PLAIN_MEMBERS.get(getattr(owner, "__name__", "")) if is_module(owner) else None
    if plain is not None:
        return None if attr in plain else f"uses {dotted}.{attr}: it {INSIDES}"
    if dunder_reason(attr):
        return f"uses {dotted}.{attr}: it {INSIDES}"
    if attr.startswith("_"):
        return f"uses {dotted}.{attr}, a private name: it {INSIDES}"
    return None


def reached_reason(owner: Any, attr: str, obj: Any, dotted: str) -> str | None:
    """Why the object reached as `owner.attr` (spelled `dotted`) is dynamic: a module that is
    not `owner`'s own submodule (`typing.sys`, `torch.nn.functional.torch`), or a member of
    the closed sets."""
    if is_module(obj):
        own = is_module(owner) and obj.__name__ == f"{owner.__name__}.{attr}"
        if not own and (getattr(owner, "__name__", ""), attr) not in MODULE_ALIASES:
            return f"reaches the module {obj.__name__} through {dotted}"
    why = object_reason(obj)
    return f"uses {dotted}: it {why}" if why else None


def is_module(obj: Any) -> bool:
    return isinstance(obj, types.ModuleType)


def magic_reason(method: str, args: list[Any]) -> str | None:
    """Why a call `get_ipython().<method>(*args)` (IPython's spelling of `%name line`,
    `%%name`, `!command`) is dynamic; `args` are the constant strings (None: computed)."""
    if method in ("system", "getoutput"):
        return f"runs a shell command (!): it {THREADS}"
    name = args[0] if args else None
    if not isinstance(name, str):
        return "runs an IPython magic whose name is computed"
    if method == "run_line_magic" and name in PLAIN_MAGICS and None not in args:
        return None
    sign = "%%" if method == "run_cell_magic" else "%"
    return f"runs the IPython magic {sign}{name}: the kernel runs its body as code"
