import pytest

from fakeserver import FakeServer


@pytest.fixture(scope="session")
def server():
    with FakeServer() as fake:
        yield fake
