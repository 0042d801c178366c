"""The one catalog of bilingual text (configs/messages.yaml): complete, consistent, used.

- every entry has `en` and `zh`, with the same `{placeholders}`;
- every key the code names (`t("...")`, `Msg("...")`, `texts("...")`) exists;
- no module keeps its own bilingual table any more (the CLI ones are gone);
- a `Msg` raised deep down prints in the user's language.
"""

from __future__ import annotations

import re
import string
from pathlib import Path

import pytest

from cannbot_prefetch import i18n
from cannbot_prefetch.errors import InputError

SRC = Path(i18n.__file__).resolve().parent


def _fields(text: str) -> set[str]:
    return {f for _, f, _, _ in string.Formatter().parse(text) if f}


def test_every_entry_has_both_languages_with_the_same_placeholders():
    cat = i18n.CATALOG
    assert len(cat) > 50
    for key, entry in cat.items():
        assert set(entry) == {"en", "zh"}, key
        assert entry["en"].strip() and entry["zh"].strip(), key
        assert _fields(entry["en"]) == _fields(entry["zh"]), key


def _keys_named_in_code() -> set[tuple[str, str]]:
    found = set()
    pattern = re.compile(r"""\b(t|Msg|texts|_t|said|_said)\(\s*f?["']([a-z0-9_]+(?:\.[a-z0-9_]+)+)["']""")
    for path in SRC.rglob("*.py"):
        for m in pattern.finditer(path.read_text(encoding="utf-8")):
            if "{" not in m.group(2):
                found.add((m.group(1), m.group(2)))
    return found


def test_every_key_named_in_the_code_exists():
    cat = i18n.CATALOG
    named = _keys_named_in_code()
    assert len(named) > 30
    for fn, key in named:
        if fn == "texts":
            assert any(k.startswith(key + ".") for k in cat), key
        else:
            assert key in cat, key


def _strings(path: Path) -> list[tuple[int, str]]:
    """String constants of a module, docstrings excluded (they are for developers)."""
    import ast

    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant):
            docs.add(id(body[0].value))
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]


def test_no_module_keeps_its_own_bilingual_text():
    """One catalog: no string in the package is Chinese; the Chinese lives in messages.yaml."""
    found = [f"{p.relative_to(SRC)}:{line}: {text[:40]!r}" for p in sorted(SRC.rglob("*.py"))
             for line, text in _strings(p) if re.search(r"[\u4e00-\u9fff]", text)]
    assert found == []
    for path in SRC.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert '"zh":' not in text and "'zh':" not in text, path.name


def test_msg_is_english_text_and_renders_in_chinese():
    m = i18n.Msg("cli.steps_order", text="5:2")
    assert m == "--steps 5:2: the end is before the start"
    assert "结束步" in m.render("zh")
    assert i18n.tr(m, "zh") == m.render("zh") and i18n.tr("plain", "zh") == "plain"


def test_error_line_in_chinese_carries_path_and_hint():
    from cannbot_prefetch.cli import error_text

    err = InputError(i18n.Msg("apply.notty"), path="plan.yaml", hint=i18n.Msg("apply.aborted"))
    assert error_text(err, "en") == ("plan.yaml: --write needs a confirmation and there is no "
                                     "terminal: pass --yes (nothing written)")
    zh = error_text(err, "zh")
    assert zh.startswith("plan.yaml: ") and "请加 --yes" in zh and "未写入任何文件" in zh


def test_unknown_key_is_a_bug_not_a_silent_fallback():
    with pytest.raises(KeyError):
        i18n.t("no.such.key")


def test_every_reason_code_has_a_line_in_both_languages():
    from cannbot_prefetch import reasons

    codes = {v for k, v in vars(reasons).items() if k.isupper() and isinstance(v, str)}
    cat = i18n.CATALOG
    assert codes and all(f"reason.{c}" in cat for c in codes), \
        sorted(c for c in codes if f"reason.{c}" not in cat)


def test_chinese_console_glosses_each_rejection(tmp_path):
    from typer.testing import CliRunner

    from cannbot_prefetch.cli import app

    example = Path(__file__).resolve().parents[2] / "examples" / "llama3.2-1b-en"
    res = CliRunner().invoke(app, ["prefetch", "analyze", str(example / "profile"), "--model-src",
                                   "transformers.models.llama.modeling_llama", "--model-config",
                                   str(example / "config.json"), "--out", str(tmp_path),
                                   "--lang", "zh"])
    assert res.exit_code == 0, res.output
    assert "未规划" in res.stdout and "超出允许的位置数（--max-sites）——" in res.stdout
    assert "已规划" in res.stdout and "性能数据" in res.stdout and "已写入" in res.stdout


def test_every_stored_sentence_is_written_from_the_catalog():
    """One definition: each `said.*` / `part.*` entry is the text the code writes (`said(...)`),
    so a Chinese document can always find the entry an English sentence came from."""
    code = "\n".join(p.read_text(encoding="utf-8") for p in SRC.rglob("*.py"))
    keys = [k for k in i18n.CATALOG if k.startswith(("said.", "part."))]
    assert len(keys) > 20
    for key in keys:
        assert f'"{key}"' in code, key


