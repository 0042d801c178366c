"""Render ReportData as Markdown (pure: data in, text out), in English or Chinese.

Layout: banner, verdict, inputs, then the seed's seven items ("输出要求"):
  1 targets and why  2 roofline conclusions  3 why each window  4 switches and code path
  5 max_size basis   6 validations (before/after tables, checklist, success rule, or the expected
  gain in baseline-only mode)  7 risks and next steps; then how to run, and where every number
came from. Chinese uses the seed's terms (目标算子, 依赖窗口, 关键路径, 成功标准, 后续调优建议 ...).
"""

from __future__ import annotations

from .measure import Stat
from .build import ReportData
from ..i18n import pairs
from ..gain import optimistic_share
from .expected import PUBLIC_E2E_RANGE, PUBLIC_MEASUREMENTS, PUBLIC_SOURCE
from .rules import Check


class _T:
    def __init__(self, lang: str):
        self.zh = lang == "zh"

    def __call__(self, en: str, zh: str) -> str:
        return zh if self.zh else en


CHECK_NAMES = pairs("report.check")   # configs/messages.yaml
ACTION_NAMES = pairs("report.action")   # configs/messages.yaml
SIGNAL_NAMES = pairs("report.signal")   # configs/messages.yaml
SITE_OUTCOMES = pairs("report.outcome")   # configs/messages.yaml
BANNER_NAMES = pairs("report.banner")   # configs/messages.yaml
OVERALL = pairs("report.overall")   # configs/messages.yaml


def _f(x, nd: int = 2) -> str:
    if x is None:
        return "–"
    if isinstance(x, float):
        return f"{x:,.{nd}f}"
    return str(x)


def _stat(s: Stat | None) -> str:
    if s is None:
        return "–"
    return f"{s.mean:,.2f} ± {s.stdev:,.2f} (n={s.n})"


def _pct(before, after) -> str:
    if before in (None, 0) or after is None:
        return "–"
    return f"{(after - before) / before * 100:+.1f}%"


def _mark(ok: bool | None) -> str:
    return "✅" if ok else ("❌" if ok is False else "–")


def _mib(b) -> str:
    return "–" if b is None else f"{b / 2**20:,.2f} MiB ({b:,} B)"


def render(d: ReportData, lang: str, files: dict[str, str]) -> str:
    t = _T(lang)
    out: list[str] = []
    w = out.append
    w(t("# Weight prefetch report (torch_npu.npu_prefetch)", "# Prefetch 性能优化报告(torch_npu.npu_prefetch)"))
    w("")
    for b in d.banners:
        en, zh = BANNER_NAMES.get(b.code, (b.code, b.code))
        w(t(f"> **⚠ MISMATCH — {en}.** {b.text}. The numbers below are not a valid comparison; "
            "fix the inputs and run the report again (exit code 3).",
            f"> **⚠ 输入不匹配 — {zh}。** {b.text}。以下数据不能作为有效对比,请修正输入后重新生成报告(退出码 3)。"))
        w("")
    en, zh = OVERALL[d.overall]
    w(t(f"**Verdict: {en}.**", f"**结论:{zh}。**"))
    w("")
    _inputs(d, t, w, files)
    _item1(d, t, w)
    _item2(d, t, w, files)
    _item3(d, t, w)
    _item4(d, t, w)
    _item5(d, t, w)
    _item6(d, t, w)
    _item7(d, t, w, files)
    _how_to_run(d, t, w, files)
    _sources(d, t, w)
    return "\n".join(out).rstrip() + "\n"


