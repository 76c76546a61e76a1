"""Write the 200-task KernelBench-style held-out set (our own modules in the format, one file per task).

    python benchmarks/kernelbench_style/generate.py [OUT]   (default: benchmarks/kernelbench_style/tasks)

Deterministic: the same files every time. Sizes follow KernelBench's habit of large full sizes
(many over the 16 MiB a CPU correctness run takes at full size, so the judge derives small
sizes), plus moderate ones. The offline synthesizer was not tuned on these tasks.
"""

from __future__ import annotations

import itertools
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from ops import ACTIVATIONS, EPILOGUES, LOSSES, REDUCTIONS, ROWWISE, SCANS  # noqa: E402

HEADER = '"""{title}\n\nKernelBench-style task ({level}), written for maxkernel\'s held-out set."""\n\nimport jax\nimport jax.numpy as jnp\n'


def module(title: str, level: str, init_args: list[str], weights: list[str], fwd_args: list[str], body: str,
           constants: dict[str, object], inputs: list[str], init_values: list[str] | None = None) -> str:
    lines = [HEADER.format(title=title, level=level), "", "class Model:",
             f"    def __init__(self{''.join(', ' + a for a in init_args)}):"]
    lines += [f"        {w}" for w in weights] or ["        pass"]
    lines += ["", f"    def forward(self, {', '.join(fwd_args)}):", f"        return {body}", "", ""]
    lines += [f"{k} = {v!r}" for k, v in constants.items()]
    keys = ", ".join(f"k{i}" for i in range(len(inputs))) + ("," if len(inputs) == 1 else "")
    lines += ["", "", "def get_inputs():",
              f"    {keys} = jax.random.split(jax.random.PRNGKey(0), {len(inputs)})",
              f"    return [{', '.join(i.format(key=f'k{n}') for n, i in enumerate(inputs))}]", "", "",
              "def get_init_inputs():", f"    return [{', '.join(init_values if init_values is not None else init_args)}]", ""]
    return "\n".join(lines)


def normal(shape: str, dtype: str = "") -> str:
    return f"jax.random.normal({{key}}, {shape}{', dtype=' + dtype if dtype else ''})"


ROW_SIZES = [(4096, 16384), (512, 1000)]  # 256 MiB (derived small) and 2 MiB


def level1():
    for (name, expr), (b, d) in itertools.product(ACTIVATIONS.items(), ROW_SIZES):
        yield f"{name}_{b}x{d}", module(f"{name} activation", "level 1", [], [], ["x"], expr,
                                        {"batch_size": b, "dim": d}, [normal("(batch_size, dim)")])
    for name in ("ReLU", "GELU", "Sigmoid", "Swish", "Tanh"):
        yield f"{name}_bf16_2048x8192", module(f"{name} activation, bfloat16", "level 1", [], [], ["x"],
                                               ACTIVATIONS[name], {"batch_size": 2048, "dim": 8192},
                                               [normal("(batch_size, dim)", "jnp.bfloat16")])
    for (name, (weights, body)), (b, d) in itertools.product(ROWWISE.items(), ROW_SIZES):
        yield f"{name}_{b}x{d}", module(name, "level 1", ["dim"], weights, ["x"], body,
                                        {"batch_size": b, "dim": d}, [normal("(batch_size, dim)")])
    for (name, body), dims in itertools.product(REDUCTIONS.items(), [(128, 4096, 4095), (16, 256, 256)]):
        b, d1, d2 = dims
        yield f"{name}Reduction_{b}x{d1}x{d2}", module(f"{name} over dim 1", "level 1", [], [], ["x"], body,
                                                       {"batch_size": b, "dim1": d1, "dim2": d2},
                                                       [normal("(batch_size, dim1, dim2)")])
    for name, body in SCANS.items():
        yield f"{name}_32768x4096", module(name, "level 1", [], [], ["x"], body, {"batch_size": 32768, "dim": 4096},
                                           [normal("(batch_size, dim)")])
    for (name, body), (b, d) in itertools.product(LOSSES.items(), [(32768, 4096), (128, 1024)]):
        yield f"{name}_{b}x{d}", module(name, "level 1", [], [], ["predictions", "targets"], body,
                                        {"batch_size": b, "dim": d},
                                        [normal("(batch_size, dim)"), normal("(batch_size, dim)")])
    yield from matmuls()
    yield from convolutions()
    yield from pooling()