def test_localize_rewords_a_stored_sentence_with_its_parts():
    # a rejection reason as analyze stores it (built here from the same entries the code uses)
    where = i18n.said("part.where", position="before", call="self.up_proj", fn="Qwen2MLP.forward")
    names = ", ".join(i18n.said("part.op_why", op="MatMulV3",
                                why=i18n.said("part.heavy_by_counters", why=f"aic mte2 {x}, mac 0.01"))
                      for x in ("0.96", "0.98"))
    en = "Qwen2MLP.up_proj: " + i18n.said("said.overlaps_busy", where=where, names=names)
    assert en.startswith("Qwen2MLP.up_proj: the prefetch issued before `self.up_proj` in "
                         "Qwen2MLP.forward also overlaps MatMulV3 (memory-bound by its counters "
                         "(aic mte2 0.96, mac 0.01)), MatMulV3 (")
    # the Chinese, written out by hand from the catalog's zh texts
    assert i18n.localize(en, "zh") == (
        "Qwen2MLP.up_proj：在 Qwen2MLP.forward 中 `self.up_proj` 之前发出的预取还会与 "
        "MatMulV3（按计数器判定为 memory-bound：aic mte2 0.96、mac 0.01）、"
        "MatMulV3（按计数器判定为 memory-bound：aic mte2 0.98、mac 0.01） 重叠："
        "访存密集或通信算子的时间从不算作空闲窗口，而更早插入只会增加算子"
        "（工作流规则，docs/workflow.md：无安全窗口）")
    assert i18n.localize(en, "en") is en
    # numbers keep the English text's formatting; "; "-joined sentences are re-worded one by one
    cap = i18n.said("said.cap_cmo_risk", gbps=285.0, t=5.58)
    assert cap.startswith("285 GB/s x 5.6 µs; a risk")
    assert i18n.localize(cap, "zh").startswith("285 GB/s × 5.6 µs；仅风险提示，不作上限")
    # what no entry made (a path, a name) is shown as it is
    assert i18n.localize("docs/sources.md", "zh") == "docs/sources.md"


@pytest.mark.parametrize("en, zh", [
    # a sentence inside a sentence with a suffix (the instances share)
    (lambda s: s("said.instances_share", n=20, total=24, reason=s(
        "said.light_too_short", n=3, left=s("part.us", us=1.2), min_us=2.0)),
     "3 个轻量前序算子只留下 1.2 µs，小于 min_window_us 2（窗口规则 3c：过短）（24 个实例中的 20 个）"),
    # a list of ops inside a placed window's reason
    (lambda s: s("said.placed_was", branch="3b", us=5.58,
                 why=s("said.placed_3b", op="RmsNorm", ops="RmsNorm, Add")),
     "插在 RmsNorm 之前：轻量算子 RmsNorm、Add（窗口规则 3b）（实测窗口为 3b，5.6 µs）"),
    # WHO: then two sentences joined by "; "
    (lambda s: "Qwen2MLP.gate_proj: " + s("said.no_saving", bound="hbm_headroom", size=1) + "; "
     + s("said.earlier_overlaps_3a", note="note", op="MatMulV3", mib=43.0),
     "Qwen2MLP.gate_proj：没有预期收益（受 hbm_headroom 约束，max_size 1 B）；note，因此它还与访存"
     "密集的 MatMulV3 重叠：窗口从该算子的输出开始，预取会与其 43.0 MiB 的访存争抢带宽"),
])
def test_localize_finds_the_right_split(en, zh):
    assert i18n.localize(en(i18n.said), "zh") == zh


def test_localize_takes_any_text():
    """A stored sentence can be anything a user's plan holds (hand-edited, an older tool's):
    localize never raises, and text with no joint, entry or fixed phrase stays as it is."""
    from hypothesis import given, settings, strategies as st

    pieces = st.sampled_from(["the prefetch issued ", "before `x` in A.f", ": ", "; ", ", ", " (",
                              ")", " µs", "window rule 3b", "memory-bound by its counters", "a",
                              "light predecessor(s) ", "{x}", "{", "}"])

    @settings(max_examples=300, deadline=None)
    @given(st.lists(pieces, max_size=12).map("".join))
    def check(text):
        out = i18n.localize(text, "zh")
        assert isinstance(out, str)
        if not any(j in text for j in (": ", "; ", "(", "before", "communication op")):
            assert out == text   # no joint, no entry, no fixed phrase: nothing to re-word

    check()
    assert i18n.localize("plain words no entry made", "zh") == "plain words no entry made"


def test_localize_listed_not_planned_keeps_who_and_verdict_apart():
    en = i18n.said("said.listed_measured_decides", who=i18n.said("part.by_counters"),
                   verdict="compute-bound", why="mac 0.90 >= 0.8", roof="memory-bound",
                   roof_why="AI 1 < ridge 184 FLOP/B")
    assert en == ("counters say compute-bound (mac 0.90 >= 0.8); the roofline says memory-bound "
                  "(AI 1 < ridge 184 FLOP/B), but the measured verdict decides: listed, not planned")
    assert i18n.localize(en, "zh") == ("计数器判定为 compute-bound（mac 0.90 >= 0.8）；roofline 判定为 "
                                       "memory-bound（AI 1 < ridge 184 FLOP/B），但以实测判定为准：列出但未纳入")