def _inputs(d: ReportData, t, w, files) -> None:
    b, o = d.baseline, d.optimized
    hw = d.hardware
    w(t("## Inputs", "## 输入"))
    w("")
    w(t("| Input | Value |", "| 输入 | 值 |"))
    w("|---|---|")
    w(t(f"| Plan | `{d.plan_path}` (status {d.plan.status}, mode {d.plan.mode}) |",
        f"| 预取方案 | `{d.plan_path}`(状态 {d.plan.status},模式 {d.plan.mode})|"))
    w(t(f"| Baseline profile ({d.plan.switch.name}=False) | `{b.path}`: steps {list(b.steps) or '–'}, "
        f"warm-up excluded {list(b.warmup_excluded) or '–'}, {b.rows:,} kernels |",
        f"| Baseline profiling({d.plan.switch.name}=False)| `{b.path}`:step {list(b.steps) or '–'},"
        f"已排除预热 step {list(b.warmup_excluded) or '–'},{b.rows:,} 个 kernel |"))
    if o is not None:
        w(t(f"| Optimized profile ({d.plan.switch.name}=True) | `{o.path}`: steps {list(o.steps) or '–'}, "
            f"warm-up excluded {list(o.warmup_excluded) or '–'}, {o.rows:,} kernels |",
            f"| 优化后 profiling({d.plan.switch.name}=True)| `{o.path}`:step {list(o.steps) or '–'},"
            f"已排除预热 step {list(o.warmup_excluded) or '–'},{o.rows:,} 个 kernel |"))
    else:
        w(t("| Optimized profile | none: baseline-only mode (expected gain, not a measurement) |",
            "| 优化后 profiling | 无:仅 baseline 模式(给出预期收益分析,不是实测)|"))
    w(t(f"| Hardware | {hw.get('name', '?')} ({hw.get('detected_from', '')}); HBM "
        f"{hw.get('hbm_bw_tbps', hw.get('hbm_bw', '?'))} TB/s |",
        f"| 硬件 | {hw.get('name', '?')}({hw.get('detected_from', '')});HBM "
        f"{hw.get('hbm_bw_tbps', hw.get('hbm_bw', '?'))} TB/s |"))
    if d.verify is not None:
        w(t(f"| Verify result | `{d.verify.path}`: passed = {d.verify.passed} |",
            f"| 功能验证结果 | `{d.verify.path}`:passed = {d.verify.passed} |"))
    th = d.thresholds
    w(t(f"| Thresholds | configs/policy.yaml `report:`: success needs a gain (target faster or critical path "
        f"shorter) and both guards (window not degraded, outputs identical); a change counts above "
        f"{th.noise_sigma:g}× the combined spread and {th.min_change_share * 100:g}% |",
        f"| 阈值 | configs/policy.yaml `report:`:成功须有收益(目标算子变快或关键路径缩短)且两项保护均满足"
        f"(依赖窗口未退化、功能结果无差异);"
        f"变化须超过 {th.noise_sigma:g} 倍合并标准差且不少于 {th.min_change_share * 100:g}% 才计入 |"))
    w("")


def _sig(site) -> str:
    s = site.evidence.get("signature") or {}
    return f"{s.get('type', '?')} `{s.get('input_shapes', '?')}` {s.get('dtypes', '')}"


def _item1(d: ReportData, t, w) -> None:
    w(t("## 1. Target ops and why", "## 1. 选了哪些目标算子,为什么"))
    w("")
    w(t("| Site | Target (class.attr) | Kernel signature | Mapping | Verdict (analytic / measured) | Mean µs in plan's profile |",
        "| 位置 | 目标算子(类.属性)| Kernel 签名 | 映射方式 | 判定(解析 / 实测)| 方案所用 profiling 中平均 µs |"))
    w("|---|---|---|---|---|---|")
    for s in d.plan.sites:
        ev = s.evidence
        w(f"| `{s.id}` | `{s.target.cls}.{s.target.attr}` | {_sig(s)} | {s.mapping} | "
          f"{ev.get('verdict') or '–'} / {ev.get('measured_verdict') or '–'} | {_f(ev.get('mean_us'))} |")
    src = d.plan.created_from.get("profile", "?")
    w("")
    w(t(f"Source: the plan's evidence, measured by `analyze` in `{src}`. A target is chosen because the "
        "roofline puts it below the ridge (memory-bound) and a safe window precedes it (the workflow's step 1, docs/workflow.md).",
        f"来源:方案中的 evidence,由 `analyze` 在 `{src}` 中测得。选择依据:roofline 判定为 memory-bound"
        "(低于 ridge)且前面存在安全的依赖窗口(工作流第一步,docs/workflow.md)。"))
    if d.plan.rejections:
        w("")
        w(t("Candidates not planned:", "未纳入方案的候选:"))
        for r in d.plan.rejections[:10]:
            w(f"- {r.get('signature', '?')}: {r.get('reason_code', '')} — {r.get('reason', '')}")
    w("")