def matmuls():
    two = ["A", "B"]
    for n in (2048, 4096):
        yield f"SquareMatmul_{n}", module("Square matrix multiplication", "level 1", [], [], two, "jnp.matmul(A, B)",
                                          {"N": n}, [normal("(N, N)"), normal("(N, N)")])
    for m, k, n in ((1024, 4096, 2048), (256, 8192, 1024), (4096, 1024, 512)):
        yield f"Matmul_{m}x{k}x{n}", module("Rectangular matrix multiplication", "level 1", [], [], two,
                                            "jnp.matmul(A, B)", {"M": m, "K": k, "N": n},
                                            [normal("(M, K)"), normal("(K, N)")])
    for m, k, n in ((1024, 2048, 1024), (512, 4096, 4096)):
        yield f"MatmulBf16_{m}x{k}x{n}", module("Matrix multiplication, bfloat16", "level 1", [], [], two,
                                                "jnp.matmul(A, B)", {"M": m, "K": k, "N": n},
                                                [normal("(M, K)", "jnp.bfloat16"), normal("(K, N)", "jnp.bfloat16")])
    for b, m, k, n in ((128, 512, 1024, 256), (16, 128, 256, 128)):
        yield f"BatchedMatmul_{b}x{m}x{k}x{n}", module("Batched matrix multiplication", "level 1", [], [], two,
                                                       "jnp.matmul(A, B)", {"batch_size": b, "M": m, "K": k, "N": n},
                                                       [normal("(batch_size, M, K)"), normal("(batch_size, K, N)")])
    for m, k in ((2048, 65536), (256, 4096)):
        yield f"MatVec_{m}x{k}", module("Matrix-vector multiplication", "level 1", [], [], two, "jnp.matmul(A, B)",
                                        {"M": m, "K": k}, [normal("(M, K)"), normal("(K, 1)")])
    for m, k, n in ((2048, 4096, 1024), (512, 1024, 512)):
        yield f"MatmulTransposedB_{m}x{k}x{n}", module("Matrix multiplication with B transposed", "level 1", [], [],
                                                       two, "jnp.matmul(A, B.T)", {"M": m, "K": k, "N": n},
                                                       [normal("(M, K)"), normal("(N, K)")])
    yield "MatmulTransposedA_4096x1024x2048", module("Matrix multiplication with A transposed", "level 1", [], [],
                                                     two, "jnp.matmul(A.T, B)", {"M": 1024, "K": 4096, "N": 2048},
                                                     [normal("(K, M)"), normal("(K, N)")])
    for m, n in ((16384, 4096), (256, 512)):
        yield f"MatrixScalar_{m}x{n}", module("Matrix-scalar multiplication", "level 1", [], [], ["A"], "A * 3.5",
                                              {"M": m, "N": n}, [normal("(M, N)")])
    yield "DiagMatmul_4096x4096", module("Diagonal matrix times a matrix", "level 1", [], [], two,
                                         "A[:, None] * B", {"N": 4096, "M": 4096}, [normal("(N,)"), normal("(N, M)")])
    yield "TensorMatmul3D_16x1024x2048x768", module("3-D tensor times a matrix", "level 1", [], [], two,
                                                    "jnp.matmul(A, B)", {"b": 16, "i": 1024, "j": 2048, "k": 768},
                                                    [normal("(b, i, j)"), normal("(j, k)")])


CONV = ("jax.lax.conv_general_dilated(x, self.weight, window_strides={stride}, padding={padding}, "
        "rhs_dilation={dilation}, dimension_numbers=({dn}), feature_group_count={groups})")


def _conv(title, dims, cin, cout, k, size, batch, stride=1, padding=0, dilation=1, groups=1, epilogue=None):
    spatial = "".join("DHW"[3 - dims:])
    dn = f"'NC{spatial}', 'OI{spatial}', 'NC{spatial}'"
    body = CONV.format(stride=(stride,) * dims, padding=[(padding, padding)] * dims, dilation=(dilation,) * dims,
                       dn=dn, groups="groups")
    weights = [f"self.weight = jax.random.normal(jax.random.PRNGKey(1), (out_channels, in_channels // groups"
               f"{', kernel_size' * dims})) * 0.1"]
    if epilogue:
        weights += [w for w in epilogue[0]]
        body = epilogue[1].replace("{conv}", body)
    shape = "(batch_size, in_channels" + ", size" * dims + ")"
    return module(title, "level 2" if epilogue else "level 1",
                  ["in_channels", "out_channels", "kernel_size", "groups"], weights, ["x"], body,
                  {"batch_size": batch, "in_channels": cin, "out_channels": cout, "kernel_size": k, "groups": groups,
                   "size": size}, [normal(shape)])


