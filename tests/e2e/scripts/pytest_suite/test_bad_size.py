import pytest


@pytest.mark.limit_memory("24 MiB")
def test_bad():
    pass
