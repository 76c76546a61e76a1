"""Each JaxBench task is the published JAXBench workload: the same inputs (shapes, dtypes, static values), the
same output, and the same FLOP counts.

The facts below were read off the public JAXBench repository (github.com/aryatschand/JAXBench, commit
ebc95e6, ``benchmark/<id>/baseline.py``, run as its runner runs it: ``create_inputs(dtype=jnp.bfloat16)``) and
its published results (``benchmark/results.csv``, the ``xla_flops`` column, which is the module's
``get_flops()`` where it has one and XLA's cost analysis otherwise). They are written here as facts; nothing
is fetched. ``formula`` is the FLOP formula the published module writes (its ``get_flops`` or its
``benchmark()``), and our ``get_flops()`` must equal its value. Where the published figure is XLA's count,
XLA's count of our reference (the same cost analysis, on the lowered program at full size) must be within
2% of it: the jax version, not the program, differs.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import jax
import pytest
from attrs import frozen

ROOT = Path(__file__).resolve().parents[2] / "jaxbench"
#: The published figure is XLA's count, ours must be within this of it (jax versions count softmax etc. apart).
XLA_FLOPS_SLACK = 0.02


@frozen
class Published:
    inputs: list  # (shape, dtype) per array input, in order
    output: tuple  # (shape, dtype)
    csv_line: int  # the line of benchmark/results.csv
    csv_flops: int  # its xla_flops column
    static: tuple = ()
    formula: str = ""  # "baseline.py:<line>: <the formula>" where the published module writes one
    formula_flops: int | None = None

    @property
    def csv_is_formula(self) -> bool:
        """results.csv took the module's get_flops() (the runner prefers it) rather than XLA's count."""
        return self.formula_flops == self.csv_flops and "return" in self.formula


PUBLISHED = {
    "1p_Flash_Attention": Published(
        inputs=[((4, 64, 4096, 128), "bfloat16"), ((4, 64, 4096, 128), "bfloat16"), ((4, 64, 4096, 128), "bfloat16")],
        output=((4, 64, 4096, 128), "bfloat16"),
        formula="baseline.py:67: flops = 4 * B * H * S * S * D",
        formula_flops=2199023255552,
        csv_line=2, csv_flops=2246282575872,
    ),
    "2p_GQA_Attention": Published(
        inputs=[((4, 4096, 128, 128), "bfloat16"), ((4, 4096, 8, 128), "bfloat16"), ((4, 4096, 8, 128), "bfloat16")],
        output=((4, 4096, 128, 128), "bfloat16"),
        formula="baseline.py:67: flops = B * Hq * S * S * D * 4",
        formula_flops=4398046511104,
        csv_line=4, csv_flops=4449607090176,
    ),
    "3p_MLA_Attention": Published(
        inputs=[((4, 2048, 7168), "bfloat16"), ((7168, 1536), "bfloat16"), ((1536, 24576), "bfloat16"), ((7168, 576), "bfloat16"), ((512, 16384), "bfloat16"), ((512, 16384), "bfloat16"), ((16384, 7168), "bfloat16")],
        output=((4, 2048, 7168), "bfloat16"),
        formula="baseline.py:122: flops = proj_flops + attn_flops",
        formula_flops=4714800349184,
        csv_line=6, csv_flops=4464620601344,
    ),
    "4p_Sparse_Attention": Published(
        inputs=[((64, 4096, 128), "bfloat16"), ((8, 4096, 128), "bfloat16"), ((8, 4096, 128), "bfloat16")],
        output=((64, 4096, 128), "bfloat16"),
        formula="baseline.py:81: flops = 4 * H_q * S * S * D",
        formula_flops=549755813888,
        csv_line=8, csv_flops=558362001408,
    ),
    "5p_Flex_Attention": Published(
        inputs=[((4, 64, 4096, 128), "bfloat16"), ((4, 64, 4096, 128), "bfloat16"), ((4, 64, 4096, 128), "bfloat16"), ((64, 4096, 4096), "bfloat16")],
        output=((4, 64, 4096, 128), "bfloat16"),
        formula="baseline.py:82: flops = 4 * B * H * S * S * D + B * H * S * S",
        formula_flops=2203318222848,
        csv_line=10, csv_flops=2259167477760,
    ),
    "6p_Paged_Attention": Published(
        inputs=[((64, 64, 128), "bfloat16"), ((16384, 16, 8, 128), "bfloat16"), ((16384, 16, 8, 128), "bfloat16"), ((64,), "int32"), ((64, 256), "int32"), ((65,), "int32")],
        output=((64, 64, 128), "bfloat16"),
        formula="baseline.py:97: return num_seqs * num_q_heads * (4 * max_seq_len * head_dim)",
        formula_flops=8589934592,
        csv_line=11, csv_flops=8589934592,
    ),
    "7p_Ragged_Paged_Attention": Published(
        inputs=[((4096, 64, 128), "bfloat16"), ((16384, 16, 16, 128), "bfloat16"), ((64,), "int32"), ((64, 256), "int32"), ((65,), "int32"), ((1,), "int32")],
        output=((4096, 64, 128), "bfloat16"),
        formula="baseline.py:120: return max_seqs * H_q * (4 * tokens_per_seq * kv_len * D)",
        formula_flops=549755813888,
        csv_line=13, csv_flops=549755813888,
    ),
    "8p_GEMM": Published(
        inputs=[((8192, 8192), "bfloat16"), ((8192, 28672), "bfloat16")],
        output=((8192, 28672), "bfloat16"),
        formula="baseline.py:51: flops = 2 * M * K * N",
        formula_flops=3848290697216,
        csv_line=15, csv_flops=3848290697216,
    ),
    "9p_SwiGLU_MLP": Published(
        inputs=[((2, 4096, 8192), "bfloat16"), ((8192, 28672), "bfloat16"), ((8192, 28672), "bfloat16"), ((28672, 8192), "bfloat16")],
        output=((2, 4096, 8192), "bfloat16"),
        formula="baseline.py:53: flops = B * S * E * M * 2 * 3",
        formula_flops=11544872091648,
        csv_line=17, csv_flops=11546046496768,
    ),
    "10p_Sparse_MoE": Published(
        inputs=[((2, 4096, 4096), "bfloat16"), ((4096, 8), "bfloat16"), ((8, 4096, 14336), "bfloat16"), ((8, 4096, 14336), "bfloat16"), ((8, 14336, 4096), "bfloat16")],
        output=((2, 4096, 4096), "float32"),
        formula="baseline.py:75: flops = routing_flops + expert_flops",
        formula_flops=5772972916736,
        csv_line=18, csv_flops=23095750426624,
    ),
    "11p_Megablox_GMM": Published(
        inputs=[((32768, 4096), "bfloat16"), ((128, 4096, 1536), "bfloat16"), ((128,), "int32")],
        static=(256,),
        output=((32768, 1536), "bfloat16"),
        formula="baseline.py:106: return 2 * M * K * N",
        formula_flops=412316860416,
        csv_line=19, csv_flops=412316860416,
    ),
    "12p_RMSNorm": Published(
        inputs=[((8, 4096, 8192), "bfloat16"), ((8192,), "bfloat16")],
        output=((8, 4096, 8192), "bfloat16"),
        formula="baseline.py:44: return 5 * B * S * D",
        formula_flops=1342177280,
        csv_line=21, csv_flops=1342177280,
    ),
    "13p_Cross_Entropy": Published(
        inputs=[((8192, 4096), "bfloat16"), ((4096, 128256), "bfloat16"), ((8192,), "int32")],
        output=((), "float32"),
        formula="baseline.py:52: flops = B * H * V * 2 + B * V * 3",
        formula_flops=8610266480640,
        csv_line=22, csv_flops=8616570519552,
    ),
    "14p_Ragged_Dot": Published(
        inputs=[((8, 1024, 4096), "bfloat16"), ((8, 4096, 14336), "bfloat16")],
        output=((8, 1024, 14336), "bfloat16"),
        formula="baseline.py:50: flops = G * (M // G) * K * N * 2",
        formula_flops=962072674304,
        csv_line=23, csv_flops=962072674304,
    ),
    "15p_RetNet_Retention": Published(
        inputs=[((4, 16, 4096, 256), "bfloat16"), ((4, 16, 4096, 256), "bfloat16"), ((4, 16, 4096, 256), "bfloat16")],
        output=((4, 16, 4096, 256), "bfloat16"),
        formula="baseline.py:104: flops = 2 * B * H * S * S * D * 2",
        formula_flops=1099511627776,
        csv_line=24, csv_flops=1106558058496,
    ),
    "16p_Mamba2_SSD": Published(
        inputs=[((4, 64, 4096, 64), "bfloat16"), ((4, 64, 4096, 64), "bfloat16"), ((4, 64, 4096, 64), "bfloat16"), ((4, 64, 4096), "float32")],
        output=((4, 64, 4096, 64), "bfloat16"),
        formula="baseline.py:104: flops = 2 * B * H * S * S * D * 2",
        formula_flops=1099511627776,
        csv_line=25, csv_flops=1138325979136,
    ),
    "17p_Triangle_Multiplication": Published(
        inputs=[((1536, 1536, 128), "bfloat16"), ((1536, 1536, 1), "bfloat16"), ((128, 128), "bfloat16"), ((128, 128), "bfloat16"), ((128, 128), "bfloat16"), ((128, 128), "bfloat16"), ((128,), "bfloat16"), ((128, 128), "bfloat16"), ((128, 128), "bfloat16")],
        output=((1536, 1536, 128), "bfloat16"),
        formula="baseline.py:79: flops = proj_flops + einsum_flops + out_flops",
        formula_flops=1391569403904,
        csv_line=26, csv_flops=1397915910144,
    ),
    "18k_Conv2D_ReLU_BiasAdd": Published(
        inputs=[((128, 64, 128, 128), "bfloat16"), ((128, 64, 3, 3), "bfloat16"), ((128,), "bfloat16"), ((128, 1, 1), "bfloat16")],
        output=((128, 128, 126, 126), "bfloat16"),
        csv_line=27, csv_flops=300429803520,
    ),
    "19k_Matmul_Subtract_Multiply_ReLU": Published(
        inputs=[((4096, 8192), "bfloat16"), ((8192, 8192), "bfloat16"), ((8192,), "bfloat16")],
        output=((4096, 8192), "bfloat16"),
        csv_line=28, csv_flops=549890031616,
    ),
    "20k_Gemm_Multiply_LeakyReLU": Published(
        inputs=[((4096, 8192), "bfloat16"), ((8192, 8192), "bfloat16"), ((8192,), "bfloat16")],
        output=((4096, 8192), "bfloat16"),
        csv_line=29, csv_flops=549923586048,
    ),
    "21k_Gemm_Divide_Sum_Scaling": Published(
        inputs=[((4096, 8192), "bfloat16"), ((8192, 8192), "bfloat16")],
        output=((4096, 1), "bfloat16"),
        csv_line=30, csv_flops=549822922752,
    ),
    "22k_Conv2d_InstanceNorm_Divide": Published(
        inputs=[((128, 64, 128, 128), "bfloat16"), ((128, 64, 3, 3), "bfloat16"), ((128,), "bfloat16"), ((128,), "bfloat16"), ((128,), "bfloat16")],
        output=((128, 128, 126, 126), "bfloat16"),
        csv_line=31, csv_flops=303291105280,
    ),
    "23k_Matmul_Sum_Max_AvgPool_LogSumExp_LogSumExp": Published(
        inputs=[((4096, 8192), "bfloat16"), ((8192, 8192), "bfloat16"), ((8192,), "bfloat16")],
        output=((4096, 1), "bfloat16"),
        csv_line=32, csv_flops=549822922752,
    ),
    "24k_Matmul_Scale_ResidualAdd_Clamp_LogSumExp_Mish": Published(
        inputs=[((4096, 8192), "bfloat16"), ((8192, 8192), "bfloat16"), ((8192,), "bfloat16")],
        output=((4096, 1), "bfloat16"),
        csv_line=33, csv_flops=550124978176,
    ),
    "25k_Conv3d_GroupNorm_Mean": Published(
        inputs=[((128, 3, 24, 32, 32), "bfloat16"), ((24, 3, 3, 3, 3), "bfloat16"), ((24,), "bfloat16"), ((24,), "bfloat16"), ((24,), "bfloat16")],
        output=((128,), "bfloat16"),
        csv_line=34, csv_flops=10766134272,
    ),
    "26k_BMM_InstanceNorm_Sum_ResidualAdd_Multiply": Published(
        inputs=[((4096, 8192), "bfloat16"), ((4096, 8192), "bfloat16"), ((8192, 8192), "bfloat16"), ((8192,), "bfloat16"), ((8192,), "bfloat16"), ((8192,), "bfloat16")],
        output=((4096, 8192), "bfloat16"),
        csv_line=35, csv_flops=550158467072,
    ),
    "27k_Matmul_Mish_Mish": Published(
        inputs=[((4096, 8192), "bfloat16"), ((8192, 8192), "bfloat16"), ((8192,), "bfloat16")],
        output=((4096, 8192), "bfloat16"),
        csv_line=36, csv_flops=550259130368,
    ),
    "28k_ConvTranspose3d_LayerNorm_GELU_Scaling": Published(
        inputs=[((32, 32, 16, 32, 32), "bfloat16"), ((32, 64, 4, 4, 4), "bfloat16"), ((64,), "bfloat16"), ((64,), "bfloat16"), ((64,), "bfloat16")],
        output=((32, 64, 32, 64, 64), "bfloat16"),
        csv_line=37, csv_flops=1005074186240,
    ),
    "29k_Matmul_Swish_Sum_GroupNorm": Published(
        inputs=[((8192, 4096), "bfloat16"), ((4096, 4096), "bfloat16"), ((4096,), "bfloat16"), ((4096,), "bfloat16"), ((4096,), "bfloat16")],
        output=((8192, 4096), "bfloat16"),
        csv_line=38, csv_flops=275517014016,
    ),
    "30k_Matmul_Scaling_ResidualAdd": Published(
        inputs=[((16384, 4096), "bfloat16"), ((4096, 4096), "bfloat16"), ((4096,), "bfloat16")],
        output=((16384, 4096), "bfloat16"),
        csv_line=39, csv_flops=549957140480,
    ),
    "31k_Gemm_BatchNorm_GELU_ReLU": Published(
        inputs=[((16384, 8192), "bfloat16"), ((8192, 8192), "bfloat16"), ((8192,), "bfloat16"), ((8192,), "bfloat16"), ((8192,), "bfloat16")],
        output=((16384, 8192), "bfloat16"),
        csv_line=40, csv_flops=2201976045568,
    ),
    "32k_Gemm_Sigmoid_LogSumExp": Published(
        inputs=[((16384, 2048), "bfloat16"), ((4096, 2048), "bfloat16"), ((4096,), "bfloat16"), ((1024, 4096), "bfloat16"), ((1024,), "bfloat16")],
        output=((16384,), "bfloat16"),
        csv_line=41, csv_flops=412669247488,
    ),
    "33k_Conv3d_Mish_Tanh": Published(
        inputs=[((16, 32, 32, 64, 64), "bfloat16"), ((64, 32, 3, 3, 3), "bfloat16"), ((64,), "bfloat16")],
        output=((16, 64, 30, 62, 62), "bfloat16"),
        csv_line=42, csv_flops=204409798656,
    ),
    "34k_Conv2d_Activation_BatchNorm": Published(
        inputs=[((64, 64, 128, 128), "bfloat16"), ((128, 64, 3, 3), "bfloat16"), ((128,), "bfloat16"), ((128,), "bfloat16"), ((128,), "bfloat16")],
        output=((64, 128, 126, 126), "bfloat16"),
        csv_line=43, csv_flops=152165744640,
    ),
    "35k_Gemm_Scaling_Hardtanh_GELU": Published(
        inputs=[((4096, 8192), "bfloat16"), ((8192, 8192), "bfloat16"), ((8192,), "bfloat16")],
        output=((4096, 8192), "bfloat16"),
        csv_line=44, csv_flops=550124912640,
    ),
    "36k_Matmul_Sigmoid_Sum": Published(
        inputs=[((4096, 8192), "bfloat16"), ((8192, 8192), "bfloat16"), ((8192,), "bfloat16")],
        output=((4096, 1), "bfloat16"),
        csv_line=45, csv_flops=549923586048,
    ),
    "37k_Matmul_Swish_Scaling": Published(
        inputs=[((4096, 8192), "bfloat16"), ((8192, 8192), "bfloat16"), ((8192,), "bfloat16")],
        output=((4096, 8192), "bfloat16"),
        csv_line=46, csv_flops=549957140480,
    ),
    "38k_Matmul_Dropout_Softmax": Published(
        inputs=[((4096, 8192), "bfloat16"), ((8192, 8192), "bfloat16"), ((8192,), "bfloat16")],
        output=((4096, 8192), "bfloat16"),
        csv_line=47, csv_flops=550024249344,
    ),
    "39k_Conv2d_GELU_GlobalAvgPool": Published(
        inputs=[((128, 8, 256, 256), "bfloat16"), ((64, 8, 3, 3), "bfloat16"), ((64,), "bfloat16")],
        output=((128, 64), "bfloat16"),
        csv_line=48, csv_flops=81919844352,
    ),
    "40k_Gemm_GroupNorm_Min_BiasAdd": Published(
        inputs=[((4096, 8192), "bfloat16"), ((8192, 8192), "bfloat16"), ((8192,), "bfloat16"), ((8192,), "bfloat16"), ((8192,), "bfloat16"), ((1, 8192, 1, 1), "bfloat16")],
        output=((1, 8192, 4096, 1), "bfloat16"),
        csv_line=49, csv_flops=550198312960,
    ),
    "41k_Gemm_Add_ReLU": Published(
        inputs=[((4096, 8192), "bfloat16"), ((8192, 8192), "bfloat16"), ((8192,), "bfloat16")],
        output=((4096, 8192), "bfloat16"),
        csv_line=50, csv_flops=549822922752,
    ),
    "42k_Gemm_Max_Subtract_GELU": Published(
        inputs=[((4096, 8192), "bfloat16"), ((8192, 8192), "bfloat16"), ((8192,), "bfloat16")],
        output=((4096, 1), "bfloat16"),
        csv_line=51, csv_flops=549822922752,
    ),
    "43k_Gemm_BatchNorm_Scaling_Softmax": Published(
        inputs=[((4096, 8192), "bfloat16"), ((8192, 8192), "bfloat16"), ((8192,), "bfloat16"), ((8192,), "bfloat16"), ((8192,), "bfloat16"), ((8192,), "bfloat16"), ((8192,), "bfloat16"), ((1,), "bfloat16")],
        output=((4096, 8192), "bfloat16"),
        csv_line=52, csv_flops=550124912640,
    ),
    "44k_Matmul_Divide_GELU": Published(
        inputs=[((4096, 8192), "bfloat16"), ((8192, 8192), "bfloat16"), ((8192,), "bfloat16")],
        output=((4096, 8192), "bfloat16"),
        csv_line=53, csv_flops=550091358208,
    ),
    "45k_Gemm_GroupNorm_Swish_Multiply_Swish": Published(
        inputs=[((4096, 8192), "bfloat16"), ((8192, 8192), "bfloat16"), ((8192,), "bfloat16"), ((8192,), "bfloat16"), ((8192,), "bfloat16"), ((8192,), "bfloat16")],
        output=((4096, 8192), "bfloat16"),
        csv_line=54, csv_flops=550430048256,
    ),
    "46k_Conv2d_GroupNorm_Tanh_HardSwish_ResidualAdd_LogSumExp": Published(
        inputs=[((128, 8, 128, 128), "bfloat16"), ((64, 8, 3, 3), "bfloat16"), ((64,), "bfloat16"), ((64,), "bfloat16"), ((64,), "bfloat16")],
        output=((128, 1, 126, 126), "bfloat16"),
        csv_line=55, csv_flops=21467408384,
    ),
    "47k_Matmul_Add_Swish_Tanh_GELU_Hardtanh": Published(
        inputs=[((4096, 8192), "bfloat16"), ((8192, 8192), "bfloat16"), ((8192,), "bfloat16"), ((8192,), "bfloat16")],
        output=((4096, 8192), "bfloat16"),
        csv_line=56, csv_flops=550259130368,
    ),
    "48k_Matmul_BatchNorm_BiasAdd_Divide_Swish": Published(
        inputs=[((4096, 8192), "bfloat16"), ((8192, 8192), "bfloat16"), ((8192,), "bfloat16"), ((8192,), "bfloat16"), ((8192,), "bfloat16"), ((8192,), "bfloat16"), ((8192,), "bfloat16"), ((1,), "bfloat16")],
        output=((4096, 8192), "bfloat16"),
        csv_line=57, csv_flops=550091358208,
    ),
    "49k_Matmul_AvgPool_GELU_Scale_Max": Published(
        inputs=[((4096, 8192), "bfloat16"), ((8192, 8192), "bfloat16"), ((8192,), "bfloat16")],
        output=((4096,), "bfloat16"),
        csv_line=58, csv_flops=549843894272,
    ),
    "50k_Matmul_GELU_Softmax": Published(
        inputs=[((4096, 8192), "bfloat16"), ((8192, 8192), "bfloat16"), ((8192,), "bfloat16")],
        output=((4096, 8192), "bfloat16"),
        csv_line=59, csv_flops=550225575936,
    ),
}


def reference(task_id: str):
    spec = importlib.util.spec_from_file_location(f"jaxbench_published_{task_id}", ROOT / task_id / "reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def full_size(module):
    """Abstract full-size inputs (nothing allocated), the static arguments, and the output's shape."""
    captured = {}

    def dynamic():
        arrays, static = module.get_inputs(size="full")
        captured["static"] = tuple(static)
        return arrays

    shapes = jax.eval_shape(dynamic)
    out = jax.eval_shape(lambda *a: module.computation(*a, *captured["static"]), *shapes)
    return shapes, captured["static"], out


