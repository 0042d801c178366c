"""Fuzz (hypothesis): hostile plan fields and damaged model sources through the real CLI.

A. plan fields: one field of a valid plan for the REAL transformers modeling_llama.py (copied
   into a temp project) replaced by a payload, junk text, a wrong type, an out-of-range number, a
   path out of the project, or a key added / removed; `apply --write --yes` then must refuse with
   a one-line error and touch nothing, or apply code that parses and strips back byte for byte.
   A value the contract says is invalid (re-stated here from CONTRACTS "Plan fields are data",
   independently of plan/grammar.py) that is applied anyway is a silent acceptance. No payload
   may ever create its marker file, and no file outside the project may change.
B. model sources: the real modeling_llama.py with a BOM, CR or CRLF endings, form feeds, no final
   newline, user lines that mention the marker, shape bombs, deleted / duplicated / junk lines,
   truncation or invalid UTF-8; `analyze --target` (no profile) then `apply --write`: a refusal,
   or a plan whose rewrite parses and reverts byte for byte. A source that does not parse must be
   refused.
"""

from __future__ import annotations

import ast
import keyword
import math
import re
import shutil
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

import fuzz_harness as H
from cannbot_prefetch.plan import Plan, Switch, save_plan, sha256_file
from cannbot_prefetch.rewrite.markers import strip_markers

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(H.transformers_models() is None, reason="transformers not installed")]

# ---------------------------------------------------------------- CONTRACTS, re-stated

_ID = re.compile(r"[a-z0-9_.-]+")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _ident(v):
    return isinstance(v, str) and bool(_IDENT.fullmatch(v)) and not keyword.iskeyword(v)


def _dotted(v, least=1):
    return isinstance(v, str) and len(v.split(".")) >= least and all(_ident(p) for p in v.split("."))


def _where(v):
    if v == "end":
        return True
    return isinstance(v, str) and v.partition(":")[0] in ("before", "after") and _dotted(v.partition(":")[2])


def _int_in(lo, hi):
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi


WEIGHT_BYTES = 64 * 64 * 2          # basis.dims x dtype_bytes of the base sites
VALID = {   # key path -> is this value allowed by the contract (None: cannot tell here)
    ("id",): lambda v: isinstance(v, str) and bool(_ID.fullmatch(v)) and len(v) <= 128
    and v not in ("import", "switch", "join", "next-layer", "llama-down", "llama-o"),
    ("target", "class"): _ident, ("target", "attr"): _dotted,
    ("target", "weight_expr"): lambda v: _dotted(v, 2),
    ("insert", "class"): _ident, ("insert", "method"): _ident, ("insert", "anchor_call"): _dotted,
    ("insert", "position"): lambda v: v in ("before", "after"),
    ("dependency", "expr"): _dotted,
    ("join", "class"): _ident, ("join", "method"): _ident, ("join", "where"): _where,
    ("max_size",): _int_in(1, WEIGHT_BYTES),
    ("max_tokens",): lambda v: v is None or _int_in(1, 2**31 - 1)(v),
    ("source_sha256",): lambda v: isinstance(v, str) and bool(re.fullmatch(r"[0-9a-f]{64}", v)),
    ("mapping",): lambda v: v in ("stack", "shape", "manual"),
    ("target", "file"): None,
    ("basis", "coefficient"): lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)
    and math.isfinite(v) and 0 < v <= 1,
    ("switch", "name"): _ident, ("switch", "config_path"): _dotted,
    ("switch", "default"): lambda v: isinstance(v, bool),
    ("switch", "config_file"): None,
    ("mode",): lambda v: v in ("eager", "ge_graph", "npugraph_ex"),
    ("status",): lambda v: v in ("proposed", "applied"),
}