def _item2(d: ReportData, t, w, files) -> None:
    w(t("## 2. Roofline conclusions", "## 2. roofline 关键结论"))
    w("")
    b = d.baseline
    if d.memory_bound:
        w(t("Memory-bound MatMul-family signatures in the baseline (by total time):",
            "Baseline 中的 memory-bound MatMul 类算子(按总耗时排序):"))
        w("")
        w(t("| Signature | Count | Mean µs | Share of step | Analytic | Measured | Target |",
            "| 签名 | 次数 | 平均 µs | 占 step 比例 | 解析判定 | 实测判定 | 目标算子 |"))
        w("|---|---|---|---|---|---|---|")
        for r in d.memory_bound:
            share = f"{r.share * 100:.1f}%" if r.share is not None else "–"
            w(f"| `{r.label}` | {r.count} | {_f(r.mean_us)} | {share} | {r.verdict} | "
              f"{r.measured_verdict or '–'} | {'★' if r.target else ''} |")
        w("")
    else:
        w(t("No memory-bound MatMul-family signature was classified in the baseline.",
            "Baseline 中没有被判定为 memory-bound 的 MatMul 类算子。"))
        w("")
    w(t(f"Critical path (baseline): {_stat(b.step_time)} µs per step, from {b.step_time_source or '–'}; "
        f"compute stream {b.compute_stream or '–'}: busy {_stat(b.compute_busy)} µs, idle {_stat(b.compute_idle)} µs.",
        f"关键路径(baseline):每 step {_stat(b.step_time)} µs,来自 {b.step_time_source or '–'};"
        f"主计算流 {b.compute_stream or '–'}:忙 {_stat(b.compute_busy)} µs,空闲/等待 {_stat(b.compute_idle)} µs。"))
    w("")
    if "chart" in files:
        w(t(f"![Roofline: MatMul-family ops against the roof of {d.hardware.get('name', '?')}; "
            f"targets marked ★]({files['chart']})",
            f"![Roofline:MatMul 类算子与 {d.hardware.get('name', '?')} 的屋顶线;★ 为目标算子]({files['chart']})"))
        w("")
        w(t("Chart: x = arithmetic intensity (FLOP/byte, roofline/cost.py formulas), y = achieved TFLOPS "
            "(FLOPs / measured mean time in the baseline); roof = min(peak, AI × HBM bandwidth) of the hardware above.",
            "图:横轴为计算强度(FLOP/byte,roofline/cost.py 公式),纵轴为实测 TFLOPS(FLOPs / baseline 中实测平均耗时);"
            "屋顶线 = min(峰值, AI × HBM 带宽),硬件参数见上。"))
        w("")


def _item3(d: ReportData, t, w) -> None:
    w(t("## 3. Why each dependency window", "## 3. 为什么选这个 dependency 窗口(依赖窗口)"))
    w("")
    w(t("| Site | Dependency | Window ops | Start | Window µs (plan) | Reason | Window ops µs, baseline (measured) |",
        "| 位置 | 依赖节点 | 窗口算子 | 起点 | 窗口时长 µs(方案)| 原因 | 窗口算子耗时 µs,baseline(实测)|"))
    w("|---|---|---|---|---|---|---|")
    for s in d.plan.sites:
        win = s.evidence.get("window") or {}
        bm = d.baseline.site(s.id)
        ops = ", ".join(map(str, win.get("ops") or [])) or "–"
        w(f"| `{s.id}` | `{s.dependency}` | {ops} | {win.get('start', '–')} | {_f(win.get('time_us'))} | "
          f"{win.get('reason', '–')} | {_stat(bm.window) if bm else '–'} |")
    w("")
    w(t("A window is a light predecessor (norm, RoPE, SwiGLU, cast, small MatMul) or the output of a large "
        "MatMul: not memory-bound, long enough to hide the prefetch (window rules 3a/3b, docs/sources.md).",
        "依赖窗口为轻量前序算子(RMSNorm、ROPE、SwiGLU、cast、小 MatMul)或大 MatMul 的输出:"
        "非 memory-bound,且有足够执行时间掩盖预取(窗口规则 3a/3b,docs/sources.md)。"))
    w("")


def _item4(d: ReportData, t, w) -> None:
    sw = d.plan.switch
    w(t("## 4. Switches and code path", "## 4. 加了哪些开关与代码路径"))
    w("")
    cfg = f"`{sw.config_file}` → " if sw.config_file else ""
    w(t(f"Switch `{sw.name}` (default {sw.default}): {cfg}config key `{sw.config_path}` → model `__init__` "
        f"(`self.{sw.name}`) → forward. Execution mode `{d.plan.mode}`.",
        f"开关 `{sw.name}`(默认 {sw.default}):{cfg}配置项 `{sw.config_path}` → 模型 `__init__`"
        f"(`self.{sw.name}`)→ forward。执行模式 `{d.plan.mode}`。"))
    w("")
    w(t("| Site | File | Inserted in | Anchor | Weight | Join | Token guard |",
        "| 位置 | 文件 | 插入位置 | 锚点 | 权重 | 汇合点 | token 数保护 |"))
    w("|---|---|---|---|---|---|---|")
    for s in d.plan.sites:
        w(f"| `{s.id}` | `{s.target.file}` | `{s.insert.cls}.{s.insert.method}` | {s.insert.position} "
          f"`{s.insert.anchor_call}` | `{s.target.weight_expr}` | `{s.join.cls}.{s.join.method}` {s.join.where} | "
          f"{s.max_tokens if s.max_tokens is not None else '–'} |")
    w("")
    w(t("Inserted code carries the marker `# cannbot-prefetch: <site id>`; `cannbot prefetch apply --revert` removes it.",
        "插入的代码带有标记 `# cannbot-prefetch: <位置 id>`;`cannbot prefetch apply --revert` 可撤销。"))
    w("")


