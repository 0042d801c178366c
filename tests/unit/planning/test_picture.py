"""The design's picture of each planned layer (issue 30 part 6), on the bundled GENERATED
Llama-3.2-1B example profile and the REAL transformers source (copied to tmp_path).

The oracle is the profile itself, read here with the csv module: the kernels of the main stream
in start order. The picture's ops must be a contiguous run of them, its red targets the plan's
signatures, its arrows the plan's sites with their max_size, and its HBM-busy shares the
kernels' bytes (from their shapes) / 1.6 TB/s / their mean time."""

from __future__ import annotations

import csv
import re
import statistics
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def planned(tmp_path_factory, examples_dir):
    pytest.importorskip("transformers")
    from cannbot_prefetch import analyze

    ex = examples_dir / "llama3.2-1b-en"
    out = tmp_path_factory.mktemp("pic")
    src = tmp_path_factory.mktemp("src") / "modeling_llama.py"
    src.write_text(Path(__import__("transformers").__file__).parent.joinpath(
        "models", "llama", "modeling_llama.py").read_text(encoding="utf-8"), encoding="utf-8")
    res = analyze(str(ex / "profile"), model_src=str(src), model_config=str(ex / "config.json"),
                  out=str(out), max_sites=3,
                  src_map=(("/usr/local/lib/python3.10/site-packages",
                            str(Path(__import__("transformers").__file__).parents[1])),))
    written = res.save()
    return res, out, written, ex


def _kernels(ex: Path) -> list[dict]:
    path = next(ex.glob("profile/*/ASCEND_PROFILER_OUTPUT/kernel_details.csv"))
    with path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    main = [r for r in rows if r["Stream ID"] == "2"]
    return sorted(main, key=lambda r: float(r["Start Time(us)"].strip()))


def _svg(out: Path, name: str):
    return ET.parse(out / name).getroot()


def test_a_picture_per_planned_layer_is_written_and_linked(planned):
    res, out, written, _ = planned
    pics = sorted(p.name for p in out.glob("*.svg"))
    assert pics == ["prefetch_design.layer1.svg"]
    assert str(out / pics[0]) in written                   # written with the plan and the design
    design = (out / "prefetch_design.md").read_text(encoding="utf-8")
    assert f"]({pics[0]})" in design
    # the same plan renders the same bytes
    assert res.files()[out / pics[0]] == (out / pics[0]).read_text(encoding="utf-8")


def test_ops_are_the_profiles_main_stream_in_order(planned):
    _, out, _, ex = planned
    root = _svg(out, "prefetch_design.layer1.svg")
    ops = [g for g in root.iter(f"{SVG}g") if g.get("class") == "op"]
    assert [int(g.get("data-index")) for g in ops] == list(range(len(ops)))
    types = [g.get("data-type") for g in ops]
    seq = [r["Type"] for r in _kernels(ex)]
    runs = [i for i in range(len(seq)) if _matches(seq, i, types)]
    assert runs, types                                      # a contiguous run of real kernels
    assert len(types) >= 10                                 # a whole attention + MLP front


def _matches(seq: list[str], i: int, types: list[str]) -> bool:
    """`types` (framework ops, as the windows stage counts them) read from seq[i:]: an op named
    after its aclnn launcher (aclnnInplaceScatterUpdate) launches one or more consecutive kernels
    of its type (the two ScatterUpdate kernels of the KV-cache write)."""
    for t in types:
        kernel = re.sub(r"^aclnn(Inplace)?", "", t)
        if i >= len(seq) or seq[i] != kernel:
            return False
        i += 1
        while t != kernel and i < len(seq) and seq[i] == kernel:
            i += 1
    return True