def _payloads(marker: Path) -> list[str]:
    touch = f"__import__('pathlib').Path({str(marker)!r}).touch()"
    return [touch, f"({touch}, self.mlp.gate_proj.weight)[1]", f"x\n        {touch}",
            f'a"); {touch}; ("', f'a"""\n{touch}\n"""', f"x  # {touch}", "x; import os",
            "self.x[0]", "f(x)", "", " ", "\t", "x\r\ny", "a.b.", ".a", "a..b", "é", "class",
            "self.mlp.gate_proj.weight\n", "join", "LLAMA", "../outside/victim.py",
            "/etc/passwd", "../../../../../../tmp/x.py", "\x00", "a" * 300]


def _values(marker: Path):
    return st.one_of(
        st.sampled_from(_payloads(marker)),
        st.text(max_size=30),
        st.integers(min_value=-2**70, max_value=2**70),
        st.sampled_from([0, 1, -1, 2**31, 2**63, 10**100, WEIGHT_BYTES, WEIGHT_BYTES + 1]),
        st.floats(allow_nan=True, allow_infinity=True),
        st.sampled_from([None, True, False, [], {}, [1], {"a": 1}, [[["deep"]]]]),
    )


# ---------------------------------------------------------------- the project under attack

def _base_plan(sha: str) -> Plan:
    site = H.site_builder()
    return Plan(sites=(
        site("llama-gate", cls="LlamaMLP", attr="gate_proj", weight="self.mlp.gate_proj.weight",
             icls="LlamaDecoderLayer", anchor="self.mlp", dep="hidden_states", size=4096,
             max_tokens=64, sha=sha, file="modeling_llama.py"),
        site("llama-down", cls="LlamaMLP", attr="down_proj", weight="self.down_proj.weight",
             icls="LlamaMLP", anchor="self.down_proj", dep="x", size=2048, sha=sha,
             file="modeling_llama.py"),
        site("llama-o", cls="LlamaAttention", attr="o_proj", weight="self.o_proj.weight",
             icls="LlamaAttention", anchor="attention_interface", dep="query_states", size=1024,
             sha=sha, file="modeling_llama.py")),
        switch=Switch(config_path="custom_params.enable_prefetch", config_file="runner.yaml"))


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz-project")
    proj = root / "proj"
    model = H.copy_model("llama", proj)
    (proj / "runner.yaml").write_text("model_config:\n  custom_params:\n    batch: 1\n")
    save_plan(_base_plan(sha256_file(model)), proj / "plan.yaml")
    (root / "outside").mkdir()
    shutil.copyfile(model, root / "outside" / "victim.py")
    return root


def _fresh(template: Path) -> Path:
    work = Path(tempfile.mkdtemp(prefix="cbp-fuzz-"))
    shutil.copytree(template, work, dirs_exist_ok=True)
    return work


def _set(data, path, value):
    node = data
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value


SITE_KEYS = [k for k in VALID if k[0] not in ("switch", "mode", "status")]


@st.composite
def plan_mutations(draw, marker):
    kind = draw(st.sampled_from(["site", "site", "site", "switch", "top", "add_key", "drop_key"]))
    if kind == "site":
        key = draw(st.sampled_from(SITE_KEYS))
        return ("sites", draw(st.integers(0, 2)), *key), draw(_values(marker))
    if kind == "switch":
        key = draw(st.sampled_from([k for k in VALID if k[0] == "switch"]))
        return key, draw(_values(marker))
    if kind == "top":
        return draw(st.sampled_from([("mode",), ("status",)])), draw(_values(marker))
    where = draw(st.sampled_from([(), ("sites", 0), ("sites", 1, "target"), ("switch",),
                                  ("sites", 2, "basis")]))
    if kind == "add_key":
        return (*where, draw(st.sampled_from(["extra", "klass", "eval", "__class__"]))), "ADD"
    return (*where, draw(st.sampled_from(["id", "max_size", "dependency", "name", "dims", "version"]))), "DROP"