def _item5(d: ReportData, t, w) -> None:
    w(t("## 5. max_size basis", "## 5. max_size 取值依据"))
    w("")
    for s in d.plan.sites:
        b = s.basis
        dims = " × ".join(str(x) for x in b.dims)
        w(t(f"- `{s.id}`: weight {dims} × {b.dtype_bytes:g} B × coefficient {b.coefficient:g} "
            f"(formula `{b.formula or 'dims*b*c'}`) → **max_size {_mib(s.max_size)}**, bound by `{b.bound_by}`.",
            f"- `{s.id}`:权重 {dims} × {b.dtype_bytes:g} 字节 × 保守系数 {b.coefficient:g}"
            f"(公式 `{b.formula or 'dims*b*c'}`)→ **max_size {_mib(s.max_size)}**,受 `{b.bound_by}` 约束。"))
        for c in b.caps:
            risk = "" if c.binding else t(" (risk, not binding)", "(风险提示,不作上限)")
            w(f"  - {c.name}{risk}: {_mib(c.bytes)} {('— ' + c.note) if c.note else ''}")
        ladder = s.ladder
        w(t(f"  - ladder: up {ladder.get('up', [])}, down {ladder.get('down', [])}",
            f"  - 调整阶梯:增大 {ladder.get('up', [])},减小 {ladder.get('down', [])}"))
    w("")
    if d.cmo is not None:
        c = d.cmo
        w(t(f"CMO rate measured in the optimized profile: **{c.gbps:g} GB/s** ({c.note}). The next plan's "
            f"`cmo_rate_x_window` caps use it and bind; for a fresh plan pass `analyze --cmo-bw {c.gbps:g}`.",
            f"优化后 profiling 中实测 CMO 速率:**{c.gbps:g} GB/s**({c.note})。下一步方案中的 `cmo_rate_x_window` "
            f"上限按此计算并生效;重新分析时可传 `analyze --cmo-bw {c.gbps:g}`。"))
        w("")
    elif d.optimized is not None:
        w(t("No CMO / prefetch task was found in the optimized profile: the CMO rate stays uncalibrated "
            "(and if the target did not change, check that the switch was on).",
            "优化后 profiling 中未找到 CMO/预取任务:CMO 速率无法校准(若目标算子也没有变化,请确认开关已开启)。"))
        w("")


def _check_row(c: Check, t, unit: str = "µs") -> str:
    en, zh = CHECK_NAMES[c.key]
    if c.key == "outputs_identical":
        return f"| {t(en, zh)} | – | – | – | – | {_mark(c.ok)} | {c.source} |"
    return (f"| {t(en, zh)} | {_f(c.before)} | {_f(c.after)} | {_pct(c.before, c.after)} | "
            f"{_f(c.threshold)} | {_mark(c.ok)} | {c.source} |")


