"""The referee's trust boundary, without kernels: data only crosses it, and lies earn nothing.

- The codec: every value a test sends or gets back round-trips; anything that is not data
  (pickle, unknown tags, classes outside bertcourse/torch.optim, objects built on the referee's
  side, over-large or over-deep messages, broken safetensors) is refused with `CodecError`, and
  reading it runs no code (a pickle payload that would create a file creates nothing).
- Forged kernels: the referee runs the toy assignment's real test cells (hidden tests included)
  against kernels that lie in every way we can think of; a check passes only when the numbers
  it got are the right ones, so a kernel that answers honestly for one part scores that part
  alone.
- The static rules: forbidden references found through aliases, helpers, defaults, tables,
  lambdas, decorators and module arguments; machinery and dynamic access reported; honest
  code (including the course's own solutions) reported clean.
"""

from __future__ import annotations

import base64
import json
import os
import pickle
import random
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
import pytest
import torch

from bertcourse import grading
from bertcourse.attention import BertSelfAttention
from bertcourse.config import BertConfig
from bertcourse.grade.assignment import CellSpec, NotebookSpec
from bertcourse.grade.boundary import codec, remote
from bertcourse.grade.boundary.referee import Referee, segments
from bertcourse.grading.rules import StudentCode

ROOT = Path(__file__).resolve().parents[1]
TOY = ROOT / "tests" / "hostile" / "course" / "solutions" / "toy" / "toy.ipynb"


# --- the codec ------------------------------------------------------------------------------


def _roundtrip(value, side="referee"):
    return codec.decode(codec.encode(value, side="kernel"), side)


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        0,
        -(2**70),
        1.5,
        float("inf"),
        "text é 中",
        [1, [2, (3, "x")]],
        {"a": 1, 2: [3.0], (1, "k"): None},
        torch.float16,
        torch.arange(12, dtype=torch.int32).reshape(3, 4),
        torch.randn(2, 3, dtype=torch.bfloat16),
        torch.randn(4, dtype=torch.float64)[::2],  # a view: sent as its values
        torch.tensor(3.5),
        torch.zeros(0, 5),
        torch.tensor([True, False]),
    ],
)
def test_codec_roundtrips_data(value) -> None:
    got = _roundtrip(value)
    if isinstance(value, torch.Tensor):
        assert got.dtype == value.dtype and torch.equal(got, value)
    elif isinstance(value, float) and value != value:
        assert got != got
    else:
        assert got == value and type(got) is type(value)


def test_codec_roundtrips_generators_and_random_state() -> None:
    g = torch.Generator().manual_seed(7)
    g2 = _roundtrip(g)
    assert torch.equal(torch.rand(5, generator=g), torch.rand(5, generator=g2))
    r = random.Random(3)
    r2 = _roundtrip(r)
    assert [r.random() for _ in range(3)] == [r2.random() for _ in range(3)]


def test_modules_are_rebuilt_only_on_the_kernel_side() -> None:
    torch.manual_seed(0)
    module = BertSelfAttention(BertConfig.tiny(hidden_size=16, num_attention_heads=4)).eval()
    text = codec.encode({"m": module})
    rebuilt = codec.decode(text, "kernel")["m"]
    x = torch.randn(1, 3, 16)
    assert torch.equal(rebuilt(x)[0], module(x)[0])
    with pytest.raises(codec.CodecError, match="unexpected tag"):
        codec.decode(text, "referee")  # the referee never builds an object from a message


def test_frozen_parameters_stay_frozen_across_the_boundary() -> None:
    """A parameter with requires_grad=False reaches the kernel frozen (chapter 6's groups keep
    frozen parameters: an answer that drops them must see them frozen to make its mistake)."""
    module = BertSelfAttention(BertConfig.tiny(hidden_size=16, num_attention_heads=4))
    module.query.requires_grad_(False)
    rebuilt = codec.decode(codec.encode({"m": module}), "kernel")["m"]
    assert {n: p.requires_grad for n, p in rebuilt.named_parameters()} == {
        n: p.requires_grad for n, p in module.named_parameters()
    }
    assert not rebuilt.query.weight.requires_grad and rebuilt.key.weight.requires_grad


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_a_module_keeps_its_dtype_across_the_boundary(dtype) -> None:
    torch.manual_seed(0)
    module = BertSelfAttention(BertConfig.tiny(hidden_size=16, num_attention_heads=4)).to(dtype)
    rebuilt = codec.decode(codec.encode({"m": module}), "kernel")["m"]
    for (name, got), want in zip(rebuilt.named_parameters(), module.parameters()):
        assert got.dtype == dtype and torch.equal(got, want), name


@pytest.mark.parametrize("side", ["referee", "kernel"])
def test_every_dtype_and_layout_crosses_unchanged(side) -> None:
    """The codec writes the safetensors format itself (not `safetensors.torch.save`): every
    dtype it allows, 0-d, empty, non-contiguous and odd-sized tensors side by side come back
    equal, with their dtype, shape and requires_grad (read back by the library's parser)."""
    gen = torch.Generator().manual_seed(3)
    values = [
        torch.randn(3, 5, generator=gen, dtype=torch.float64).t(),  # non-contiguous
        torch.tensor(2.5),  # 0-d
        torch.zeros(0, 4),  # empty
        torch.tensor([True, False, True]),  # 3 bytes, then wider dtypes
        torch.randn(7, generator=gen).half(),
        torch.randn(2, 3, generator=gen).bfloat16(),
        torch.randint(-100, 100, (5,), generator=gen, dtype=torch.int8),
        torch.randint(0, 255, (3,), generator=gen, dtype=torch.uint8),
        torch.randint(-9, 9, (2, 2), generator=gen, dtype=torch.int16),
        torch.randint(-9, 9, (3,), generator=gen, dtype=torch.int32),
        torch.randint(-(2**40), 2**40, (4,), generator=gen),
        torch.randn(4, generator=gen).requires_grad_(),
    ]
    assert {v.dtype for v in values} == set(codec.DTYPES.values())
    text = codec.encode(values, side)
    back = codec.decode(text, "referee" if side == "kernel" else "kernel")
    for want, got in zip(values, back, strict=True):
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.requires_grad == want.requires_grad
        assert torch.equal(got.detach(), want.detach())