def _oracle(path, value) -> bool | None:
    if value == "ADD":
        return False
    if value == "DROP":
        return None
    key = tuple(p for p in path if not isinstance(p, int))
    if key and key[0] == "sites":
        key = key[1:]
    check = VALID.get(key)
    return None if check is None else bool(check(value))


# ---------------------------------------------------------------- A

def test_a_plan_fields_never_inject_never_escape(template):
    marker = template / "PWNED"
    model0 = (template / "proj" / "modeling_llama.py").read_bytes()

    failures: list[str] = []
    @seed(H.seed())
    @settings(max_examples=H.share(0.4), deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(plan_mutations(marker))
    def one(mutation):
        path, value = mutation
        work = _fresh(template)
        try:
            plan = work / "proj" / "plan.yaml"
            data = yaml.safe_load(plan.read_text())
            if value == "ADD":
                node = data
                for k in path[:-1]:
                    node = node[k]
                node[path[-1]] = 1
            elif value == "DROP":
                node = data
                for k in path[:-1]:
                    node = node[k]
                node.pop(path[-1], None)
            else:
                _set(data, path, value)
            try:
                plan.write_text(yaml.safe_dump(data, sort_keys=False))
            except (yaml.YAMLError, UnicodeEncodeError, ValueError):
                return
            before = H.snapshot(work / "proj")
            outside = (work / "outside" / "victim.py").read_bytes()
            run = H.cli(["prefetch", "apply", str(plan), "--write", "--yes",
                         "--root", str(work / "proj")])
            outcome, detail = run.kind, f"{path}={value!r}: {run.output.strip()[-300:]}"
            assert not marker.exists(), f"payload ran: {detail}"
            if (work / "outside" / "victim.py").read_bytes() != outside or \
                    (work / "outside" / "_cannbot_prefetch.py").exists():
                outcome = "broken"
                detail = "a file outside the project changed: " + detail
            elif run.kind == "ok":
                code = (work / "proj" / "modeling_llama.py").read_bytes()
                compile(code, "model", "exec")
                if strip_markers(code.decode()) != model0.decode():
                    outcome, detail = "broken", "does not strip back: " + detail
                helper = work / "proj" / "_cannbot_prefetch.py"
                if helper.exists():
                    compile(helper.read_bytes(), "helper", "exec")
                if _oracle(path, value) is False:
                    outcome = "silent"
            elif run.kind == "refused" and H.snapshot(work / "proj") != before:
                outcome, detail = "broken", "refused but files changed: " + detail
            H.TALLY.add("plan", outcome, run.seconds, detail)
            if outcome in H.BAD:
                failures.append(f"{outcome}: {detail}")
        finally:
            shutil.rmtree(work, ignore_errors=True)

    one()
    assert not failures, "\n".join(failures[:10])


# ---------------------------------------------------------------- B

BOMBS = ["        self.bomb = nn.Linear(2 ** 2 ** 36, 8)\n",
         "        self.bomb = nn.Linear(len('a' * 10 ** 10), 8)\n",
         "        self.bomb = nn.Linear(int('9' * 5000), 8)\n",
         "        self.bomb = nn.Linear(" + "(" * 90 + "1" + ")" * 90 + ", 8)\n",
         "        self.bomb = nn.Linear(1e308 * 10, 8)\n"]
USER_LINES = ['    NOTE = "x = 1  # cannbot-prefetch: keep"\n',
              "    # _cbp.join(self.enable_prefetch)  # cannbot-prefetch: join\n",
              '    DOC = """\n_cbp.join(x)  # cannbot-prefetch: join\n"""\n']


@st.composite
def source_mutations(draw):
    ops = draw(st.lists(st.sampled_from(["bom", "crlf", "cr", "nofinal", "formfeed", "user",
                                         "bomb", "delete", "duplicate", "junk", "truncate",
                                         "badutf8", "tabs"]), min_size=1, max_size=3))
    return ops, draw(st.integers(0, 10**6)), draw(st.text(max_size=20))


def _mutate(text: str, ops, n: int, junk: str) -> bytes:
    lines = text.splitlines(keepends=True)
    for op in ops:
        k = n % max(len(lines), 1)
        if op == "formfeed":
            i = next((j for j, ln in enumerate(lines) if ln.startswith("class LlamaMLP")), k)
            lines.insert(i, "\x0c\n")
        elif op == "user":
            i = next((j for j, ln in enumerate(lines) if ln.startswith("class LlamaMLP")), k)
            lines.insert(i + 1, USER_LINES[n % len(USER_LINES)])
        elif op == "bomb":
            i = next((j for j, ln in enumerate(lines) if "super().__init__()" in ln
                      and j > 0 and any("class LlamaMLP" in x for x in lines[max(0, j - 5):j])), k)
            lines.insert(i + 1, BOMBS[n % len(BOMBS)])
        elif op == "delete" and lines:
            del lines[k]
        elif op == "duplicate" and lines:
            lines.insert(k, lines[k])
        elif op == "junk":
            lines.insert(k, junk + "\n")
        elif op == "tabs" and lines:
            lines[k] = lines[k].replace("    ", "\t", 1)
    text = "".join(lines)
    if "crlf" in ops:
        text = text.replace("\r\n", "\n").replace("\n", "\r\n")
    if "cr" in ops:
        text = text.replace("\r\n", "\n").replace("\n", "\r")
    if "nofinal" in ops:
        text = text.rstrip("\r\n")
    if "truncate" in ops:
        text = text[: n % max(len(text), 1)]
    if "bom" in ops:
        text = "\ufeff" + text
    data = text.encode("utf-8", errors="surrogatepass")
    if "badutf8" in ops:
        data = data[: n % max(len(data), 1)] + b"\xff\xfe" + data[n % max(len(data), 1):]
    return data


def _parses(data: bytes) -> bool:
    try:
        ast.parse(data)
        return True
    except (SyntaxError, ValueError):
        return False


def test_b_damaged_model_sources_refused_or_round_trip(template):
    original = (template / "proj" / "modeling_llama.py").read_text()
    config = H.REPO / "examples" / "llama3.2-1b-en" / "config.json"

    failures: list[str] = []
    @seed(H.seed())
    @settings(max_examples=H.share(0.2), deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(source_mutations())
    def one(mutation):
        ops, n, junk = mutation
        work = _fresh(template)
        try:
            try:
                data = _mutate(original, ops, n, junk)
            except UnicodeEncodeError:
                return
            model = work / "proj" / "modeling_llama.py"
            model.write_bytes(data)
            run = H.cli(["prefetch", "analyze", "--model-src", str(model), "--model-config",
                         str(config), "--target", "LlamaMLP.gate_proj", "--out", str(work / "out")])
            outcome, detail = run.kind, f"{ops} n={n}: {run.output.strip()[-300:]}"
            if run.kind == "ok" and not _parses(data):
                outcome = "silent"
            seconds = run.seconds
            if run.kind == "ok":
                plan = work / "out" / "prefetch_plan.yaml"
                run = H.cli(["prefetch", "apply", str(plan), "--write", "--yes", "--root", str(work)])
                seconds += run.seconds
                outcome, detail = run.kind, f"{ops} n={n} apply: {run.output.strip()[-300:]}"
                if run.kind == "ok":
                    new = model.read_bytes()
                    if not _parses(new) or strip_markers(new.decode("utf-8")).encode("utf-8") != data:
                        outcome, detail = "broken", f"{ops} n={n}: rewrite does not parse or revert"
            H.TALLY.add("source", outcome, seconds, detail)
            if outcome in H.BAD:
                failures.append(f"{outcome}: {detail}")
        finally:
            shutil.rmtree(work, ignore_errors=True)

    one()
    assert not failures, "\n".join(failures[:10])
