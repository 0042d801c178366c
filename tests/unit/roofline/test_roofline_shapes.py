"""shapes.py: shape strings, dtype sizes, FRACTAL_NZ (REFERENCE.md §3.3, §4.2)."""

from __future__ import annotations

import pytest

from cannbot_prefetch.roofline import shapes as S


def test_empty_optional_segments_are_absent_inputs():
    assert S.parse_shapes("512,16;8,2048,16;;;;;;8") == ((512, 16), (8, 2048, 16), None, None, None,
                                                         None, None, (8,))


def test_plain_and_quoted_shapes():
    assert S.parse_shapes("32,9216;4096,9216;4096") == ((32, 9216), (4096, 9216), (4096,))
    assert S.parse_shapes('"4096,512"') == ((4096, 512),)


@pytest.mark.parametrize("text", [None, "", "N/A", "n/a", "12,abc", "3,-1"])
def test_missing_or_garbage_shapes_are_none(text):
    assert S.parse_shapes(text) is None


def test_nested_torch_input_dims():
    assert S.parse_shapes("[[1,16,256],[1024,256],[]]") == ((1, 16, 256), (1024, 256), None)
    assert S.parse_shapes("[[2, 3], []") is None


def test_dtype_and_format_lists_lose_prefixes():
    assert S.parse_list("DT_BF16;FLOAT;;DT_INT4") == ("BF16", "FLOAT", "", "INT4")
    assert S.parse_list("FORMAT_ND;FRACTAL_NZ") == ("ND", "FRACTAL_NZ")
    assert S.parse_list("N/A") == ()


@pytest.mark.parametrize("dtype,size", [("FLOAT", 4), ("FLOAT16", 2), ("BF16", 2), ("DT_BF16", 2),
                                        ("INT8", 1), ("INT32", 4), ("INT64", 8), ("UINT64", 8),
                                        ("INT4", 0.5), ("HIFLOAT8", 1), ("FLOAT8_E4M3FN", 1),
                                        ("FLOAT4_E2M1", 0.5), ("c10::BFloat16", 2), ("float", 4)])
def test_dtype_bytes(dtype, size):
    assert S.dtype_bytes(dtype) == size


def test_unknown_dtype_has_no_size():
    assert S.dtype_bytes("MYSTERY") is None


def test_reference_nz_example():
    # REFERENCE.md §4.2: "256,16,16,16" fp16 = ND [256, 4096]
    assert S.nz_to_nd((256, 16, 16, 16), "FLOAT16") == (256, 4096)
    assert S.logical_dims((256, 16, 16, 16), "FRACTAL_NZ", "FLOAT16") == (256, 4096)
    assert S.logical_dims((256, 16, 16, 16), "ND", "FLOAT16") == (256, 16, 16, 16)


@pytest.mark.parametrize("dtype,n0", [("BF16", 16), ("FLOAT16", 16), ("INT8", 32), ("INT4", 64)])
def test_nz_fractal_width(dtype, n0):
    assert S.nz_n0(dtype) == n0


def test_nd_to_nz_pads_to_whole_fractals():
    # [m=1000, n=100] fp16 -> [ceil(100/16)=7, ceil(1000/16)=63, 16, 16]
    assert S.nd_to_nz((1000, 100), "FLOAT16") == (7, 63, 16, 16)
    assert S.nd_to_nz((64, 100), "INT8") == (4, 4, 16, 32)
    assert S.nd_to_nz((64, 100), "INT4") == (2, 4, 16, 64)
    assert S.nz_to_nd(S.nd_to_nz((1000, 100), "BF16"), "BF16") == (1008, 112)


def test_stored_bytes_count_nz_padding():
    # the same tensor reported 4-D (stored) or 2-D (ND) in FRACTAL_NZ has the padded size
    padded = 7 * 63 * 16 * 16 * 2
    assert S.stored_bytes((7, 63, 16, 16), "FRACTAL_NZ", "FLOAT16") == padded
    assert S.stored_bytes((1000, 100), "FRACTAL_NZ", "FLOAT16") == padded
    assert S.stored_bytes((1000, 100), "ND", "FLOAT16") == 200_000
    assert S.stored_bytes((4096, 4096), "ND", "INT4") == 4096 * 4096 / 2
    assert S.stored_bytes(None, "ND", "BF16") == 0