def _item6(d: ReportData, t, w) -> None:
    w(t("## 6. Validations done", "## 6. 做了哪些验证"))
    w("")
    if d.optimized is None:
        _expected(d, t, w)
        return
    b, o = d.baseline, d.optimized
    w(t("### Before / after (per step, warm-up excluded; mean ± stdev, n)",
        "### 性能对比(按 step 统计,已排除预热;均值 ± 标准差,样本数)"))
    w("")
    sw = d.plan.switch.name
    w(t(f"| Quantity | Baseline ({sw}=False) | Optimized ({sw}=True) | Change | Source |",
        f"| 指标 | Baseline({sw}=False)| 优化后({sw}=True)| 改善百分比 | 来源 |"))
    w("|---|---|---|---|---|")
    w(t(f"| Critical path (step time) µs | {_stat(b.step_time)} | {_stat(o.step_time)} | "
        f"{_pct(_m(b.step_time), _m(o.step_time))} | {o.step_time_source or b.step_time_source} |",
        f"| 关键路径(step 耗时)µs | {_stat(b.step_time)} | {_stat(o.step_time)} | "
        f"{_pct(_m(b.step_time), _m(o.step_time))} | {o.step_time_source or b.step_time_source} |"))
    w(t(f"| Compute stream idle / wait µs | {_stat(b.compute_idle)} | {_stat(o.compute_idle)} | "
        f"{_pct(_m(b.compute_idle), _m(o.compute_idle))} | gaps between kernels on stream {b.compute_stream} |",
        f"| 主流空洞/等待 µs | {_stat(b.compute_idle)} | {_stat(o.compute_idle)} | "
        f"{_pct(_m(b.compute_idle), _m(o.compute_idle))} | 流 {b.compute_stream} 上 kernel 间空隙 |"))
    for s in d.plan.sites:
        bs, os_ = b.site(s.id), o.site(s.id)
        if not bs or not os_:
            continue
        w(t(f"| `{s.id}` target op µs per kernel | {_stat(bs.target)} | {_stat(os_.target)} | "
            f"{_pct(_m(bs.target), _m(os_.target))} | {bs.instances} / {os_.instances} kernels matched by {bs.matched_by or '–'} |",
            f"| `{s.id}` 目标算子 µs/次 | {_stat(bs.target)} | {_stat(os_.target)} | "
            f"{_pct(_m(bs.target), _m(os_.target))} | 按签名匹配 {bs.instances} / {os_.instances} 个 kernel |"))
        w(t(f"| `{s.id}` window ops µs | {_stat(bs.window)} | {_stat(os_.window)} | "
            f"{_pct(_m(bs.window), _m(os_.window))} | {', '.join(bs.window_ops) or '–'} before each target |",
            f"| `{s.id}` 依赖窗口算子 µs | {_stat(bs.window)} | {_stat(os_.window)} | "
            f"{_pct(_m(bs.window), _m(os_.window))} | 每次目标算子前的 {', '.join(bs.window_ops) or '–'} |"))
        if bs.l2_hit_rate is not None or os_.l2_hit_rate is not None:
            w(t(f"| `{s.id}` L2 hit rate of the target | {_rate(bs.l2_hit_rate)} | {_rate(os_.l2_hit_rate)} | – | "
                f"{os_.l2_source or bs.l2_source} |",
                f"| `{s.id}` 目标算子 L2 命中率 | {_rate(bs.l2_hit_rate)} | {_rate(os_.l2_hit_rate)} | – | "
                f"{os_.l2_source or bs.l2_source} |"))
    if b.l2_hit_rate is not None or o.l2_hit_rate is not None:
        w(t(f"| L2 hit rate, all ops | {_rate(b.l2_hit_rate)} | {_rate(o.l2_hit_rate)} | – | {o.l2_source or b.l2_source} |",
            f"| L2 命中率(全部算子)| {_rate(b.l2_hit_rate)} | {_rate(o.l2_hit_rate)} | – | {o.l2_source or b.l2_source} |"))
    w("")
    if o.streams or b.streams:
        w(t("### Other streams (new long tails)", "### 其他流(是否出现新的长拖尾)"))
        w("")
        w(t("| Stream | Kernels (base → opt) | Busy µs/step | CMO/prefetch tasks | Tail past compute µs/step (base → opt) |",
            "| 流 | kernel 数(baseline → 优化后)| 忙碌 µs/step | CMO/预取任务数 | 超出主流的拖尾 µs/step(baseline → 优化后)|"))
        w("|---|---|---|---|---|")
        bmap = {s.stream: s for s in b.streams}
        for s in o.streams:
            p = bmap.get(s.stream)
            w(f"| {s.stream} | {p.kernels if p else 0} → {s.kernels} | {_f(p.busy_us) if p else '0'} → {_f(s.busy_us)} | "
              f"{p.cmo_kernels if p else 0} → {s.cmo_kernels} | {_f(p.tail_us) if p else '0'} → {_f(s.tail_us)} |")
        for s in b.streams:
            if s.stream not in {x.stream for x in o.streams}:
                w(f"| {s.stream} | {s.kernels} → 0 | {_f(s.busy_us)} → 0 | {s.cmo_kernels} → 0 | {_f(s.tail_us)} → 0 |")
        w("")
    w(t("### Verification checklist and success rule", "### 验证检查清单与成功标准"))
    w("")
    judged = {v.site_id for v in d.verdicts}
    for s in d.plan.sites:
        if s.id not in judged:
            w(t(f"- `{s.id}`: no verdict: its target was not found in both profiles (see the banner).",
                f"- `{s.id}`:无法判定:两份 profiling 中未同时找到其目标算子(见上方提示)。"))
            w("")
    for v in d.verdicts:
        en, zh = SITE_OUTCOMES[v.outcome]
        w(t(f"**`{v.site_id}`: {en}** (success = a gain — target faster or critical path shorter — "
            "with both guards: window not degraded, outputs identical).",
            f"**`{v.site_id}`:{zh}**(成功 = 有收益(目标算子变快或关键路径缩短)且两项保护均满足:"
            "依赖窗口未退化、功能结果无差异)。"))
        w("")
        w(t("| Check | Before | After | Change | Counts above (µs) | Result | Source |",
            "| 检查项 | 优化前 | 优化后 | 变化 | 计入阈值 (µs) | 结果 | 来源 |"))
        w("|---|---|---|---|---|---|---|")
        for c in v.checks:
            w(_check_row(c, t))
        tails = "new long tail" in " ".join(SIGNAL_NAMES.get(s, ("", ""))[0] for s in v.signals)
        w(t(f"| No new bottleneck on other streams | – | – | – | – | {_mark(not tails)} | stream tails above |",
            f"| 是否出现新的性能瓶颈(其他流长拖尾)| – | – | – | – | {_mark(not tails)} | 见上表 |"))
        w("")
    if d.verify is not None and d.verify.checks:
        w(t("Functional checks from verify:", "功能验证(verify)各项:"))
        for name, ok, detail in d.verify.checks:
            w(f"- {_mark(ok)} {name}{(': ' + detail) if detail else ''}")
        w("")
    elif d.verify is None:
        w(t("Outputs were not compared: pass `--verify-result verify.json` from `cannbot prefetch verify`.",
            "未对比输出一致性:请传入 `cannbot prefetch verify` 生成的 `--verify-result verify.json`。"))
        w("")