def _message(value_tree, tensors: bytes = b"") -> str:
    return json.dumps({"v": 1, "value": value_tree, "tensors": base64.b64encode(tensors).decode()})


@pytest.mark.parametrize(
    "text, error",
    [
        ("not json", "not valid JSON"),
        ("[" * 100_000 + "]" * 100_000, "JSON"),
        (json.dumps({"v": 2, "value": 1, "tensors": ""}), "not a bertcourse"),
        (_message({"$pickle": "gASV"}), "unexpected tag"),
        (_message({"$tensor": "t9"}), "unknown tensor"),
        (_message({"$dict": [[[1], 2]]}), "not hashable"),
        (_message({"$module": "os.system", "config": {}, "state": {}}), "unexpected tag"),
        (_message({"a": 1, "b": 2}), "unexpected tag"),
        (json.dumps({"v": 1, "value": 1, "tensors": "!!notbase64"}), "safetensors"),
        (_message(None, b"\xff" * 64), "safetensors"),
    ],
)
def test_codec_refuses_what_is_not_data(text: str, error: str) -> None:
    with pytest.raises(codec.CodecError, match=error):
        codec.decode(text, "referee")


def test_codec_limits() -> None:
    deep: object = 0
    for _ in range(100):
        deep = [deep]
    with pytest.raises(codec.CodecError, match="nested"):
        codec.decode(_message(deep), "referee")
    with pytest.raises(codec.CodecError, match="larger than"):
        codec.decode(_message("x" * 100), "referee", codec.Limits(max_bytes=50))
    # a flat list or tuple of plain values counts every item, as a nested one does
    for flat in ([1] * 100, {"$tuple": [0.5] * 100}, [[1, "a", None]] * 40):
        with pytest.raises(codec.CodecError, match="too large"):
            codec.decode(_message(flat), "referee", codec.Limits(max_nodes=99))
    assert codec.decode(_message([1] * 98), "referee", codec.Limits(max_nodes=99)) == [1] * 98
    big = codec.encode(torch.zeros(1000), side="kernel")
    with pytest.raises(codec.CodecError, match="elements"):
        codec.decode(big, "referee", codec.Limits(max_tensor_elements=999))
    with pytest.raises(codec.CodecError, match="cannot be sent"):
        codec.encode(lambda: 1, side="kernel")
    with pytest.raises(codec.CodecError, match="class"):
        codec.decode(_message({"$module": "subprocess.Popen", "config": {}, "state": {}}), "kernel")


def test_frames_cross_a_socket_whole_and_within_their_limits() -> None:
    """The calls' socket carries one codec message per frame: large ones arrive whole, the end
    of the stream is None (between frames or within one), a frame over the reader's limit is
    refused from its header, and a silent kernel costs a `TimeoutError` at the deadline."""
    import socket
    import struct
    import time

    message = codec.encode({"x": torch.arange(3_000_000)}, side="kernel").encode()
    ours, theirs = socket.socketpair()
    with ours, theirs, ThreadPoolExecutor(1) as pool:
        sent = pool.submit(codec.write_frame, theirs, message)  # larger than the socket buffer
        assert codec.read_frame(ours, len(message)) == message
        sent.result()
        assert codec.decode(bytes(message), "referee")["x"].equal(torch.arange(3_000_000))
        start = time.monotonic()
        with pytest.raises(TimeoutError):
            codec.read_frame(ours, 100, until=start + 0.2)
        assert 0.15 < time.monotonic() - start < 5
        codec.write_frame(theirs, b"1234")
        with pytest.raises(codec.CodecError, match="larger than"):
            codec.read_frame(ours, 3)
    for rest in (b"", struct.pack("<Q", 10) + b"12345"):  # closed between frames, within one
        ours, theirs = socket.socketpair()
        with ours, theirs:
            theirs.sendall(rest)
            theirs.close()
            assert codec.read_frame(ours, 100, until=time.monotonic() + 5) is None


def test_the_calls_socket_never_follows_a_link_the_learner_swapped_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A thread of the learner's kernel may swap the calls' socket for a link to a host file
    while the grader (root) makes it: the worse race, right after `bind`, must leave the
    target's mode and owner alone, and a link already there is removed, not followed."""
    import socket
    import stat
    from types import SimpleNamespace

    from bertcourse.grade.boundary.execute import CALLS_SOCKET, NotebookRun

    target = tmp_path / "host_file"
    target.write_text("the gradebook, say")
    target.chmod(0o644)
    before = target.stat()
    folder = tmp_path / "kernel"
    folder.mkdir()
    uid = 65534 if os.geteuid() == 0 else None  # a chown to another user needs root
    run = NotebookRun.__new__(NotebookRun)
    run.jail = SimpleNamespace(dir=str(folder), caps=SimpleNamespace(uid=uid, gid=uid))
    path = folder / CALLS_SOCKET
    bind = socket.socket.bind

    def bind_then_swap(self: socket.socket, address: str) -> None:
        bind(self, address)
        os.unlink(address)
        os.symlink(target, address)  # the learner's thread wins the race

    path.symlink_to(target)  # and a link was there before
    monkeypatch.setattr(socket.socket, "bind", bind_then_swap)
    run._listen().close()
    after = target.stat()
    assert (after.st_mode, after.st_uid, after.st_gid) == (
        before.st_mode,
        before.st_uid,
        before.st_gid,
    )
    assert target.read_text() == "the gradebook, say" and path.is_symlink()
    monkeypatch.setattr(socket.socket, "bind", bind)
    listener = run._listen()  # the link is removed, a socket takes its place
    with listener:
        assert stat.S_ISSOCK(path.lstat().st_mode)
        assert uid is None or path.lstat().st_uid == uid


def test_reading_a_pickle_payload_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    payload = pickle.dumps(Evil())
    for text in (
        payload.decode("latin-1"),
        _message({"$tensor": "t0"}, payload),
        _message(base64.b64encode(payload).decode()),
    ):
        try:
            codec.decode(text, "referee")
        except codec.CodecError:
            pass
    assert not marker.exists()


# --- forged kernels -------------------------------------------------------------------------


