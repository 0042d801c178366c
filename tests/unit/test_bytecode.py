"""The console script's bytecode cache (console/bytecode.py): with Python writing no `.pyc`, this
package's modules load through a cache folder keyed by the source's hash, so an edited source
is recompiled even with its size and mtime unchanged; a damaged file is recompiled, a file
others may write is never read; with Python writing bytecode nothing is installed. Each case
runs in a fresh interpreter (an import hook must not leak into the test process). The package
`shapes` below is a GENERATED test package."""

from __future__ import annotations

import marshal
import os
import subprocess
import sys
import textwrap
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[2] / "src")
PROBE = textwrap.dedent("""
    import sys
    sys.dont_write_bytecode = {dont_write}
    sys.path[:0] = [{src!r}, {top!r}]
    from cannbot_prefetch.console import bytecode
    print(bytecode.install(root={root!r}, cache={cache!r}))
    import shapes.sub.deep as deep
    print(deep.VALUE, type(deep.__loader__).__name__)
""")


def _package(tmp_path: Path, value: int) -> Path:
    top = tmp_path / "top"
    (top / "shapes" / "sub").mkdir(parents=True, exist_ok=True)
    for init in (top / "shapes" / "__init__.py", top / "shapes" / "sub" / "__init__.py"):
        init.write_text("")
    (top / "shapes" / "sub" / "deep.py").write_text(f"VALUE = {value}\n")
    return top


def _run(tmp_path: Path, dont_write: bool = True) -> list[str]:
    top = tmp_path / "top"
    code = PROBE.format(dont_write=dont_write, src=SRC, top=str(top), root=str(top / "shapes"),
                        cache=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env={k: v for k, v in os.environ.items()
                                            if k != "PYTHONDONTWRITEBYTECODE"})
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def _cached(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "cache").glob("*"))


def test_modules_load_through_the_cache_and_follow_their_source(tmp_path):
    _package(tmp_path, 1)
    assert _run(tmp_path) == ["True", "1", "Loader"]
    files = _cached(tmp_path)
    assert [f.name.split("-")[0] for f in files] == ["__init__", "deep"]   # sub/ and deep.py
    assert all(f.stat().st_mode & 0o777 == 0o600 for f in files)
    first = [f.read_bytes() for f in files]
    assert _run(tmp_path) == ["True", "1", "Loader"]
    assert [f.read_bytes() for f in files] == first            # read, not written again
    deep = tmp_path / "top" / "shapes" / "sub" / "deep.py"
    stat = deep.stat()
    deep.write_text("VALUE = 2\n")                              # same size, same mtime
    os.utime(deep, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert _run(tmp_path) == ["True", "2", "Loader"]


def test_a_cache_file_is_used_only_when_trusted(tmp_path):
    _package(tmp_path, 1)
    _run(tmp_path)
    deep_file = next(f for f in _cached(tmp_path) if f.name.startswith("deep-"))
    header = deep_file.read_bytes()[:12]        # magic number and the source's hash
    # a file with the right header but other code: read when trusted (it is what the cache
    # holds), never when others may write it
    forged = header + marshal.dumps(compile("VALUE = 99\n", "deep.py", "exec"))
    deep_file.write_bytes(forged)
    assert _run(tmp_path)[1] == "99"
    deep_file.chmod(0o666)
    assert _run(tmp_path)[1] == "1"
    deep_file.chmod(0o600)
    deep_file.write_bytes(header + b"\x00garbage")               # damaged: compiled again
    assert _run(tmp_path)[1] == "1"
    assert deep_file.read_bytes() != header + b"\x00garbage"


def test_nothing_is_installed_when_python_writes_bytecode(tmp_path):
    _package(tmp_path, 1)
    assert _run(tmp_path, dont_write=False) == ["False", "1", "SourceFileLoader"]
    assert not (tmp_path / "cache").exists()


def test_the_console_script_caches_its_own_modules(tmp_path):
    """The real package through the console entry point, with PYTHONDONTWRITEBYTECODE set and a
    private cache folder: its modules come from the cache the second time, and answer alike."""
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", XDG_CACHE_HOME=str(tmp_path / "xdg"))
    run = "import sys; sys.argv[0] = 'cannbot'; from cannbot_prefetch.console import main; main()"
    argv = [sys.executable, "-c", run, "prefetch", "hardware", "list", "--json"]
    outs = [subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
            for _ in range(2)]
    assert [o.returncode for o in outs] == [0, 0], outs[0].stderr
    assert outs[0].stdout == outs[1].stdout and outs[0].stdout.strip()
    folder = next((tmp_path / "xdg" / "cannbot-prefetch").glob("pyc-*"))
    names = {f.name.split("-")[0] for f in folder.iterdir()}
    assert {"analyze", "hardware", "profiles"} <= names
    # a module beside console/ (its folder was searched before the hook went in) and one in
    # a folder not searched yet
    probe = ("import sys; from cannbot_prefetch.console import bytecode; bytecode.install(); "
             "import cannbot_prefetch.errors as e, cannbot_prefetch.hardware.profiles as m; "
             "print(*(f'{type(x.__loader__).__name__}:{x.__loader__.folder}' for x in (e, m)))")
    seen = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                          text=True, timeout=120)
    assert seen.stdout.split() == [f"Loader:{folder}"] * 2, seen.stderr