def convolutions():
    yield "Conv2d_16x64x128_k3", _conv("2-D convolution", 2, 64, 128, 3, 128, 16, padding=1)
    yield "Conv2d_8x3x64_k7s2", _conv("2-D convolution, stride 2", 2, 3, 64, 7, 224, 8, stride=2, padding=3)
    yield "Conv2d_4x32x32_k5", _conv("2-D convolution", 2, 32, 32, 5, 64, 4)
    yield "Conv1d_32x64x128_k3", _conv("1-D convolution", 1, 64, 128, 3, 4096, 32)
    yield "Conv1d_16x32x64_k5d2s2", _conv("1-D convolution, dilated and strided", 1, 32, 64, 5, 8192, 16,
                                          stride=2, dilation=2)
    yield "Conv3d_4x16x32_k3", _conv("3-D convolution", 3, 16, 32, 3, 32, 4, padding=1)
    yield "DepthwiseConv2d_16x64_k3", _conv("Depthwise 2-D convolution", 2, 64, 64, 3, 128, 16, padding=1, groups=64)
    yield "DepthwiseConv2d_8x128_k5", _conv("Depthwise 2-D convolution", 2, 128, 128, 5, 64, 8, groups=128)
    yield "PointwiseConv2d_16x256x128", _conv("Pointwise (1x1) 2-D convolution", 2, 256, 128, 1, 64, 16)
    yield "DilatedConv2d_8x32x64_k3d2", _conv("Dilated 2-D convolution", 2, 32, 64, 3, 128, 8, dilation=2, padding=2)
    yield "Conv2d_32x128x128_k3", _conv("2-D convolution", 2, 128, 128, 3, 56, 32, padding=1)
    yield "Conv2d_64x16x32_k3", _conv("2-D convolution", 2, 16, 32, 3, 32, 64)


def pooling():
    for name, reducer, init in (("MaxPool", "jax.lax.max", "-jnp.inf"), ("AvgPool", "jax.lax.add", "0.0")):
        scale = " / 4.0" if name == "AvgPool" else ""
        yield f"{name}1d_64x128x8192", module(f"{name} 1-D, window 4 stride 4", "level 1", [], [], ["x"],
                                              f"jax.lax.reduce_window(x, {init}, {reducer}, (1, 1, 4), (1, 1, 4), "
                                              f"'VALID'){scale}", {"batch_size": 64, "channels": 128, "length": 8192},
                                              [normal("(batch_size, channels, length)")])
        scale = " / 4.0" if name == "AvgPool" else ""
        yield f"{name}2d_32x64x128", module(f"{name} 2-D, window 2 stride 2", "level 1", [], [], ["x"],
                                            f"jax.lax.reduce_window(x, {init}, {reducer}, (1, 1, 2, 2), (1, 1, 2, 2), "
                                            f"'VALID'){scale}", {"batch_size": 32, "channels": 64, "size": 128},
                                            [normal("(batch_size, channels, size, size)")])


def _chain(names: tuple[str, ...]) -> tuple[list[str], str]:
    weights, body = [], "{x}"
    for n in names:
        weight, expr = EPILOGUES[n]
        if weight:
            weights.append(weight)
        inner = body if body == "{x}" else "(" + body + ")"
        body = re.sub(r"\bx\b", lambda _, inner=inner: inner, expr)
    return weights, body


def level2():
    names = sorted(EPILOGUES)
    chains = [c for c in itertools.combinations(names, 2)] + [c for c in itertools.combinations(names, 3)]
    picks = chains[::7][:60]  # a spread of pairs and triples, deterministic
    sizes = [(1024, 8192, 8192), (128, 1024, 512), (512, 4096, 1024)]
    for i, chain in enumerate(picks):
        m, k, n = sizes[i % len(sizes)]
        weights, body = _chain(chain)
        bias = "BiasAdd" in chain
        init_w = ["self.weight = jnp.zeros((in_features, out_features))"] + (
            ["self.bias = jnp.zeros((out_features,))"] if bias else [])
        yield (f"Gemm_{'_'.join(chain)}_{m}x{k}x{n}",
               module(f"Gemm then {', '.join(chain)}", "level 2", ["in_features", "out_features"], init_w, ["x"],
                      body.replace("{x}", "jnp.matmul(x, self.weight)"),
                      {"batch_size": m, "in_features": k, "out_features": n}, [normal("(batch_size, in_features)")]))
    for chain in picks[:12]:
        if any(c in ("Softmax", "LogSumExp", "LayerNorm") for c in chain):
            continue
        weights, body = _chain(tuple(c for c in chain if c != "BiasAdd"))
        yield (f"BMM_{'_'.join(chain)}", module(f"Batched matmul then {', '.join(chain)}", "level 2", [], [],
                                                ["A", "B"], body.replace("{x}", "jnp.matmul(A, B)"),
                                                {"batch_size": 64, "M": 256, "K": 512, "N": 256},
                                                [normal("(batch_size, M, K)"), normal("(batch_size, K, N)")]))
    elementwise = [c for c in chains if not any(n in ("Softmax", "LogSumExp", "LayerNorm", "BiasAdd") for n in c)]
    for i, chain in enumerate(elementwise[::9][:22]):
        _, body = _chain(chain)
        epilogue = ([], body.replace("{x}", "{conv}"))
        yield (f"Conv2d_{'_'.join(chain)}", _conv(f"2-D convolution then {', '.join(chain)}", 2, 32 if i % 2 else 16,
                                                  64, 3, 64 if i % 2 else 128, 16, padding=1, epilogue=epilogue))


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in itertools.chain(level1(), level2()):
        path = out / f"{len(written) + 1:03d}_{name}.py"
        path.write_text(text)
        written.append(path)
    print(f"wrote {len(written)} KernelBench-style tasks to {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent / "tasks")
