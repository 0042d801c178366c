"""A real PyTorch profiler trace (CPU, torch 2.13) of a tiny Llama-style model, read back."""

from __future__ import annotations

import polars as pl
import pytest

from cannbot_prefetch.profiling.load import load_profile
from cannbot_prefetch.profiling.torch_trace import output_dims

HIDDEN, INTER, TOKENS = 64, 160, 4


@pytest.fixture(scope="module")
def torch_trace(tmp_path_factory):
    torch = pytest.importorskip("torch")
    nn = torch.nn

    class LlamaMLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.gate_proj = nn.Linear(HIDDEN, INTER, bias=False)
            self.up_proj = nn.Linear(HIDDEN, INTER, bias=False)
            self.down_proj = nn.Linear(INTER, HIDDEN, bias=False)

        def forward(self, x):
            return self.down_proj(nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))

    class LlamaAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.q_proj = nn.Linear(HIDDEN, HIDDEN, bias=False)
            self.k_proj = nn.Linear(HIDDEN, HIDDEN, bias=False)
            self.v_proj = nn.Linear(HIDDEN, HIDDEN, bias=False)
            self.o_proj = nn.Linear(HIDDEN, HIDDEN, bias=True)

        def forward(self, x):
            q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
            att = torch.matmul(q, k.transpose(-1, -2)).softmax(-1)
            return self.o_proj(torch.bmm(att, v))

    class LlamaDecoderLayer(nn.Module):
        def __init__(self):
            super().__init__()
            self.self_attn = LlamaAttention()
            self.mlp = LlamaMLP()

        def forward(self, x):
            x = x + self.self_attn(x)
            return x + self.mlp(x)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([LlamaDecoderLayer(), LlamaDecoderLayer()])

        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            return x

    model = Model().eval()
    x = torch.randn(1, TOKENS, HIDDEN)
    with torch.no_grad():
        model(x)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                    record_shapes=True, with_stack=True) as prof:
            model(x)
    path = tmp_path_factory.mktemp("trace") / "llama_cpu_trace.json"
    prof.export_chrome_trace(str(path))
    return path


def test_outermost_ops_only(torch_trace):
    p = load_profile(torch_trace)
    df = p.table.df
    assert p.info.layout == "torch_trace" and p.info.level is None
    names = df["name"].to_list()
    # 7 Linear modules per layer x 2 layers; their aten::matmul/mm/t children are not rows
    assert names.count("aten::linear") == 14
    assert "aten::mm" not in names and "aten::t" not in names and "aten::addmm" not in names
    assert names.count("aten::matmul") == 2 and names.count("aten::bmm") == 2
    assert (df["type"] == df["name"]).all() and df["core"].unique().to_list() == ["CPU"]
    # rows on one thread never overlap: nothing is counted twice
    d = df.sort("start_ns")
    ends = (d["start_ns"] + (d["dur_us"] * 1000).cast(pl.Int64)).to_list()
    starts = d["start_ns"].to_list()
    assert all(starts[i + 1] >= ends[i] - 1 for i in range(len(starts) - 1))


def test_linear_shapes_and_stacks(torch_trace):
    df = load_profile(torch_trace).table.df
    lin = df.filter(pl.col("name") == "aten::linear").sort("start_ns")
    shapes = lin["input_shapes"].to_list()
    outs = lin["output_shapes"].to_list()
    # first layer: q,k,v,o then gate, up, down (weight [N,K])
    assert shapes[:4] == [f"1,{TOKENS},{HIDDEN};{HIDDEN},{HIDDEN};"] * 3 + \
        [f"1,{TOKENS},{HIDDEN};{HIDDEN},{HIDDEN};{HIDDEN}"]
    assert shapes[4] == f"1,{TOKENS},{HIDDEN};{INTER},{HIDDEN};"
    assert outs[4] == f"1,{TOKENS},{INTER}" and outs[6] == f"1,{TOKENS},{HIDDEN}"
    assert lin["input_dtypes"][0].startswith("FLOAT;FLOAT")  # torch "float" normalized
    gate = lin.row(4, named=True)["stack"].split(";")
    assert any(f.startswith("nn.Module: Linear_") for f in gate)
    mlp = next(i for i, f in enumerate(gate) if f == "nn.Module: LlamaMLP_0")
    layer = next(i for i, f in enumerate(gate) if f == "nn.Module: LlamaDecoderLayer_0")
    assert mlp < layer                                      # innermost first
    assert any("test_torch_trace.py(" in f and f.endswith(": forward") for f in gate[:mlp + 2])
    mm = df.filter(pl.col("name") == "aten::matmul").row(0, named=True)
    assert mm["output_shapes"] == f"1,{TOKENS},{TOKENS}"
    bmm = df.filter(pl.col("name") == "aten::bmm").row(0, named=True)
    assert bmm["output_shapes"] == f"1,{TOKENS},{HIDDEN}"


