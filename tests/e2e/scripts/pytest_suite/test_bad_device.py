import pytest


@pytest.mark.limit_memory("24 MB", device="cuda:7")
def test_no_such_gpu():
    pass
