"""What the proxy's SDK tests share: the fake provider, the `cutctx` binary, and a running
`cutctx serve` in front of the fake (started and stopped by the tests, on loopback)."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fake_upstream import FakeUpstream  # noqa: E402
from serve import Serve, cutctx_bin  # noqa: E402


@pytest.fixture
def fake():
    """A fresh fake provider for one test."""
    with FakeUpstream() as upstream:
        yield upstream


@pytest.fixture
def cli():
    """The cutctx binary the tests run (CUTCTX_BIN, else target/release/cutctx)."""
    path = cutctx_bin()
    if not os.path.exists(path):
        pytest.skip(f"no cutctx binary at {path}: build it or set CUTCTX_BIN")
    return path


@pytest.fixture
def serve(cli, fake, tmp_path):
    """A factory: serve(*args) starts `cutctx serve` in front of the fake; every one it
    started is stopped at the end of the test."""
    started: list[Serve] = []

    def start(*args: str, state: str | None = None) -> Serve:
        proxy = Serve(cli, fake, list(args), state=state or f"sqlite:{tmp_path / 'serve.db'}")
        started.append(proxy)
        return proxy

    yield start
    for proxy in started:
        proxy.stop()
