"""A tiny trained Transformer (as in tests/export), its translator, in-process clients of ``adlnmt serve`` with
chosen limits."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from adlnmt.inference.translator import Translator
from adlnmt.serve.app import create_app
from adlnmt.serve.limits import ServeOptions
from export.conftest import FAMILIES, train_tiny
from serve.server import ClientFactory


@pytest.fixture(scope="session")
def serve_model(demo_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny Transformer trained for 40 updates on the demo corpus."""
    model_dir = tmp_path_factory.mktemp("serve-model")
    train_tiny(demo_data / "data", model_dir, *FAMILIES["transformer"])
    return model_dir


@pytest.fixture(scope="session")
def translator(serve_model: Path) -> Translator:
    return Translator.load(serve_model)


@pytest.fixture(scope="session")
def test_lines(demo_data: Path) -> list[str]:
    return (demo_data / "corpus" / "test.src").read_text(encoding="utf-8").splitlines()[:16]


@pytest.fixture
def make_client(serve_model: Path, translator: Translator) -> Iterator[ClientFactory]:
    """``with make_client(max_sentences=4) as client:`` an in-process client (lifespan run) of an app serving the
    tiny model with those :class:`ServeOptions`; ``translator=`` replaces the loaded one (e.g. a slow one)."""

    @contextmanager
    def client(translator_: Translator = translator, **limits: Any) -> Iterator[TestClient]:
        options = ServeOptions(**({"model": str(serve_model), "allowed_hosts": ("testserver",)} | limits))
        app = create_app(options, translator_)
        with TestClient(app, raise_server_exceptions=False) as test_client:
            yield test_client

    yield client