def _m(s: Stat | None):
    return s.mean if s else None


def _rate(r) -> str:
    return "–" if r is None else f"{r * 100:.1f}%"


def _expected(d: ReportData, t, w) -> None:
    e = d.expectation
    hw = d.hardware.get("name", "?")
    w(t("No optimized profile was given, so nothing was measured with the switch on. This is the "
        "expected improvement from the benefit model (docs/sources.md: saved ≈ P / BW_eff × (1 − BW_eff / BW_L2), "
        f"bounded by the op time minus its compute floor), computed by gain.py for {hw} — the same "
        "function and inputs that gave the plan's `saving_us`, so analyze, the design and this report "
        "show one number — set against the target times measured in the baseline.",
        "未提供优化后 profiling,因此没有开启开关的实测数据。以下为预期的性能改善分析:收益模型"
        "(docs/sources.md:节省 ≈ P / BW_eff × (1 − BW_eff / BW_L2),上限为算子耗时减去计算下限),"
        f"由 gain.py 按 {hw} 计算——与方案 `saving_us` 使用同一函数与输入,analyze、设计文档与本报告给出同一数值——"
        "并与 baseline 实测的目标算子耗时对比。"))
    w("")
    w(t("| Site | Target µs (baseline, measured) | Kernels/step (plan) | Saving µs per kernel, low / mid / high | Saving µs per step, low / mid / high | Share of op (mid) | Flag |",
        "| 位置 | 目标算子 µs(baseline 实测)| 每 step 次数(方案)| 每次节省 µs 低 / 中 / 高 | 每 step 节省 µs 低 / 中 / 高 | 占算子比例(中)| 标记 |"))
    w("|---|---|---|---|---|---|---|")
    unknown = t("unknown (no profile)", "未知(无 profiling 数据)")
    for s in e.sites:
        target = f"{_f(s.target_us)} ± {_f(s.target_stdev)}" if s.found else (
            t("not found", "未找到") if d.baseline is not None else unknown)
        if s.saving_us is None:
            w(f"| `{s.site_id}` | {target} | {s.per_step:g} | {unknown} | {unknown} | – | |")
            continue
        share = f"{s.share[1] * 100:.1f}%" if s.share else "–"
        flag = t(f"optimistic (> {optimistic_share() * 100:.0f}% per op)",
                 f"偏乐观(单算子 > {optimistic_share() * 100:.0f}%)") if s.optimistic else ""
        w(f"| `{s.site_id}` | {target} | {s.per_step:g} | {' / '.join(f'{x:.2f}' for x in s.saving_us)} | "
          f"{' / '.join(f'{x:.1f}' for x in s.step_saving_us)} | {share} | {flag} |")
    w("")
    for s in e.sites:
        if s.note:
            w(f"- `{s.site_id}`: {s.note}")
    if any(s.note for s in e.sites):
        w("")
    if e.step_saving_us:
        lo, mid, hi = e.step_saving_us
        w(t(f"Expected saving per step, all sites: **{lo:.1f} / {mid:.1f} / {hi:.1f} µs** (low / mid / high).",
            f"所有位置合计每 step 预期节省:**{lo:.1f} / {mid:.1f} / {hi:.1f} µs**(低 / 中 / 高)。"))
        w("")
    if e.e2e_share:
        lo, mid, hi = (x * 100 for x in e.e2e_share)
        w(t(f"Expected end-to-end effect: **{lo:.2f}% / {mid:.2f}% / {hi:.2f}%** of the step time "
            f"(low / mid / high; step {_f(e.step_us)} ± {_f(e.step_stdev)} µs from {e.step_source}).",
            f"预期端到端效果:step 耗时降低 **{lo:.2f}% / {mid:.2f}% / {hi:.2f}%**(低 / 中 / 高;"
            f"step {_f(e.step_us)} ± {_f(e.step_stdev)} µs,来自 {e.step_source})。"))
        w("")
    w(t(f"Public measurements for comparison ({PUBLIC_SOURCE}):", f"公开实测数据对照({PUBLIC_SOURCE}):"))
    w("")
    for who, what, num in PUBLIC_MEASUREMENTS:
        w(f"- {who} ({what}): {num}")
    w("")
    if e.e2e_share:
        lo_pub, hi_pub = (x * 100 for x in PUBLIC_E2E_RANGE)
        mid = e.e2e_share[1] * 100
        if mid > hi_pub:
            w(t(f"The mid estimate ({mid:.2f}%) is above every public end-to-end measurement "
                f"({lo_pub:.2f}% to {hi_pub:.1f}%): treat it as optimistic.",
                f"中间估计({mid:.2f}%)高于所有公开端到端实测({lo_pub:.2f}% 至 {hi_pub:.1f}%):应视为偏乐观。"))
        elif mid < lo_pub:
            w(t(f"The mid estimate ({mid:.2f}%) is below the smallest public end-to-end gain ({lo_pub:.2f}%).",
                f"中间估计({mid:.2f}%)低于公开端到端实测的最小值({lo_pub:.2f}%)。"))
        else:
            w(t(f"The mid estimate ({mid:.2f}%) lies within the public end-to-end measurements "
                f"({lo_pub:.2f}% to {hi_pub:.1f}%).",
                f"中间估计({mid:.2f}%)处于公开端到端实测范围内({lo_pub:.2f}% 至 {hi_pub:.1f}%)。"))
        w("")
    w(t("The before/after tables and the verification checklist are produced by running the A/B script "
        "below on the NPU host, which calls this command again with both profiles.",
        "性能对比表与验证检查清单需在 NPU 机器上运行下方 A/B 测试脚本后生成(脚本会带上两份 profiling 再次调用本命令)。"))
    w("")
    if e.worth_enabling is None:
        w(t(f"**Cannot be judged without a profile**: {e.reason_in('en')}.",
            f"**无 profiling 数据,无法判定**:{e.reason_in('zh')}。"))
    elif e.worth_enabling:
        w(t(f"**Worth measuring**: {e.reason_in('en')}. Confirm with the A/B script below before enabling.",
            f"**值得实测**:{e.reason_in('zh')}。开启前请用下方 A/B 脚本实测确认。"))
    else:
        w(t(f"**Not worth enabling**: {e.reason_in('en')}.", f"**不建议开启(not worth enabling)**:{e.reason_in('zh')}。"))
    w("")


