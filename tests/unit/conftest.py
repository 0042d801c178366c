"""Model sources for mapping and planning tests: the REAL transformers files, copied into tmp_path at test time
(never committed), and the example configs."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"


def copy_modeling(family: str, dest: Path) -> Path:
    transformers = pytest.importorskip("transformers")
    src = Path(transformers.__file__).parent / "models" / family / f"modeling_{family}.py"
    if not src.is_file():
        pytest.skip(f"transformers has no {src.name}")
    dest.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copy(src, dest / src.name))


@pytest.fixture
def modeling(tmp_path):
    """modeling("llama") -> a copy of transformers' modeling_llama.py in tmp_path."""
    return lambda family: copy_modeling(family, tmp_path / "src")


@pytest.fixture(scope="session")
def copy_src():
    """copy_src("llama", dest_dir) -> the copied file."""
    return copy_modeling


@pytest.fixture(scope="session")
def examples_dir():
    return EXAMPLES


@pytest.fixture
def example_config():
    return lambda name: EXAMPLES / name / "config.json"
