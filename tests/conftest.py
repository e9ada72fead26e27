"""Shared test set-up: offline transformers, deterministic torch, small thread count."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest  # noqa: E402
import torch  # noqa: E402

# pytest-xdist runs two workers on two cores: one thread each avoids oversubscription.
torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    yield