def _toy_spec() -> NotebookSpec:
    nb = nbformat.read(TOY, as_version=4)
    cells = []
    for cell in nb.cells:
        md = cell.metadata["nbgrader"]
        cells.append(
            CellSpec(
                name=md["grade_id"],
                cell_type=cell.cell_type,
                locked=md["locked"],
                source=cell.source,
                visible_source=cell.source,
                checksum=None,
                grade=md["grade"],
                solution=md["solution"],
                task=md["task"],
                points=md.get("points"),
            )
        )
    return NotebookSpec("toy", cells, [])


def _honest_kernel(spec: NotebookSpec):
    """A kernel that runs the instructor's answers for real (through remote.serve)."""
    namespace: dict = {}
    for cell in spec.cells:
        if cell.cell_type == "code" and (cell.solution or (cell.locked and not cell.grade)):
            exec(cell.source, namespace)

    def send(request: str) -> str:
        old = remote._namespace
        remote._namespace = lambda: namespace
        try:
            return remote.serve(request)
        finally:
            remote._namespace = old

    return send


def _answers(spec: NotebookSpec) -> list[tuple[int, str]]:
    """The instructor's answer cells, as the learner's cells of an honest submission."""
    return [(i, c.source) for i, c in enumerate(spec.cells) if c.solution and c.cell_type == "code"]


def _grade(send, secret: bytes | None = b"k" * 32) -> dict[str, bool]:
    spec = _toy_spec()
    referee = Referee(spec, "toy", _answers(spec), send=send, secret=secret)
    passed = {}
    for cell in spec.cells:
        if cell.cell_type == "code" and cell.locked and not cell.grade:
            referee.run_setup(cell.name)
        elif cell.grade:
            passed[cell.name] = referee.run_test(cell.name, deadline=float("inf")).passed
    return passed


def _reply(result) -> str:
    return codec.encode({"ok": True, "result": result, "forbidden": []}, side="kernel")


def _request(text: str) -> dict:
    return codec.decode(text, "kernel")


FORGERS = {
    "zeros": lambda req: _reply(torch.zeros(3, 4)),
    "echo the input": lambda req: _reply(_request(req)["args"][0]),
    "a number": lambda req: _reply(1.0),
    "nothing": lambda req: _reply(None),
    "claims an error": lambda req: codec.encode(
        {"ok": False, "error": {"type": "X", "message": "y"}}, side="kernel"
    ),
    "not json": lambda req: "OK",
    "deep json": lambda req: "[" * 50_000 + "]" * 50_000,
    "a pickle": lambda req: pickle.dumps(torch.zeros(3)).decode("latin-1"),
    "empty": lambda req: "",
    "huge": lambda req: _reply("x" * 70_000_000),
    "raises": lambda req: (_ for _ in ()).throw(RuntimeError("kernel fell over")),
}


def test_the_honest_kernel_passes_everything() -> None:
    spec = _toy_spec()
    assert _grade(_honest_kernel(spec)) == {
        "scale_tests": True,
        "softmax_tests": True,
        "count_tests": True,
    }
    assert _grade(_honest_kernel(spec), secret=None) == _grade(_honest_kernel(spec))


@pytest.mark.parametrize("forger", list(FORGERS), ids=list(FORGERS))
def test_a_forging_kernel_scores_nothing(forger: str) -> None:
    assert _grade(FORGERS[forger]) == {
        "scale_tests": False,
        "softmax_tests": False,
        "count_tests": False,
    }


def test_a_kernel_scores_exactly_the_parts_whose_numbers_are_right() -> None:
    honest = _honest_kernel(_toy_spec())

    def half_honest(request: str) -> str:
        if _request(request)["fn"] == "scale":
            return honest(request)
        return _reply(torch.zeros(3, 4))

    assert _grade(half_honest) == {
        "scale_tests": True,
        "softmax_tests": False,
        "count_tests": False,
    }


def test_in_place_changes_of_a_direct_call_cannot_move_the_expected_value() -> None:
    """`check_value(count_positive(x), int((x > 0).sum()))`: a kernel that zeroes x and answers
    0 must not pass (the expected value is computed after the call, from the referee's x)."""
    honest = _honest_kernel(_toy_spec())

    def zeroing(request: str) -> str:
        call = _request(request)
        if call["fn"] != "count_positive":
            return honest(request)
        zeros = tuple(torch.zeros_like(a) for a in call["args"])
        return codec.encode(
            {"ok": True, "result": 0, "forbidden": [], "args_after": (zeros, {})}, side="kernel"
        )

    assert _grade(zeroing) == {"scale_tests": True, "softmax_tests": True, "count_tests": False}


def test_hidden_inputs_follow_the_referee_key() -> None:
    """The hidden region's inputs depend on the key, the visible ones do not."""
    seen: dict[bytes, list] = {}
    for key in (b"a" * 32, b"b" * 32):
        honest = _honest_kernel(_toy_spec())

        def recording(request: str, key=key, honest=honest) -> str:
            seen.setdefault(key, []).append(_request(request)["args"])
            return honest(request)

        assert all(_grade(recording, secret=key).values())
    first, second = seen[b"a" * 32], seen[b"b" * 32]
    assert torch.equal(first[0][0], second[0][0])  # scale's visible input
    assert not torch.equal(first[1][0], second[1][0])  # scale's hidden input


def test_hidden_failures_do_not_show_expected_values() -> None:
    spec = _toy_spec()
    honest = _honest_kernel(spec)
    calls = {"n": 0}

    def wrong_on_hidden(request: str) -> str:
        calls["n"] += 1
        if _request(request)["fn"] == "scale" and calls["n"] == 2:
            return _reply(torch.zeros(2, 5, 7))
        return honest(request)

    referee = Referee(spec, "toy", _answers(spec), send=wrong_on_hidden, secret=b"k" * 32)
    referee.run_setup("setup")
    outcome = referee.run_test("scale_tests", deadline=float("inf"))
    assert not outcome.passed and outcome.hidden_failure
    assert outcome.message.startswith("a hidden test failed: scale(x=Tensor(2, 5, 7)")
    assert "expected" not in outcome.message and "error" not in outcome.message


def test_segments_split_the_hidden_region() -> None:
    source = "a = 1\n### BEGIN HIDDEN TESTS\nb = 2\n### END HIDDEN TESTS\nc = 3\n"
    assert segments(source) == [("a = 1\n", False), ("b = 2\n", True), ("\nc = 3\n", False)]


