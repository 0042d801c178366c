"""yaml_safe.py (issue 33): every YAML the tool reads is bounded before a value is built, refuses
duplicate keys and numbers int() cannot take, and only regular files are opened. The documents
are GENERATED here; the expected bounds are the module's documented ones."""

from __future__ import annotations

import os
import time

import pytest
import yaml

from cannbot_prefetch import yaml_safe
from cannbot_prefetch.errors import InputError, PlanError

LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\n" for i in range(8))


def test_plain_documents_and_modest_aliases_load_as_pyyaml_does():
    text = "a: 1\nb: [x, {c: 2.5}]\nd: &d {e: f}\ng: *d\n"
    assert yaml_safe.load(text, "t") == yaml.safe_load(text)


@pytest.mark.parametrize("text, words", [
    (LAUGHS, "more than 1000000 values"),                              # 10^9 nodes expanded
    ("s: &s " + "x" * (1 << 20) + "\nt: [" + ", ".join(["*s"] * 100) + "]\n", "MiB of text"),
    ("a: &l [*l]\n", "holds itself"),
    ("[" * 100 + "]" * 100, "levels deep"),
    ("a: 1\nb: 2\na: 3\n", "'a' appears twice"),
    ("max_size: " + "9" * 5000 + "\n", "key 'max_size'"),
])
def test_hostile_documents_are_refused_quickly_naming_what(text, words):
    start = time.monotonic()
    with pytest.raises(PlanError) as exc:
        yaml_safe.load(text, "plan.yaml", PlanError)
    assert words in str(exc.value) and "plan.yaml" in str(exc.value)
    assert time.monotonic() - start < 5


def test_dump_never_writes_aliases():
    shared = {"k": [1, 2]}
    text = yaml_safe.dump({"a": shared, "b": shared})
    assert "&" not in text and "*" not in text
    assert yaml_safe.load(text, "t") == {"a": shared, "b": shared}


def test_only_regular_files_are_read(tmp_path):
    fifo = tmp_path / "plan.yaml"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="not a regular file"):   # would block in open()
        yaml_safe.load_file(fifo, "plan file", 1 << 20)
    folder = tmp_path / "dir.yaml"
    folder.mkdir()
    with pytest.raises(InputError, match="dir.yaml"):
        yaml_safe.load_file(folder, "plan file", 1 << 20)
    big = tmp_path / "big.yaml"
    big.write_text("a: " + "x" * 100 + "\n")
    with pytest.raises(InputError, match="more than it can be"):
        yaml_safe.load_file(big, "plan file", 50)
