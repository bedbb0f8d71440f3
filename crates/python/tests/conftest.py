"""The models the tests use: SMOLLM (SmolLM2-135M, Q4_1) and QWEN
(Qwen2.5-Coder-0.5B, which calls tools) from MINFER_MODELS_DIR, default
~/.cache/minfer/models. A missing model fails the run, unless
MINFER_REQUIRE_MODELS=0 makes it a skip."""

import os
import pathlib

import pytest

DIR = pathlib.Path(os.environ.get("MINFER_MODELS_DIR", pathlib.Path.home() / ".cache/minfer/models"))


def _model(name: str) -> str:
    path = DIR / name
    if not path.exists():
        msg = f"{path} is missing (scripts/test.sh pulls it)"
        if os.environ.get("MINFER_REQUIRE_MODELS") == "0":
            pytest.skip(msg)
        pytest.fail(msg)
    return str(path)


@pytest.fixture(scope="session")
def smollm_path() -> str:
    return _model("smollm2-135m-instruct-q4_1.gguf")


@pytest.fixture(scope="session")
def qwen_path() -> str:
    return _model("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf")


@pytest.fixture(scope="session")
def smollm(smollm_path):
    import minfer

    m = minfer.Model(smollm_path, n_ctx=2048, n_parallel=4)
    yield m
    m.close()


@pytest.fixture(scope="session")
def minfer_bin() -> str:
    b = os.environ.get("MINFER_BIN")
    if not b:
        pytest.fail("MINFER_BIN (the minfer binary) is not set")
    return b