def test_mirror_copies_in_place_changes_back() -> None:
    x = torch.zeros(3)
    items = [1, 2, 3]
    remote.mirror((x, items), (torch.ones(3), [1, 2]))
    assert torch.equal(x, torch.ones(3)) and items == [1, 2]
    with pytest.raises(grading.GradingError, match="changed in place"):
        remote.mirror(torch.zeros(3), torch.zeros(4))


# --- the static rules -----------------------------------------------------------------------

SDPA = grading.forbid._expand("sdpa")
SOFTMAX = ["torch.softmax", "torch.nn.functional.softmax", "torch.Tensor.softmax"]


def _violations(source: str, forbidden=SOFTMAX, args=(), name="f") -> list[str]:
    return [f.what for f in StudentCode([(0, source)]).violations(name, forbidden, args, {})]


@pytest.mark.parametrize(
    "source",
    [
        "import torch\ndef f(x):\n    return torch.softmax(x, -1)",
        "import torch as T\ndef f(x):\n    return T.softmax(x, -1)",
        "from torch import softmax\ndef f(x):\n    return softmax(x, -1)",
        "import torch.nn.functional as F\ndef f(x):\n    return F.softmax(x, -1)",
        "from torch.nn import functional as Fn\ndef f(x):\n    return Fn.softmax(x, -1)",
        "def f(x):\n    return x.softmax(-1)",
        "import torch\ndef f(x):\n    return getattr(torch, 'softmax')(x, -1)",
        "import torch\nh = torch.softmax\ndef f(x):\n    return h(x, -1)",
        "import torch\ndef g(x):\n    return torch.softmax(x, -1)\ndef f(x):\n    return g(x)",
        "import torch\ndef f(x, s=torch.softmax):\n    return s(x, -1)",
        "import torch\nT = {'s': torch.softmax}\ndef f(x):\n    return T['s'](x, -1)",
        "import torch\nclass C:\n    s = staticmethod(torch.softmax)\ndef f(x):\n    return C.s(x, -1)",
        "def f(x):\n    import torch\n    return torch.softmax(x, -1)",
        "import torch\ndef f(x):\n    return getattr(torch, 'soft' + 'max')(x, -1)",
        "def f(x):\n    return eval('x.soft' + 'max(-1)')",
        "import importlib\ndef f(x):\n    return importlib.import_module('torch').softmax(x, -1)",
        "def f(x):\n    return globals()['torch'].softmax(x, -1)",
        "import sys\ndef f(x):\n    return sys.modules['torch'].softmax(x, -1)",
        "def f(x):\n    return __import__('torch').softmax(x, -1)",
        "import torch\n@(lambda fn: lambda x: torch.softmax(x, -1))\ndef f(x):\n    return x",
    ],
)
def test_hidden_forbidden_calls_are_found(source: str) -> None:
    assert _violations(source), source


def test_module_arguments_whose_forward_is_forbidden() -> None:
    module = BertSelfAttention(BertConfig.tiny(hidden_size=16, num_attention_heads=4))
    for body in ("module(x)", "module.forward(x)", "m = module\n    return m(x)"):
        source = (
            f"def f(module, x):\n    return {body}"
            if "\n" not in body
            else f"def f(module, x):\n    {body}"
        )
        assert _violations(
            source, SDPA + ["bertcourse.attention.BertSelfAttention.forward"], (module, None)
        ), body
    clean = "def f(module, x):\n    return module.query(x) + module.key(x)"
    assert (
        _violations(clean, ["bertcourse.attention.BertSelfAttention.forward"], (module, None)) == []
    )


@pytest.mark.parametrize(
    "source, kind",
    [
        ("import gc", "machinery"),
        ("import inspect", "machinery"),
        ("import ctypes", "machinery"),
        ("import builtins", "machinery"),
        ("import sys\nsys._getframe(0)", "machinery"),
        ("import sys\nsys.settrace(None)", "machinery"),
        ("import sys\nsys.addaudithook(print)", "machinery"),
        ("import sys\nprint(sys.modules)", "machinery"),
        ("get_ipython().events", "machinery"),
        ("from torch.overrides import TorchFunctionMode", "machinery"),
        ("class A:\n    def __torch_function__(self, *a):\n        pass", "machinery"),
        ("import torch\ntorch.allclose = lambda *a: True", "machinery"),
        ("from bertcourse import grading", "machinery"),
        ("def f():\n    pass\nf.__code__ = None", "machinery"),
        (
            "import torch\nwith torch.autograd.graph.saved_tensors_hooks(id, id):\n    pass",
            "machinery",
        ),
        ("from torch.autograd.graph import saved_tensors_hooks", "machinery"),
        ("exec('1')", "dynamic"),
        ("x = getattr(object, 'a' + 'b', None)", "dynamic"),
        ("import importlib", "dynamic"),
        ("from operator import attrgetter", "dynamic"),
    ],
)
def test_machinery_and_dynamic_access_are_reported(source: str, kind: str) -> None:
    code = StudentCode([(3, source)])
    found = code.machinery() if kind == "machinery" else code.dynamic()
    assert found and found[0].cell == 3, (source, kind)


def test_the_course_solutions_are_clean() -> None:
    """No false alarm on the instructor's own answers of every assignment."""
    sys.path.insert(0, str(ROOT / "solutions"))
    import _build_notebooks as builder

    for name in builder.assignment_names():
        nb = builder.build_notebook(name)
        cells = [
            (i, c.source)
            for i, c in enumerate(nb.cells)
            if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("solution")
        ]
        code = StudentCode(cells)
        assert code.machinery() == [] and code.dynamic() == [], (
            name,
            code.machinery(),
            code.dynamic(),
        )