def test_the_facts_cover_the_suite():
    assert sorted(PUBLISHED) == sorted(p.name for p in ROOT.iterdir() if (p / "kernel_task.yaml").exists())


@pytest.mark.parametrize("task_id", sorted(PUBLISHED))
def test_inputs_and_output_are_the_published_workloads(task_id):
    fact = PUBLISHED[task_id]
    shapes, static, out = full_size(reference(task_id))
    assert [(tuple(s.shape), s.dtype.name) for s in shapes] == fact.inputs
    assert static == fact.static
    leaves = jax.tree_util.tree_leaves(out)
    assert len(leaves) == 1 and (tuple(leaves[0].shape), leaves[0].dtype.name) == fact.output


@pytest.mark.parametrize("task_id", sorted(PUBLISHED))
def test_flops_are_the_published_counts(task_id):
    fact, module = PUBLISHED[task_id], reference(task_id)
    if fact.formula_flops is not None:
        assert module.get_flops() == fact.formula_flops, f"JAXBench {fact.formula}"
    if fact.csv_is_formula:
        assert module.get_flops() == fact.csv_flops, f"results.csv line {fact.csv_line}"
        return
    shapes, static, _ = full_size(module)
    counted = jax.jit(lambda *a: module.computation(*a, *static)).lower(*shapes).cost_analysis()["flops"]
    assert abs(counted / fact.csv_flops - 1) <= XLA_FLOPS_SLACK, (
        f"XLA counts {counted:.6g} FLOPs in our reference, results.csv line {fact.csv_line} says {fact.csv_flops}")
