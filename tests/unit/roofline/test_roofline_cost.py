"""cost.py against hand computations (REFERENCE.md §4.2)."""

from __future__ import annotations

import pytest

from cannbot_prefetch import hardware
from cannbot_prefetch.policy import Policy
from cannbot_prefetch.roofline import cost
from cannbot_prefetch.roofline.families import rules_of

RULES = rules_of(Policy.load())      # the shipped op_classes.yaml families


def op_cost(*args, **kw):
    return cost.op_cost(*args, rules=RULES, **kw)


def cost_or_reason(*args, **kw):
    return cost.cost_or_reason(*args, rules=RULES, **kw)


def matmul(shapes, out, dtypes="BF16;BF16", formats="ND;ND", family="matmul", op="MatMulV2",
           out_dtype=None):
    return op_cost(family, op, shapes, dtypes, formats, out, out_dtype or dtypes.split(";")[0], "ND")


def test_reference_worked_example_m16_k5120_n5120_bf16():
    c = matmul("16,5120;5120,5120", "16,5120")
    flops = 2 * 16 * 5120 * 5120
    nbytes = (16 * 5120 + 5120 * 5120 + 16 * 5120) * 2
    assert c.flops == flops == 838_860_800          # "0.84 GFLOP"
    assert c.bytes == nbytes == 52_756_480          # "52.8 MB"
    assert round(c.ai, 1) == 15.9                   # "AI 15.9"
    assert (c.m, c.n, c.k, c.batch) == (16, 5120, 5120, 1)
    assert c.weight_bytes == 5120 * 5120 * 2 and c.weight_shape == (5120, 5120)
    assert c.compute_dtype == "bf16"
    b2, b3, a3 = hardware.load("910B2"), hardware.load("910B3"), hardware.load("Ascend910_9382")
    t_mem = c.bytes / b2.hbm_bw_bytes_per_s * 1e6
    assert t_mem == pytest.approx(32.97, abs=0.01)  # "t_mem 33 us at 1.6 TB/s"
    assert c.flops / b2.peak_flops(c.compute_dtype) * 1e6 == pytest.approx(2.37, abs=0.01)  # "2.4 us"
    assert c.flops / a3.peak_flops("bf16") * 1e6 == pytest.approx(2.37, abs=0.01)
    assert c.flops / b3.peak_flops("bf16") * 1e6 == pytest.approx(2.84, abs=0.01)  # "2.84 us on 910B3"


def test_bias_is_counted_and_transposed_weight_costs_the_same():
    a = matmul("32,4096;4096,9216", "32,9216", dtypes="FLOAT;FLOAT")
    b = matmul("32,4096;9216,4096;9216", "32,9216", dtypes="FLOAT;FLOAT;FLOAT")
    assert a.flops == b.flops == 2 * 32 * 4096 * 9216
    assert b.bytes - a.bytes == 9216 * 4
    assert a.compute_dtype == "fp32"


def test_batch_matmul_and_broadcast_weight_counted_once():
    c = matmul("8,16,64;8,64,32", "8,16,32", family="batch_matmul", op="BatchMatMulV2")
    assert (c.batch, c.m, c.k, c.n) == (8, 16, 64, 32)
    assert c.flops == 2 * 8 * 16 * 64 * 32
    assert c.bytes == (8 * 16 * 64 + 8 * 64 * 32 + 8 * 16 * 32) * 2
    bc = matmul("8,16,64;64,32", "8,16,32", family="batch_matmul", op="BatchMatMulV2")
    assert bc.flops == c.flops
    assert bc.bytes == (8 * 16 * 64 + 64 * 32 + 8 * 16 * 32) * 2
    assert bc.weight_bytes == 64 * 32 * 2


def test_nz_weight_counts_padding():
    # weight ND [K=1000, N=100] fp16 stored NZ as [7, 63, 16, 16]: padded to [1008, 112]
    nz4 = matmul("16,1000;7,63,16,16", "16,100", dtypes="FLOAT16;FLOAT16", formats="ND;FRACTAL_NZ")
    nz2 = matmul("16,1000;1000,100", "16,100", dtypes="FLOAT16;FLOAT16", formats="ND;FRACTAL_NZ")
    nd = matmul("16,1000;1000,100", "16,100", dtypes="FLOAT16;FLOAT16")
    padded = 7 * 63 * 16 * 16 * 2
    assert nz4.weight_bytes == nz2.weight_bytes == padded
    assert nd.weight_bytes == 200_000
    assert nz4.weight_shape == (1008, 112)
    assert nz4.flops == nd.flops == 2 * 16 * 1000 * 100   # FLOPs from x1 and the output
    assert nz4.bytes - nd.bytes == padded - 200_000


def test_reference_nz_shape_as_weight():
    # "256,16,16,16" fp16 = ND [256, 4096]
    c = matmul("8,256;256,16,16,16", "8,4096", dtypes="FLOAT16;FLOAT16", formats="ND;FRACTAL_NZ")
    assert c.weight_shape == (256, 4096) and c.weight_bytes == 256 * 4096 * 2
    assert c.k == 256 and c.n == 4096


def test_qbmm_w8a8_int8_peak_and_extra_inputs():
    shapes = "16,4096;4096,4096;4096;;4096;16"
    dtypes = "INT8;INT8;UINT64;FLOAT;INT32;FLOAT"
    c = op_cost("qbmm", "QuantBatchMatmulV3", shapes, dtypes, "ND;ND;ND;ND;ND;ND", "16,4096", "BF16")
    assert c.compute_dtype == "int8"
    assert c.flops == 2 * 16 * 4096 * 4096
    # M*K + K*N (1 B) + scale (8 B) + bias (4 B) + pertoken (4 B) + M*N*2 (bf16 out)
    assert c.bytes == 16 * 4096 + 4096 * 4096 + 4096 * 8 + 4096 * 4 + 16 * 4 + 16 * 4096 * 2
    assert c.weight_bytes == 4096 * 4096
    b3 = hardware.load("910B3")
    assert b3.peak_for(c.compute_dtype) == pytest.approx(589.824)