@pytest.mark.parametrize(
    "message, shown, hidden",
    [
        (
            "basic_tokenize(text='ΟΔΟΣ ΟΔΟΣ.') returned a wrong result: expected ['οδος']",
            "basic_tokenize(text=",
            ["ΟΔΟΣ", "οδος"],
        ),
        (
            "num_predictions(seq_len=37, masked_lm_prob=0.15) returned 6: This is what halves rounded up gives",
            "halves rounded up",
            ["37", "0.15"],
        ),
        (
            "pair(ids_a=[101, 7592], ids_b=list of 9 int, max_length=12) failed",
            "list of 9 int",
            ["7592", "12"],
        ),
        (
            "sdpa(q=Tensor(2, 3, 4) float32) returned a wrong result: got 0.5",
            "Tensor(2, 3, 4) float32",
            ["0.5"],
        ),
    ],
)
def test_a_hidden_failure_shows_the_call_but_no_input_value(message, shown, hidden) -> None:
    from bertcourse.grade.boundary.referee import _hidden_message

    text = _hidden_message(grading.GradingError(message))
    assert shown in text, text
    assert not any(value in text for value in hidden), text


def test_a_modules_train_or_eval_mode_comes_back_after_a_call() -> None:
    """A function that leaves a module (or one submodule) in another mode is seen doing so."""
    module = BertSelfAttention(BertConfig.tiny(hidden_size=16, num_attention_heads=4)).train()
    kernel_side = codec.decode(codec.encode({"m": module}), "kernel")["m"]
    kernel_side.eval()
    kernel_side.query.train()
    after = codec.decode(codec.encode(kernel_side, side="kernel"), "referee")
    remote.mirror(module, after)
    assert not module.training and module.query.training and not module.key.training


def test_a_set_crosses_the_boundary_and_an_unhashable_one_is_refused() -> None:
    assert codec.decode(codec.encode({"ids": {102, 101}}), "kernel")["ids"] == {101, 102}
    with pytest.raises(codec.CodecError, match="not hashable"):
        codec.decode(_message({"$set": [[1, 2]]}), "kernel")


# --- the allow-list: a mutation-style test of the rules -------------------------------------

# How a forbidden object can reach the graded function `f`: `{imp}` imports its module as `m`,
# `{obj}` is the object's expression through `m`, `{first}`/`{rest}` split its attribute path.
BINDINGS = {
    "direct": "{imp}\ndef f(x):\n    return {obj}(x)",
    "from import as": "from {mod} import {first} as g0\ndef f(x):\n    return g0{rest}(x)",
    "global alias": "{imp}\ng = {obj}\ndef f(x):\n    return g(x)",
    "default": "{imp}\ndef f(x, g={obj}):\n    return g(x)",
    "closure": "{imp}\ndef make():\n    g = {obj}\n    def f(x):\n        return g(x)\n    return f\nf = make()",
    "class attribute": "{imp}\nclass C:\n    g = staticmethod({obj})\ndef f(x):\n    return C.g(x)",
    "class attribute set later": "{imp}\nclass C:\n    pass\nC.g = {obj}\ndef f(x):\n    return C.g(x)",
    "dict": "{imp}\nT = {{'a': {obj}}}\ndef f(x):\n    return T['a'](x)",
    "for target": "{imp}\nfor g in [{obj}]:\n    pass\ndef f(x):\n    return g(x)",
    "with target": "{imp}\nimport contextlib\nwith contextlib.nullcontext({obj}) as g:\n    pass\ndef f(x):\n    return g(x)",
    "walrus": "{imp}\nif (g := {obj}):\n    pass\ndef f(x):\n    return g(x)",
    "walrus in a comprehension": "{imp}\n[(g := h) for h in [{obj}]]\ndef f(x):\n    return g(x)",
    "global in a helper": "{imp}\ndef setup():\n    global g\n    g = {obj}\nsetup()\ndef f(x):\n    return g(x)",
    "appended in another cell": [
        "fns = []",
        "{imp}\nfns.append({obj})",
        "def f(x):\n    return fns[0](x)",
    ],
    "appended through an alias": [
        "fns = []\nother = fns",
        "{imp}\nother.append({obj})",
        "def f(x):\n    return fns[0](x)",
    ],
    "registered by a helper": "fns = []\ndef register(h):\n    fns.append(h)\n{imp}\nregister({obj})\ndef f(x):\n    return fns[0](x)",
    "alias re-imported in a function never run": "{imp}\ndef never():\n    import math as m\ndef f(x):\n    return {obj}(x)",
    "star import": "from {mod} import *\ndef f(x):\n    return {attr}(x)",
    "star import, name defined later": "from {mod} import *\ng = {first}\ndef {first}(x):\n    return x\ndef f(x):\n    return g{rest}(x)",
    "getattr with a constant": "{imp}\ndef f(x):\n    return getattr(m, '{first}'){rest}(x)",
    "getattr as a value": "import functools\n{imp}\ndef f(x):\n    return functools.reduce(getattr, {parts!r}, m)(x)",
    "a module as a value": "{imp}\ndef f(x):\n    k = m\n    return k.{attr}(x)",
    "a lambda": "{imp}\nf = lambda x: {obj}(x)",
    "the function is the object": "{imp}\nf = {obj}",
    "imported as the function": "from {mod} import {first} as f",
    "a shell escape line": "out = !echo hi\n{imp}\ndef f(x):\n    return {obj}(x)",
    "a modulo continuation": "{imp}\ny = (7\n% 3)\ndef f(x):\n    return {obj}(x)",
}

# Other ways to the same computation, outside every allow-list.
ENTRY_POINTS = {
    "torch.ops.aten": "torch.ops.aten._softmax",
    "torch._decomp": "torch._decomp.decomposition_table",
    "torch._C._nn": "torch._C._nn.nll_loss2d",
    "a private torch.optim helper": "torch.optim.adam._single_tensor_adam",
    "a private bertcourse helper": "bertcourse.attention._check_mask",
    "a registry": "transformers.optimization.TYPE_TO_SCHEDULER_FUNCTION",
    "forward-mode autodiff": "torch.func.jacfwd",
    "torch.autograd.functional": "torch.autograd.functional.vjp",
}


def _group_target(group: str) -> tuple[str, str]:
    """(module, attribute path) of the group's first forbidden name that resolves."""
    for path in grading.FORBIDDEN[group]:
        parts = path.split(".")
        for i in range(len(parts) - 1, 0, -1):
            module = ".".join(parts[:i])
            try:
                obj = __import__(module, fromlist=["_"])
            except ImportError:
                continue
            try:
                for attr in parts[i:]:
                    obj = getattr(obj, attr)
            except AttributeError:
                break
            return module, ".".join(parts[i:])
    raise AssertionError(group)


