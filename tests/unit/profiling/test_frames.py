"""One rule for "which frame of a call stack is the model's" (profiling/stacks.py `Frames`,
built from the run's policy), used by attribution (windows/clusters.py), mapping
(mapping/stack.py) and the report (report/sites.py)."""

from __future__ import annotations

import re

from cannbot_prefetch.policy import Policy
from cannbot_prefetch.profiling.stacks import Frames

FRAMES = Frames.of(Policy.load().op_classes)      # the shipped `framework_frames`
first_model_frame, is_framework_frame = FRAMES.first_model, FRAMES.is_framework

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


def test_the_answers_belong_to_one_frames_object():
    """Another table gives other answers: nothing is kept between two `Frames` (a run's
    answers are the run's), and one object answers a stack text once."""
    assert first_model_frame(STACK) == "/root/models/modeling_llama.py(190): forward"
    none = Frames()                           # no framework frames: the innermost is the model's
    assert none.first_model(STACK).endswith("linear.py(125): forward")
    models = Frames((re.compile("modeling_llama"),))
    assert models.first_model(STACK).endswith("linear.py(125): forward")
    assert Frames.of({"framework_frames": ["linear", "module"]}).first_model(STACK) == \
        "/root/models/modeling_llama.py(190): forward"
    fresh = Frames.of(Policy.load().op_classes)
    assert fresh.first_model(STACK) == fresh.first_model(STACK) == first_model_frame(STACK)
    assert list(fresh._first) == [STACK]      # one text asked twice: one answer, on this object
