# A suite for `pytest --memtool`, its markers written as for pytest-memray.
import os

import pytest
import torch

kept = []


def test_small():
    x = torch.empty(1000, dtype=torch.uint8)
    assert x.numel() == 1000


@pytest.mark.limit_memory("2 MB")
def test_over_limit():
    x = torch.empty(3_000_000, dtype=torch.uint8)  # line 17
    y = torch.empty(100_000, dtype=torch.uint8)  # line 18
    assert x.numel() + y.numel() == 3_100_000


@pytest.mark.limit_memory("4 MB", current_thread_only=True)
def test_under_limit():
    x = torch.empty(3_000_000, dtype=torch.uint8)
    assert x.numel() == 3_000_000


def keep_forever(n):
    kept.append(torch.empty(n, dtype=torch.uint8))  # line 29


@pytest.mark.limit_leaks("1 MB")
def test_leaks():
    keep_forever(2_000_000)


@pytest.mark.limit_leaks("1 MB", filter_fn=lambda stack: not any(f.function == "keep_forever" for f in stack.frames))
def test_leak_filtered():
    keep_forever(2_000_000)


def test_grows():
    x = torch.empty(int(os.environ.get("GROW", "10000")), dtype=torch.uint8)
    assert x.numel() > 0