def _found(cells, forbidden) -> tuple[list, list]:
    code = StudentCode(list(enumerate(cells)))
    return code.violations("f", forbidden, (), {}), code.dynamic()


@pytest.mark.parametrize("group", sorted(grading.FORBIDDEN))
def test_every_binding_form_of_a_forbidden_function_costs_the_part(group: str) -> None:
    """For each forbidding part, its forbidden function through each binding form gives 0
    (the call fails) and, where the rules cannot tell, needs_review."""
    module, attr = _group_target(group)
    forbidden = grading.forbid._expand(group)
    first, _, rest = attr.partition(".")
    fields = dict(
        imp=f"import {module} as m",
        obj=f"m.{attr}",
        mod=module,
        attr=attr,
        first=first,
        rest=f".{rest}" if rest else "",
        parts=attr.split("."),
    )
    missed = []
    for form, template in BINDINGS.items():
        cells = [template] if isinstance(template, str) else template
        found, dynamic = _found([c.format(**fields) for c in cells], forbidden)
        if not found and not dynamic:
            missed.append(form)
    assert missed == [], (group, missed)
    # an unreadable cell is never skipped
    _, dynamic = _found([f"import {module} as m\ndef f(x):\n    return m.{attr}(x)\n)("], forbidden)
    assert dynamic and "does not parse" in dynamic[0].what


@pytest.mark.parametrize("group", sorted(grading.FORBIDDEN))
def test_every_entry_point_outside_the_allow_list_needs_review(group: str) -> None:
    forbidden = grading.forbid._expand(group)
    for what, path in ENTRY_POINTS.items():
        module, _, name = path.rpartition(".")
        for source in (
            f"import torch, bertcourse.attention, transformers.optimization\ndef f(x):\n    return {path}(x)",
            f"from {module} import {name} as h\ndef f(x):\n    return h(x)",
        ):
            found, _ = _found([source], forbidden)
            assert found, (group, what, source)


@pytest.mark.parametrize(
    "group, path",
    [
        ("sdpa", "torch.nn.modules.activation.F.scaled_dot_product_attention"),
        ("log_softmax", "torch.nn.modules.activation.F.log_softmax"),
        ("cross_entropy", "torch.nn.modules.loss.F.cross_entropy"),
    ],
)
def test_a_re_export_is_the_same_forbidden_object(group: str, path: str) -> None:
    found, _ = _found(
        [f"import torch\ndef f(x):\n    return {path}(x)"], grading.forbid._expand(group)
    )
    assert any(not f.review and "write yourself" in f.what for f in found), found


def test_honest_building_blocks_are_allowed() -> None:
    """The allow-list is not a wall: tensor code, math, the learner's own helpers and locals,
    comprehensions, classes and a magic outside the graded code give nothing."""
    source = (
        "import math\nimport torch\n%matplotlib inline\n"
        "EPS = 1e-9\n"
        "def helper(x):\n    return x - x.amax(dim=-1, keepdim=True)\n"
        "class Scale:\n    factor = 2.0\n    def apply(self, x):\n        return x * self.factor\n"
        "def f(x, dim=-1):\n"
        "    shifted = helper(x)\n"
        "    rows = [r.exp().sum() for r in shifted]\n"
        "    z = torch.stack(rows).log().unsqueeze(-1) + math.log(1.0) + EPS * 0\n"
        "    return Scale().apply(shifted - z) / 2.0\n"
    )
    found, dynamic = _found([source], grading.forbid._expand("log_softmax"))
    assert found == [] and dynamic == [], (found, dynamic)


def test_a_review_finding_marks_the_code_and_names_its_line() -> None:
    code = StudentCode(
        [
            (
                2,
                "import torch\ndef f(x):\n    y = x\n    return torch.ops.aten._softmax(y, -1, False)",
            )
        ]
    )
    found = code.violations("f", grading.forbid._expand("log_softmax"), (), {})
    assert {(f.cell, f.line) for f in found} == {(2, 4)} and any(f.review for f in found)
    assert code.review == {f for f in found if f.review}


def test_the_kernel_refuses_a_graded_function_that_is_the_forbidden_object() -> None:
    namespace = {"f": torch.nn.functional.scaled_dot_product_attention}
    request = codec.encode(
        {"fn": "f", "args": (torch.zeros(1, 2, 3),) * 3, "kwargs": {}, "use_reference": {},
         "forbid": grading.forbid._expand("sdpa")}
    )  # fmt: skip
    old = remote._namespace
    remote._namespace = lambda: namespace
    try:
        reply = codec.decode(remote.serve(request), "referee")
    finally:
        remote._namespace = old
    assert reply["forbidden"] == ["torch.nn.functional.scaled_dot_product_attention"]


def _spec_of(nb, name: str) -> NotebookSpec:
    cells = []
    for i, cell in enumerate(nb.cells):
        md = cell.metadata.get("nbgrader", {})
        cells.append(
            CellSpec(
                name=md.get("grade_id", f"cell{i}"),
                cell_type=cell.cell_type,
                locked=md.get("locked", False),
                source=cell.source,
                visible_source=cell.source,
                checksum=None,
                grade=md.get("grade", False),
                solution=md.get("solution", False),
                task=md.get("task", False),
                points=md.get("points"),
            )
        )
    return NotebookSpec(name, cells, [])


class _Stop(Exception):
    pass


def _stop(request: str) -> str:
    raise _Stop