def test_wqbmm_int4_weight_and_fp16_peak():
    c = op_cost("wqbmm", "WeightQuantBatchMatmulV2", "16,4096;4096,4096;4096",
                "FLOAT16;INT4;FLOAT16", "ND;ND;ND", "16,4096", "FLOAT16")
    assert c.compute_dtype == "fp16"
    assert c.weight_bytes == 4096 * 4096 // 2
    assert c.bytes == 16 * 4096 * 2 + 4096 * 4096 // 2 + 4096 * 2 + 16 * 4096 * 2
    assert c.flops == 2 * 16 * 4096 * 4096
    packed = op_cost("wqbmm", "WeightQuantBatchMatmulV2", "16,4096;4096,512;4096",
                     "BF16;INT32;BF16", "ND;ND;ND", "16,4096", "BF16")
    assert packed.weight_bytes == 4096 * 512 * 4 and packed.compute_dtype == "bf16"


def test_gmm_real_sample_row():
    c = op_cost("gmm", "GroupedMatmul", "512,16;8,2048,16;;;;;;8",
                "BF16;BF16;FLOAT;UINT64;FLOAT;FLOAT16;FLOAT16;INT64", "ND;NCL;ND;ND;ND;ND;ND;ND",
                "512,2048", "BF16", "ND")
    assert (c.m, c.k, c.n, c.experts) == (512, 16, 2048, 8)   # N from the output, K from x
    assert c.flops == 2 * 512 * 16 * 2048
    assert c.weight_bytes == 8 * 2048 * 16 * 2
    assert c.bytes == 512 * 16 * 2 + 8 * 2048 * 16 * 2 + 8 * 8 + 512 * 2048 * 2
    t_mem = c.bytes / hardware.load("910B3").hbm_bw_bytes_per_s * 1e6
    assert t_mem == pytest.approx(1.65, abs=0.01)   # REFERENCE.md §4.3: "1.65 us t_mem"


def test_gmm_reads_at_most_m_total_experts():
    c = op_cost("gmm", "GroupedMatmul", "4,16;8,2048,16", "BF16;BF16", "ND;ND", "4,2048", "BF16")
    assert c.experts == 8 and c.m == 4
    assert c.weight_read_bytes == 8 * 2048 * 16 * 2 * 4 // 8
    assert c.weight_bytes == 8 * 2048 * 16 * 2      # prefetch basis: the whole stored weight
    assert c.bytes == 4 * 16 * 2 + c.weight_read_bytes + 4 * 2048 * 2


def test_mc2_is_flagged():
    c = op_cost("mc2", "MatmulAllReduce", "16,4096;4096,4096", "BF16;BF16", "ND;ND", "16,4096", "BF16")
    assert c.contains_communication
    assert not matmul("16,4096;4096,4096", "16,4096").contains_communication


def test_aten_linear_from_torch_trace_dims():
    c = op_cost("aten", "aten::linear", "[[1,16,256],[1024,256],[]]", "float;float;", None)
    assert (c.m, c.k, c.n) == (16, 256, 1024)
    assert c.flops == 2 * 16 * 256 * 1024
    assert c.bytes == (16 * 256 + 1024 * 256 + 16 * 1024) * 4
    assert c.weight_shape == (1024, 256) and c.compute_dtype == "fp32"


def test_aten_addmm_weight_is_mat2_and_mm_bmm_matmul():
    c = op_cost("aten", "aten::addmm", "[[1024],[16,256],[256,1024]]", "float;float;float", None)
    assert (c.m, c.k, c.n) == (16, 256, 1024)
    assert c.weight_shape == (256, 1024)
    assert c.bytes == (1024 + 16 * 256 + 256 * 1024 + 16 * 1024) * 4
    mm = op_cost("aten", "aten::mm", "[[16,256],[256,1024]]", "c10::BFloat16;c10::BFloat16", None)
    assert mm.flops == 2 * 16 * 256 * 1024 and mm.compute_dtype == "bf16"
    bmm = op_cost("aten", "aten::bmm", "[[4,16,64],[4,64,32]]", "float;float", None)
    assert (bmm.batch, bmm.m, bmm.k, bmm.n) == (4, 16, 64, 32)
    mat = op_cost("aten", "aten::matmul", "[[4,16,64],[64,32]]", "float;float", None)
    assert (mat.batch, mat.m, mat.k, mat.n) == (4, 16, 64, 32)
    assert mat.weight_bytes == 64 * 32 * 4


def test_mstt_edited_row_keeps_its_numbers():
    # 81920,4096;8192,512 -> 4096,512: K = numel(x1)/M = 81920 (shapes edited by the sample's authors)
    c = matmul("81920,4096;8192,512", "4096,512")
    assert (c.m, c.n, c.k) == (4096, 512, 81920)
    assert c.flops == 2 * 4096 * 81920 * 512


@pytest.mark.parametrize("shapes,out", [(None, "16,16"), ("", "16,16"), ("N/A", "16,16"),
                                        ("16,abc;16,16", "16,16"), ("16,16", "16,16"),
                                        ("16,16;16,16", None), ("16,0;0,16", "16,16")])
def test_missing_or_absurd_shapes_give_none(shapes, out):
    assert matmul(shapes, out) is None
    cost, why = cost_or_reason("matmul", "MatMulV2", shapes, "BF16;BF16", "ND;ND", out, "BF16")
    assert cost is None and why