def _item7(d: ReportData, t, w, files) -> None:
    w(t("## 7. Risks and next steps", "## 7. 还有哪些风险或后续调优建议"))
    w("")
    if d.verdicts:
        w(t("| Site | Failure signals | Next step | max_size | Why |", "| 位置 | 失败信号 | 调整策略 | max_size | 原因 |"))
        w("|---|---|---|---|---|")
        for v in d.verdicts:
            sig = "; ".join(t(*SIGNAL_NAMES.get(s, (s, s))) for s in v.signals) or "–"
            size = (f"{_mib(v.max_size_from)} → {_mib(v.max_size_to)} (c {v.coefficient_from:g} → {v.coefficient_to:g})"
                    if v.max_size_to != v.max_size_from else _mib(v.max_size_from))
            w(f"| `{v.site_id}` | {sig} | {t(*ACTION_NAMES[v.action])} | {size} | {v.reason_in('zh' if t.zh else 'en')} |")
        w("")
    if "next_plan" in files:
        w(t(f"The plan for the next step is written to `{files['next_plan']}` (status `proposed`): review it, "
            "`cannbot prefetch apply` it, and measure again.",
            f"下一步的方案已写入 `{files['next_plan']}`(状态 `proposed`):审阅后执行 `cannbot prefetch apply`,再次测量。"))
        w("")
    w(t("Tuning order (the workflow's, docs/workflow.md): first fix the position and tune only max_size (50% → 70% → 100%, or "
        "50% → 30% → 10%); then fix max_size and move the dependency earlier or later; only then add more targets.",
        "调优顺序(工作流的规定,docs/workflow.md):先固定位置,只调 max_size(50% → 70% → 100% 或 50% → 30% → 10%);"
        "再固定 max_size,微调 dependency 位置(前移或后移);最后才考虑多目标叠加。"))
    w("")
    w(t("Risks:", "风险:"))
    w(t("- a larger max_size competes with the window for HBM bandwidth (watch the window ops);",
        "- max_size 过大会与依赖窗口争抢 HBM 带宽(关注前序算子耗时);"))
    w(t("- in graph mode the dependency must be the target's real predecessor, or compilation fails or the order is lost;",
        "- 图模式下依赖节点必须与目标算子在逻辑时序上匹配,否则编译失败或顺序丢失;"))
    w(t("- several sites in flight share L2: add targets one at a time;",
        "- 多个位置同时预取会共享 L2:单个目标验证成功后再扩展;"))
    w(t("- prefill is guarded by the token-count limit; a changed batch or sequence length changes the benefit.",
        "- prefill 由 token 数保护;batch 或序列长度变化会改变收益。"))
    w("")


