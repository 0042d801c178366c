"""One rule for "which frame of a call stack is the model's" (profiling/stacks.py), used by
attribution (windows/clusters.py), mapping (mapping/stack.py) and the report (report/sites.py)."""

from __future__ import annotations

from cannbot_prefetch.profiling.stacks import first_model_frame, is_framework_frame

# Frame text as the real sample msinsight/.../trace_view.json writes `Call stack` (innermost first).
STACK = ("/usr/local/lib/python3.10/site-packages/torch/nn/modules/linear.py(125): forward;"
         "/usr/local/lib/python3.10/site-packages/torch/nn/modules/module.py(1736): _call_impl;"
         "/root/models/modeling_llama.py(190): forward;"
         "/root/models/modeling_llama.py(330): forward")


def test_first_frame_outside_torch_is_the_models():
    assert first_model_frame(STACK) == "/root/models/modeling_llama.py(190): forward"
    assert first_model_frame(STACK.split(";")) == "/root/models/modeling_llama.py(190): forward"


def test_framework_frames_torch_npu_windows_paths_and_synthetic_frames():
    assert is_framework_frame(r"C:\py\Lib\site-packages\torch_npu\npu\utils.py(3): f")
    assert is_framework_frame("/x/torch/_dynamo/eval_frame.py(1): _fn")
    assert is_framework_frame("<frozen runpy>(88): _run_code")
    assert not is_framework_frame("/x/torchvision_like/mymodel.py(3): forward")
    assert not is_framework_frame("/x/transformers/models/llama/modeling_llama.py(3): forward")
    assert first_model_frame("") == "" and first_model_frame(None) == ""
