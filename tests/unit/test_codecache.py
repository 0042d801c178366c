"""The console script's cache of dataclass-generated code (console/codecache.py): classes
built through it behave exactly as classes built without it, on the first run (compiling) and
the next (from the file); a file that is foreign, writable by others or malformed is ignored;
a cache that cannot be written never fails the command. The classes below are GENERATED test
shapes."""

from __future__ import annotations

import dataclasses
import inspect
import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

from cannbot_prefetch.console import codecache

SHAPES = textwrap.dedent("""
    import dataclasses
    from dataclasses import dataclass, field
    from typing import Any

    @dataclass(frozen=True, order=True)
    class Point:
        x: int
        y: int = 0
        tags: tuple = ()

    @dataclass(slots=True)
    class Slotted:
        name: str
        items: list = field(default_factory=list)
        extra: Any = field(default=None, repr=False, compare=False)

    @dataclass(kw_only=True, eq=False)
    class Keywords:
        a: int
        b: "str" = "b"

        def __post_init__(self):
            self.c = self.a * 2
""")


def _build(cache: codecache.CodeCache | None) -> dict:
    """The shapes' classes, compiled through `cache` (None: as Python does)."""
    saved = dataclasses.__dict__.get("exec")
    if cache is not None:
        dataclasses.exec = cache.exec
    module = types.ModuleType("codecache_shapes")
    sys.modules[module.__name__] = module       # dataclasses reads string annotations there
    try:
        exec(compile(SHAPES, "shapes.py", "exec"), module.__dict__)
        ns = dict(module.__dict__)
    finally:
        del sys.modules[module.__name__]
        if cache is not None:
            if saved is None:
                del dataclasses.exec
            else:
                dataclasses.exec = saved
    return ns


def _behaviour(ns: dict) -> list:
    P, S, K = ns["Point"], ns["Slotted"], ns["Keywords"]
    p, q = P(1, 2, ("a",)), P(1, 3)
    s = S("n")
    k = K(a=3)
    out = [repr(p), p == P(1, 2, ("a",)), p < q, hash(p) == hash(P(1, 2, ("a",))),
           repr(s), s == S("n"), S("n", [1]).items, hasattr(s, "__dict__"),
           k.c, k.b, k == K(a=3), repr(k)]
    for cls in (P, S, K):
        sig = inspect.signature(cls.__init__)
        out.append(str(sig))
        out.append(cls.__init__.__annotations__)
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.x = 5
    return out


def test_cached_classes_behave_alike(tmp_path):
    plain = _behaviour(_build(None))
    path = tmp_path / "cache.marshal"
    first = codecache.CodeCache(path)
    assert _behaviour(_build(first)) == plain
    assert first.added > 0
    first.save()
    assert path.is_file() and (path.stat().st_mode & 0o777) == 0o600
    second = codecache.CodeCache(path)
    assert len(second.codes) == first.added
    assert _behaviour(_build(second)) == plain
    assert second.added == 0            # every text came from the file
    second.save()                       # nothing new: nothing written
    assert codecache.CodeCache(path).codes.keys() == first.codes.keys()


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="ownership checks are POSIX")
def test_untrusted_or_damaged_files_are_ignored(tmp_path):
    path = tmp_path / "cache.marshal"
    good = codecache.CodeCache(path)
    _build(good)
    good.save()
    path.chmod(0o664)                   # writable by the group: not trusted
    assert codecache.CodeCache(path).codes == {}
    path.chmod(0o600)
    assert codecache.CodeCache(path).codes
    for junk in (b"", b"\x00garbage", __import__("marshal").dumps({"x": 1}),
                 __import__("marshal").dumps([1, 2])):
        path.write_bytes(junk)
        path.chmod(0o600)
        assert codecache.CodeCache(path).codes == {}
    assert _behaviour(_build(codecache.CodeCache(path))) == _behaviour(_build(None))


def test_unwritable_cache_never_fails(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    cache = codecache.CodeCache(blocker / "sub" / "cache.marshal")
    _build(cache)
    cache.save()                        # the folder cannot be made: silently not cached
    assert not (blocker / "sub").exists()


def test_console_script_runs_from_the_cache(tmp_path):
    """The real thing: the README's analyze twice in fresh processes with a private cache
    folder; the second compiles nothing new and answers the same."""
    transformers = pytest.importorskip("transformers")
    repo = Path(__file__).resolve().parents[2]
    example = repo / "examples" / "llama3.2-1b-en"
    src = Path(transformers.__file__).parent / "models" / "llama" / "modeling_llama.py"
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"))
    code = "import sys; sys.argv[0] = 'cannbot'; from cannbot_prefetch.cli import main; main()"
    args = ["prefetch", "analyze", str(example / "profile"), "--model-src", str(src),
            "--model-config", str(example / "config.json"), "--json"]
    runs = [subprocess.run([sys.executable, "-c", code, *args, "--out", str(tmp_path / f"o{i}")],
                           env=env, capture_output=True, text=True, timeout=300)
            for i in range(2)]
    assert [r.returncode for r in runs] == [0, 0], runs[0].stderr
    texts = [r.stdout.replace(str(tmp_path / f"o{i}"), "OUT") for i, r in enumerate(runs)]
    assert texts[0] == texts[1]
    files = list((tmp_path / "cache" / "cannbot-prefetch").glob("dataclass-code-*.marshal"))
    assert len(files) == 1
    first = files[0].stat().st_mtime_ns
    cache = codecache.CodeCache(files[0])
    assert len(cache.codes) > 500       # libcst's node classes among them
    assert files[0].stat().st_mtime_ns == first   # the second run had nothing to add


def test_each_command_has_its_own_file(tmp_path, monkeypatch):
    """The file a console run loads is named for its command (prefetch analyze -> analyze),
    so one command never loads another's code; options never name a command."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    names = {argv[0] if argv else "": codecache.cache_file(codecache.command_of(argv[1:])).name
             for argv in (["a", "prefetch", "analyze", "p", "--json"], ["b", "prefetch", "apply"],
                          ["c", "--help"], ["d", "prefetch", "--version"], [])}
    assert [n.rsplit("-", 1)[-1] for n in names.values()] == \
           ["analyze.marshal", "apply.marshal", "cli.marshal", "prefetch.marshal", "cli.marshal"]
    assert codecache.cache_file().parent == tmp_path / "cannbot-prefetch"
