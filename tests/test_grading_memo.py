"""`grading.once`: a test cell's own reference computation, done once for equal inputs.

The referee's worker runs the same test cell for hundreds of students in fresh namespaces; a
cached result must be exactly what a fresh call gives, and nothing that can differ between
students (a learner's function in the namespace, other inputs) may hit the cache."""

from __future__ import annotations

import copy
import types

import pytest
import torch

from bertcourse import BertConfig, BertForPreTraining
from bertcourse.grading import memo

CELL = '''
import torch

def reference(model, batch, *, lr):
    """Trains a copy in place and returns what the test needs (counted in `counter`)."""
    counter.calls += 1
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    model(input_ids=batch, labels=batch).loss.backward()
    optimizer.step()
    return [p.detach().clone() for p in model.parameters()]
'''


def _namespace() -> dict:
    """A fresh namespace with the cell executed, as the referee does for each student; its
    `counter` (a module: a global the cache allows) counts the calls."""
    counter = types.ModuleType("counter")
    counter.calls = 0
    namespace: dict = {"__name__": "__referee__", "counter": counter}
    exec(compile(CELL, "<test cell>", "exec"), namespace)
    return namespace


def _inputs(seed: int = 0):
    torch.manual_seed(seed)
    config = BertConfig.tiny(
        vocab_size=20,
        hidden_size=8,
        num_attention_heads=2,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    model = BertForPreTraining(config).double()
    return model, torch.randint(5, 20, (2, 5))


@pytest.fixture(autouse=True)
def _empty_cache():
    memo._results.clear()
    memo._drawing.clear()
    yield
    memo._results.clear()
    memo._drawing.clear()


def test_equal_inputs_in_fresh_namespaces_compute_once_and_give_the_fresh_result() -> None:
    model, batch = _inputs()
    fresh = _namespace()["reference"](copy.deepcopy(model), batch, lr=0.1)
    counted = []
    for _ in range(3):  # three students: the cell run again each time
        ns = _namespace()
        got = memo.once(ns["reference"], copy.deepcopy(model), batch.clone(), lr=0.1)
        counted.append(ns["counter"].calls)
        assert all(torch.equal(g, f) for g, f in zip(got, fresh, strict=True))
        got[0].add_(1.0)  # a test that changes its copy changes nobody else's
    assert counted == [1, 0, 0]


@pytest.mark.parametrize(
    "change",
    ["weights", "batch", "lr", "dropout", "mode"],
)
def test_any_input_that_differs_computes_again(change: str) -> None:
    model, batch = _inputs()
    first = _namespace()
    memo.once(first["reference"], copy.deepcopy(model), batch, lr=0.1)
    other_model, lr = copy.deepcopy(model), 0.1
    if change == "weights":
        with torch.no_grad():
            next(other_model.parameters())[0, 0] += 1e-12
    elif change == "batch":
        batch = batch.clone()
        batch[0, 0] = (batch[0, 0] + 1) % 20
    elif change == "lr":
        lr = 0.2
    elif change == "dropout":
        other_model.config.hidden_dropout_prob = 0.5
    elif change == "mode":
        other_model.eval()
    ns = _namespace()
    memo.once(ns["reference"], other_model, batch, lr=lr)
    assert ns["counter"].calls == 1


def test_a_function_that_reads_the_namespace_is_never_cached() -> None:
    """A reference that calls anything from the notebook's namespace (there, the learner's
    functions) could differ between students: it runs every time."""
    ns = _namespace()
    exec(
        "def helper(x):\n    return x * 2\n"
        "def reference2(x):\n    counter.calls += 1\n    return helper(x)\n",
        ns,
    )
    for _ in range(2):
        assert torch.equal(memo.once(ns["reference2"], torch.ones(2)), torch.full((2,), 2.0))
    assert ns["counter"].calls == 2


def test_inputs_it_cannot_describe_are_never_cached() -> None:
    ns = _namespace()
    exec("def reference3(x):\n    counter.calls += 1\n    return 1\n", ns)
    for _ in range(2):
        memo.once(ns["reference3"], object())
        memo.once(ns["reference3"], torch.nn.Linear(2, 2))  # not a bertcourse module
    assert ns["counter"].calls == 4


def test_a_call_that_draws_from_the_global_generators_is_transparent() -> None:
    """A reference that draws from torch's global generator gives, and leaves, exactly what
    a fresh call would: reused only from the same starting state, which it then advances."""
    ns = _namespace()
    exec(
        "def noisy(x):\n    counter.calls += 1\n    return x + torch.randn(3)\n",
        ns,
    )
    x = torch.zeros(3)

    expected = {}
    for seed in (0, 1):
        torch.manual_seed(seed)
        value = x + torch.randn(3)
        expected[seed] = (value, torch.randn(1))  # what follows the call
    for seed in (0, 1, 0, 1):
        torch.manual_seed(seed)
        got = memo.once(ns["noisy"], x)
        after = torch.randn(1)
        assert torch.equal(got, expected[seed][0]) and torch.equal(after, expected[seed][1])
    assert ns["counter"].calls == 2  # one per starting state


def test_library_functions_and_classes_are_fingerprinted_and_notebook_helpers_are_not() -> None:
    from bertcourse.optim import warmup_linear_decay

    assert memo.fingerprint(warmup_linear_decay, (3,), {"warmup_steps": 2, "total_steps": 9})
    assert memo.fingerprint(memo.once, (torch.optim.Adam,), {}) is not None  # a library class
    ns = _namespace()
    exec("class Mine:\n    pass\ndef uses(x):\n    return Mine\n", ns)
    assert memo.fingerprint(ns["uses"], (1,), {}) is None  # reads the namespace
    assert memo.fingerprint(ns["reference"], (ns["Mine"],), {}) is None  # a notebook class


def test_a_result_with_an_autograd_graph_is_computed_every_time() -> None:
    """A test may call backward() on the reference's output: it gets a live result."""
    ns = _namespace()
    exec("def graph(w):\n    counter.calls += 1\n    return (w * 2).sum()\n", ns)
    w = torch.ones(3, requires_grad=True)
    for _ in range(2):
        out = memo.once(ns["graph"], w)
        out.backward()
    assert ns["counter"].calls == 2 and torch.equal(w.grad, torch.full((3,), 4.0))
