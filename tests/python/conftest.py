"""Shared fixtures: the shared test data (../shared, relative to the repository root, where ctest
runs pytest) and specs used across the tests."""
import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared"
HF_CONFIGS = sorted((SHARED / "testdata" / "hf-configs").glob("*.json"))
GGUF_FILES = sorted((SHARED / "testdata" / "gguf").glob("*.gguf"))
CLI = os.environ.get("POSENC_CLI", str(ROOT / "build" / "release" / "cli" / "posenc"))


def cli_env():
    """The environment for running the posenc tool: without the ASan runtime the sanitizer run
    preloads into the (uninstrumented) interpreter, since the tool carries its own."""
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    return env


@pytest.fixture(scope="session")
def cli():
    return CLI