def test_the_course_answers_pass_the_allow_list() -> None:
    """Calibration of the allow-list: every forbidding call of every test cell, with the
    instructor's answers and with each alternative answer of tests/exercise_answers/ (correct,
    written differently), gives no finding. (The referee runs the set-up cells and each test
    cell up to its first call, which is stopped after the rules have judged it.)"""
    sys.path.insert(0, str(ROOT / "solutions"))
    sys.path.insert(0, str(ROOT / "tests"))
    import _build_notebooks as builder
    from test_exercises import load_answers

    bad, forbidding = [], 0
    for name in builder.assignment_names():
        spec = _spec_of(builder.build_notebook(name), name)
        answers = {
            i: c.source for i, c in enumerate(spec.cells) if c.solution and c.cell_type == "code"
        }
        index = {c.name: i for i, c in enumerate(spec.cells)}
        referee = Referee(spec, name, sorted(answers.items()), send=_stop, secret=b"k" * 32)
        for cell in spec.cells:
            if cell.cell_type == "code" and cell.locked and not cell.grade:
                referee.run_setup(cell.name)
        assert referee.setup_error is None, referee.setup_error
        setup = [c.source for c in spec.cells if c.cell_type == "code" and c.locked and not c.grade]
        variants = [("solution", answers)] + [
            (f"alternative {a.grade_id}: {a.label}", {**answers, index[a.grade_id]: a.source})
            for a in load_answers(name)
            if a.kind == "alternative"
        ]
        for label, cells in variants:
            code = StudentCode(sorted(cells.items()), context=setup)
            referee.code = referee.session.code = code
            judged = []
            violations = code.violations

            def recording(fn, forbidden, *args, violations=violations, judged=judged, **kw):
                found = violations(fn, forbidden, *args, **kw)
                judged.append((fn, bool(forbidden), found))
                return found

            code.violations = recording
            for cell in spec.cells:
                if cell.grade and cell.cell_type == "code":
                    referee.run_test(cell.name, deadline=float("inf"))
            forbidding += sum(f for _, f, _ in judged)
            bad += [
                (name, label, fn, [f.describe() for f in found]) for fn, _, found in judged if found
            ]
    assert bad == [], bad
    assert forbidding >= 40  # the test really judged the forbidding parts


def test_a_call_past_its_time_limit_is_timed_out_whatever_the_message() -> None:
    """The fact travels in the outcome (`timed_out`), not in the wording of a message."""
    spec = _toy_spec()

    def slow(request: str) -> str:
        raise TimeoutError("deadline")  # no "did not finish within" in it

    referee = Referee(spec, "toy", _answers(spec), send=slow, secret=b"k" * 32)
    referee.run_setup("setup")
    outcome = referee.run_test("scale_tests", deadline=float("inf"))
    assert not outcome.passed and outcome.timed_out
    late = referee.run_test("scale_tests", deadline=0.0)
    assert not late.passed and late.timed_out


def _serve(fn, args, forbid) -> dict:
    request = codec.encode(
        {"fn": "f", "args": args, "kwargs": {}, "use_reference": {}, "forbid": grading.forbid._expand(forbid)}
    )  # fmt: skip
    old = remote._namespace
    remote._namespace = lambda: {"f": fn}
    try:
        return codec.decode(remote.serve(request), "referee")
    finally:
        remote._namespace = old


@pytest.mark.parametrize(
    "forbid, fn",
    [
        ("log_softmax", lambda x: torch.ops.aten._log_softmax(x, -1, False)),
        ("log_softmax", lambda x: x - torch.ops.aten.logsumexp(x, [-1], True)),
        ("sdpa", lambda x: torch.ops.aten.scaled_dot_product_attention(x, x, x)),
        (
            "cross_entropy",
            lambda x: torch.ops.aten.nll_loss_nd(
                x.reshape(-1, 3).log_softmax(-1), torch.zeros(4, dtype=torch.long), None, 1, -100
            ),
        ),
    ],
)
def test_the_kernel_trace_flags_forbidden_aten_operators_whatever_the_name(forbid, fn) -> None:
    reply = _serve(fn, (torch.randn(2, 2, 3),), forbid)
    assert any(f.startswith("the ATen operator aten::") for f in reply["forbidden"]), reply


def test_the_kernel_trace_leaves_honest_code_alone() -> None:
    def log_softmax(x):
        shifted = x - x.amax(dim=-1, keepdim=True)
        return shifted - shifted.exp().sum(dim=-1, keepdim=True).log()

    x = torch.randn(2, 3)
    reply = _serve(log_softmax, (x,), "log_softmax")
    assert reply["ok"] and reply["forbidden"] == []
    assert torch.allclose(reply["result"], torch.log_softmax(x, -1), atol=1e-6)


def test_the_kernel_trace_does_not_count_an_earlier_parts_reference() -> None:
    """A reference standing for an earlier part (use_reference) may run a forbidden operator:
    it is not the learner's code."""
    namespace: dict = {}
    exec("def f(x):\n    return helper(x, -1) + 1", namespace)
    request = codec.encode(
        {"fn": "f", "args": (torch.randn(2, 3),), "kwargs": {},
         "use_reference": {"helper": "torch.log_softmax"}, "forbid": ["torch.log_softmax"]}
    )  # fmt: skip
    old = remote._namespace
    remote._namespace = lambda: namespace
    try:
        reply = codec.decode(remote.serve(request), "referee")
    finally:
        remote._namespace = old
    assert reply["ok"] and reply["forbidden"] == [], reply


# --- autograd properties across the boundary (grading.probe) ---------------------------------


def _course_tests(assignment: str, replaced: dict[str, str]) -> tuple[dict, dict]:
    """(referee, in process) outcome of each test cell of `assignment`, with the answer cells
    in `replaced` (grade id -> source) replaced: test cell id -> None when it passed, else the
    message. The referee's kernel is `remote.serve` over a namespace that ran only the set-up
    and answer cells, in a thread of its own (autograd's mode and saved-tensor hooks are per
    thread, as they are per process), so nothing but codec data reaches the test cells."""
    sys.path.insert(0, str(ROOT / "solutions"))
    sys.path.insert(0, str(ROOT / "tests"))
    import _build_notebooks as builder
    from test_exercises import run_in_process

    nb = nbformat.read(builder.notebook_path(assignment), as_version=4)
    spec = _spec_of(nb, assignment)
    answers = {
        i: replaced.get(c.name, c.source)
        for i, c in enumerate(spec.cells)
        if c.solution and c.cell_type == "code"
    }
    namespace: dict = {"__name__": "__main__"}
    for i, cell in enumerate(spec.cells):
        if cell.cell_type == "code" and (i in answers or (cell.locked and not cell.grade)):
            exec(compile(answers.get(i, cell.source), f"<kernel {cell.name}>", "exec"), namespace)

    def send(request: str) -> str:
        return kernel.submit(remote.serve, request).result()

    referee = Referee(spec, assignment, sorted(answers.items()), send=send, secret=b"k" * 32)
    judged = {}
    old = remote._namespace
    remote._namespace = lambda: namespace
    kernel = ThreadPoolExecutor(max_workers=1)  # one thread: its autograd state persists
    try:
        with torch.random.fork_rng(devices=[]):
            for cell in spec.cells:
                if cell.cell_type == "code" and cell.locked and not cell.grade:
                    referee.run_setup(cell.name)
                elif cell.grade and cell.cell_type == "code":
                    outcome = referee.run_test(cell.name, deadline=float("inf"))
                    judged[cell.name] = None if outcome.passed else outcome.message
    finally:
        remote._namespace = old
        kernel.shutdown()
    assert referee.setup_error is None, referee.setup_error
    return judged, run_in_process(nb, replaced)