def test_targets_and_arrows_match_the_plan(planned):
    res, out, _, ex = planned
    plan = res.plan
    root = _svg(out, "prefetch_design.layer1.svg")
    ops = [g for g in root.iter(f"{SVG}g") if g.get("class") == "op"]
    arrows = {g.get("data-site"): g for g in root.iter(f"{SVG}g") if g.get("class") == "prefetch"}
    assert set(arrows) == {s.id for s in plan.sites}
    for site in plan.sites:
        a = arrows[site.id]
        assert int(a.get("data-bytes")) == site.max_size
        assert float(a.get("data-window-us")) == round(site.evidence["window"]["time_us"], 1)
        assert f"{site.max_size:,} B" in "".join(a.itertext())
        tgt = [g for g in ops if g.get("data-target-of") == site.id]
        assert len(tgt) == 1 and tgt[0].get("data-type") == site.evidence["signature"]["type"]
    order = {g.get("data-target-of"): int(g.get("data-index")) for g in ops if g.get("data-target-of")}
    # q_proj's prefetch starts at the previous layer's down_proj output (rule 3a, cross-layer),
    # so the q_proj drawn is the next layer's: execution order o_proj, the MLP's gate_proj, then
    # the next layer's q_proj
    q = next(s for s in plan.sites if s.id == "llamaattention-q_proj")
    assert q.target.weight_expr.startswith("self.next_layer.")
    assert order["llamaattention-o_proj"] < order["llamamlp-gate_proj"] < order["llamaattention-q_proj"]
    # each arrow starts before its target and ends at it
    for site in plan.sites:
        d = arrows[site.id].find(f"{SVG}path").get("d")
        (x0, _), *_, (x1, _) = [tuple(map(float, p.split(","))) for p in re.findall(r"[\d.]+,[\d.]+", d)]
        assert x0 < x1


def test_hbm_busy_share_is_bytes_over_hbm_over_time(planned):
    _, out, _, ex = planned
    root = _svg(out, "prefetch_design.layer1.svg")
    gate = next(g for g in root.iter(f"{SVG}g") if g.get("data-target-of") == "llamamlp-gate_proj")
    # gate_proj: x [1, 2048] bf16, W [8192, 2048] bf16, y [1, 8192] bf16 -> bytes; its time is the
    # mean of the [1,2048;8192,2048] kernels after the warm-up step (gate and up share the shape)
    nbytes = (2048 + 8192 * 2048 + 8192) * 2
    durs = [float(r["Duration(us)"]) for r in _kernels(ex)
            if r["Type"] == "MatMulV3" and r["Input Shapes"].strip('"') == "1,2048;8192,2048"
            and r["Step Id"] != "1"]
    want = nbytes / 1.6e12 * 1e6 / statistics.mean(durs)
    assert float(gate.get("data-busy")) == pytest.approx(want, abs=0.02)
    norms = [g for g in root.iter(f"{SVG}g") if g.get("data-type") == "RmsNorm"]
    assert norms and all(float(g.get("data-busy")) < 0.05 for g in norms)


def test_a_picture_left_by_an_earlier_run_is_removed(planned, tmp_path):
    res, out, _, _ = planned
    from dataclasses import replace

    again = replace(res, out=str(tmp_path))
    (tmp_path / "prefetch_design.layer7.svg").write_text("<svg/>", encoding="utf-8")
    (tmp_path / "mine.svg").write_text("<svg/>", encoding="utf-8")
    again.save()
    assert sorted(p.name for p in tmp_path.glob("*.svg")) == ["mine.svg", "prefetch_design.layer1.svg"]


def test_the_caps_table_marks_only_the_cap_that_binds(planned):
    # issue 30 part 4: per planned site, "binds" on the bound_by row only (none when the
    # coefficient sets the size); a binding kind above max_size reads "no: above max_size"
    res, out, _, _ = planned
    design = (out / "prefetch_design.md").read_text(encoding="utf-8")
    for site in res.plan.sites:
        table = design.split(f"**{site.id}** —", 1)[1].split("bound by **", 1)[0]
        rows = {r.split("|")[1].strip(): r.split("|")[3].strip()
                for r in table.splitlines() if r.startswith("| ") and not r.startswith("| Cap")}
        binds = [name for name, mark in rows.items() if mark == "**binds**"]
        want = [] if site.basis.bound_by == "coefficient" else [site.basis.bound_by]
        assert binds == want, rows
        for c in site.basis.caps:
            if c.binding and c.name not in ("weight", site.basis.bound_by):
                assert rows[c.name] == "no: above max_size" and c.bytes >= site.max_size
    assert any(s.basis.bound_by == "hbm_headroom" for s in res.plan.sites)   # both cases seen