def _how_to_run(d: ReportData, t, w, files) -> None:
    w(t("## How to run the tests", "## 如何运行测试"))
    w("")
    script = files.get("ab_script", "run_prefetch_ab.py")
    w(t(f"On the NPU host (CANN + torch_npu), with the plan applied (`cannbot prefetch apply {d.plan_path} --write`):",
        f"在 NPU 机器上(已安装 CANN 与 torch_npu),并已应用方案(`cannbot prefetch apply {d.plan_path} --write`):"))
    w("")
    w("```bash")
    w(f"cannbot prefetch verify {d.plan_path} --factory my_pkg.build:make_model_and_inputs --out verify.json")
    w(f"python {script} --factory my_pkg.build:make_model_and_inputs --steps 10 --verify-result verify.json")
    w("```")
    w("")
    w(t(f"`{script}` runs the model with `{d.plan.switch.name}` off and on, each under `torch_npu.profiler` "
        "(Level1 + PipeUtilization, `with_stack=True`, L2 cache), then calls "
        "`cannbot prefetch report --plan … --baseline … --optimized …`.",
        f"`{script}` 分别在 `{d.plan.switch.name}` 关闭与开启时运行模型,均在 `torch_npu.profiler`"
        "(Level1 + PipeUtilization,`with_stack=True`,L2 cache)下采集,然后调用 "
        "`cannbot prefetch report --plan … --baseline … --optimized …`。"))
    w("")


def _sources(d: ReportData, t, w) -> None:
    w(t("## Where the numbers come from", "## 数据来源"))
    w("")
    w(t(f"- Measured: baseline `{d.baseline.path}`" + (f", optimized `{d.optimized.path}`" if d.optimized else "")
        + "; per-step statistics over the kept steps (first step dropped as warm-up by the loader).",
        f"- 实测:baseline `{d.baseline.path}`" + (f",优化后 `{d.optimized.path}`" if d.optimized else "")
        + ";按保留的 step 统计(加载时已排除首个预热 step)。"))
    srcs = d.hardware.get("sources") or {}
    hw_src = "; ".join(f"{k}: {v}" for k, v in list(srcs.items())[:4]) if isinstance(srcs, dict) else ""
    w(t(f"- Hardware numbers: {d.hardware.get('name', '?')} profile ({hw_src or 'configs/hardware'}).",
        f"- 硬件参数:{d.hardware.get('name', '?')}({hw_src or 'configs/hardware'})。"))
    w(t("- Plan numbers (sizes, caps, expected saving): the plan file, computed by `analyze` (the formulas of docs/sources.md).",
        "- 方案数据(大小、上限、预期节省):来自方案文件,由 `analyze` 按 docs/sources.md 的公式计算。"))
    for m in (d.baseline, d.optimized):
        for sm in (m.sites if m else ()):
            if sm.note:
                w(f"- {m.label} `{sm.site_id}`: {sm.note}")
    for n in d.notes:
        w(f"- {n}")
    for n in d.baseline.notes[:5]:
        w(f"- baseline: {n}")
    if d.optimized:
        for n in d.optimized.notes[:5]:
            w(f"- optimized: {n}")