def _bank(assignment: str, label: str) -> dict[str, str]:
    sys.path.insert(0, str(ROOT / "tests"))
    from test_exercises import load_answers

    (answer,) = [a for a in load_answers(assignment) if a.label.startswith(label)]
    return {answer.grade_id: answer.source}


@pytest.mark.parametrize(
    "assignment, label, part, message",
    [
        ("ch07_assembly", None, None, None),
        ("ch07_assembly", "the tied weight read through .data", "mlm_head_tests", "tied decoder weight"),
        ("ch07_assembly", "the decoder product under torch.no_grad()", "mlm_head_tests", "tied decoder weight"),
        ("ch07_assembly", "the MLM loss from detached logits", "forward_tests", "gradients of the model weights"),
        ("ch07_assembly", "runs under torch.no_grad()", "forward_tests", "no autograd graph"),
        ("ch08_finetuning", None, None, None),
        ("ch08_finetuning", "no torch.no_grad(), the logits detached", "eval_tests", "recorded an autograd graph"),
        ("ch08_finetuning", "torch.set_grad_enabled(False) left on", "eval_tests", "left gradients disabled"),
        ("ch08_finetuning", "no torch.no_grad() (a graph", "eval_tests", "the logits carry an autograd graph"),
    ],
)  # fmt: skip
def test_autograd_properties_cost_their_part_under_the_referee_and_in_process(
    assignment, label, part, message
) -> None:
    """A graph does not cross the codec: `grading.probe.measure` takes the measurement in the
    kernel and the referee compares values. The same test cell gives the same verdict in
    process (nbgrader, the learner's notebook) and under the referee: the solution passes
    every part, each wrong answer fails exactly its part, for the property's reason."""
    replaced = _bank(assignment, label) if label else {}
    judged, in_process = _course_tests(assignment, replaced)
    for where, results in (("referee", judged), ("in process", in_process)):
        failed = {k: v for k, v in results.items() if v is not None}
        assert set(failed) == ({part} if part else set()), (where, failed)
        if part:
            assert message in failed[part], (where, failed[part])


def _probe_serve(fn, args, probe) -> dict:
    request = codec.encode(
        {"fn": "f", "args": args, "kwargs": {}, "use_reference": {}, "forbid": [], "probe": probe.as_data()}
    )  # fmt: skip
    old = remote._namespace
    remote._namespace = lambda: {"f": fn}
    try:
        return codec.decode(remote.serve(request), "referee")
    finally:
        remote._namespace = old


def test_the_kernel_measures_autograd_and_restores_its_mode() -> None:
    from bertcourse.grading.probe import Probe

    x = torch.randn(5, 3)

    def leaves_no_grad(x):
        torch.set_grad_enabled(False)
        return x * 2

    reply = _probe_serve(leaves_no_grad, (x,), Probe())
    assert reply["ok"] and reply["probe"]["grad_enabled"] == (True, False)
    assert torch.is_grad_enabled()  # the kernel's mode is restored after the measurement

    def detached(x):
        return torch.tanh(x.requires_grad_()).detach()

    reply = _probe_serve(detached, (x.clone(),), Probe())
    assert reply["probe"]["graph"] == (False,) and reply["probe"]["saved"] >= 1

    def wrong_count(module, x):
        return x, x

    attention = BertSelfAttention(BertConfig(vocab_size=10, hidden_size=4, num_attention_heads=1))
    reply = _probe_serve(wrong_count, (attention, x), Probe((torch.ones(5, 3),), 0))
    assert "f returned 2 tensor(s)" in reply["probe_error"]

    def tied(module, x):  # a gradient for every trainable parameter, by name; .grad untouched
        return x @ module.query.weight[:, :3].T

    reply = _probe_serve(tied, (attention, x), Probe((torch.ones(5, 4),), 0))
    grads = reply["probe"]["grads"]
    assert torch.allclose(grads["query.weight"][:, :3], torch.ones(5, 4).T @ x)
    assert grads["key.weight"] is None and reply["args_after"][0][0].grads == {}


def test_a_forged_measurement_is_refused_or_compared() -> None:
    """The referee builds a Measurement only from plain, well-typed values, and the gradients
    in it are compared with its own reference (a forged gradient must be the right one)."""
    from bertcourse.grading.probe import measurement

    for forged in (None, {"graph": [True], "saved": 0, "grad_enabled": (True, True), "grads": None},
                   {"graph": (True,), "saved": -1, "grad_enabled": (True, True), "grads": None},
                   {"graph": (True,), "saved": True, "grad_enabled": (True, True), "grads": None},
                   {"graph": (True,), "saved": 0, "grad_enabled": (True,), "grads": None},
                   {"graph": (True,), "saved": 0, "grad_enabled": (True, True), "grads": {"w": 1.0}}):  # fmt: skip
        with pytest.raises(grading.GradingError, match="measurement is not valid"):
            measurement(None, forged)


def test_the_exec_mode_preload_imports_and_binds_nothing() -> None:
    """Without a zygote the kernel imports the instructor's modules before the notebook's clock
    starts (a cold `import torch` must not count against the first cell's limit)."""
    from bertcourse.grade.boundary.execute import preload_code

    namespace: dict = {}
    sys.modules.pop("colorsys", None)
    exec(preload_code(("colorsys", "no_such_module_here", "json")), namespace)
    assert "colorsys" in sys.modules and set(namespace) == {"__builtins__"}