@pytest.mark.parametrize("op, dims, out", [
    ("aten::linear", [[1, 16, 256], [1024, 256], []], [1, 16, 1024]),
    ("aten::linear", [[16, 256], [1024, 255], []], None),
    ("aten::mm", [[4, 8], [8, 3]], [4, 3]),
    ("aten::addmm", [[3], [4, 8], [8, 3]], [4, 3]),
    ("aten::bmm", [[2, 4, 8], [2, 8, 3]], [2, 4, 3]),
    ("aten::baddbmm", [[2, 4, 3], [2, 4, 8], [2, 8, 3]], [2, 4, 3]),
    ("aten::matmul", [[8], [8, 3]], [3]),
    ("aten::matmul", [[5, 1, 4, 8], [6, 8, 3]], [5, 6, 4, 3]),
    ("aten::matmul", [[4, 8], [8]], [4]),
    ("aten::matmul", "1,16,256;\r\n256,8", [1, 16, 8]),      # Ascend "Input Dims" text
])
def test_output_dims(op, dims, out):
    assert output_dims(op, dims) == out


def test_profiler_steps_become_steps(tmp_path):
    torch = pytest.importorskip("torch")
    lin = torch.nn.Linear(16, 32)
    x = torch.randn(2, 16)
    sched = torch.profiler.schedule(wait=0, warmup=1, active=2, repeat=1)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                record_shapes=True, with_stack=True, acc_events=True,
                                schedule=sched) as prof:
        for _ in range(4):
            lin(x)
            lin(x)
            prof.step()
    path = tmp_path / "steps.json"
    prof.export_chrome_trace(str(path))
    p = load_profile(path)
    assert p.info.steps_available == (1, 2) and p.info.warmup_excluded == (1,)
    df = p.table.df
    assert df["name"].to_list() == ["aten::linear", "aten::linear"]      # ProfilerStep is no op
    assert df["step"].to_list() == [2, 2] and df["output_shapes"].to_list() == ["2,32"] * 2
    assert load_profile(path, include_warmup=True).info.rows == 4


def test_gzipped_trace(torch_trace, tmp_path):
    import gzip
    gz = tmp_path / "trace.pt.trace.json.gz"
    gz.write_bytes(gzip.compress(torch_trace.read_bytes()))
    assert load_profile(gz).table.df.equals(load_profile(torch_trace).table.df.with_columns(
        pl.lit(gz.name).alias("source")))
    bad = tmp_path / "broken.json.gz"
    bad.write_bytes(gzip.compress(torch_trace.read_bytes())[:200])
    from cannbot_prefetch.errors import InputError
    with pytest.raises(InputError, match="broken.json.gz"):
        load_profile(bad)


def test_real_cuda_trace_uses_device_kernel_time():
    """The measured H200 trace: ops are timed by their CUDA kernels, not by host launch time."""
    from pathlib import Path

    trace = Path(__file__).resolve().parents[3] / "examples/h200-llama3.2-1b-cuda/trace.json.gz"
    prof = load_profile(trace)
    df = prof.table.df
    assert set(df["core"].unique()) == {"GPU"}
    lm = df.filter(pl.col("input_shapes") == "8,1,2048;128256,2048;")
    assert lm.height == 3 and lm["input_dtypes"][0] == "BF16;BF16;"
    # 525 MB read at <= 4.8 TB/s takes >= 109 us: a device time, never the ~70 us host time.
    assert lm["dur_us"].min() > 109.0
    assert any("device kernels found" in n for n in prof.info.notes)
