"""Call stack frames -> model source places, with the path prefix map."""

from __future__ import annotations

import pytest

from cannbot_prefetch.errors import InputError
from cannbot_prefetch.mapping.config import load_config
from cannbot_prefetch.mapping.source import load_model_source
from cannbot_prefetch.mapping.stack import model_places, parse_src_map, parse_stack

TORCH = "/usr/lib/python3.10/site-packages/torch/nn/modules"


@pytest.fixture
def llama_ms(modeling, example_config):
    cfg, path = load_config(example_config("llama3.2-1b-en"))
    return load_model_source(modeling("llama"), cfg, path)


def test_first_model_frame_after_torch(llama_ms):
    stack = (f"{TORCH}/linear.py(134): forward;{TORCH}/module.py(1789): _call_impl;"
             "/host/x/transformers/models/llama/modeling_llama.py(164): forward;"
             "/host/x/transformers/models/llama/modeling_llama.py(313): forward;"
             "/home/user/decode.py(41): <module>")
    places = model_places(stack, llama_ms)
    assert [(p.cls, p.method) for p in places] == [("LlamaMLP", "forward"),
                                                   ("LlamaDecoderLayer", "forward")]
    assert places[0].stmt is not None


def test_def_line_frames_have_no_statement(llama_ms):
    # PyTorch CPU traces: python_function events give the `def` line
    places = model_places("modeling_llama.py(163): forward", llama_ms)
    assert (places[0].cls, places[0].stmt) == ("LlamaMLP", None)


def test_src_map_rewrites_prefixes(llama_ms, tmp_path):
    real = next(iter(llama_ms.files))
    folder = real.rsplit("/", 1)[0]
    stack = "/remote/build/modeling_llama.py(164): forward"
    mapped = model_places(stack, llama_ms, parse_src_map([f"/remote/build={folder}"]))
    assert mapped and mapped[0].file == real
    assert parse_stack("a.py(3): f;\r\nb.py(4): g")[1].line == 4
    with pytest.raises(InputError, match="OLD=NEW"):
        parse_src_map(["nonsense"])


def test_frame_files_are_matched_per_prefix_map(llama_ms, tmp_path):
    """match_file keeps its answers per ModelSource: an answer found under one --src-map is
    never reused under another, and a frame reached through a symlink is the file itself."""
    from cannbot_prefetch.mapping.stack import match_file

    real = next(iter(llama_ms.files))
    link = tmp_path / "elsewhere.py"
    link.symlink_to(real)
    remote = "/remote/build/zzz_not_a_model_file.py"
    to_real = parse_src_map([f"{remote}={real}"])
    for _ in range(2):                       # the second round answers from the cache
        assert match_file(remote, llama_ms) is None
        assert match_file(remote, llama_ms, to_real) == real
        assert match_file(str(link), llama_ms) == real
    assert len(llama_ms.frame_files) == 3
