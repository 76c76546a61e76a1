"""The XPlane reader on real traces, recorded here on CPU, and on hand-made ones.

A CPU trace has the XSpace structure of a TPU one, except that XLA's ops run on
host threads: they are events of the ``/host:CPU`` plane (carrying an
``hlo_module`` stat), and there is no ``/device:`` plane at all.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from jax.profiler import ProfileData

from maxkernel_pallas_judge.profiling.xplane import DeviceTime, TraceError, TraceEvent, device_planes, device_time, events, find_xplane_files, host_planes, load_xspace, top_ops, union_duration_ps

from ..helpers import REPO

CALLS = 3
CPU_PLANE = "/host:CPU"  # where jax's CPU backend records its XLA op events
RECORD = textwrap.dedent(f"""
    import json, sys, time
    import jax, jax.numpy as jnp

    @jax.jit
    def matmul_tanh(x, w):
        return jnp.tanh(x @ w)

    x = jnp.ones((256, 256)); w = jnp.full((256, 256), 0.01)
    matmul_tanh(x, w).block_until_ready()  # compile outside the trace
    with jax.profiler.trace(sys.argv[1]):
        start = time.perf_counter_ns()
        for _ in range({CALLS}):
            x = matmul_tanh(x, w)
        x.block_until_ready()
        wall_ns = time.perf_counter_ns() - start
    print(json.dumps({{"wall_ns": wall_ns}}))
""")


@pytest.fixture(scope="module")
def cpu_trace(tmp_path_factory) -> tuple[Path, int]:
    """A trace of ``CALLS`` jitted matmul+tanh calls, and the wall time of the traced loop (ns).

    Recorded in a subprocess so that this test process never initialises a jax backend
    (JAX_PLATFORMS=cpu also keeps libtpu from probing for a TPU).
    """
    trace_dir = tmp_path_factory.mktemp("cpu-trace")
    done = subprocess.run([sys.executable, "-c", RECORD, str(trace_dir)], capture_output=True,
                          text=True, timeout=120, cwd=REPO, env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert done.returncode == 0, done.stderr
    return trace_dir, json.loads(done.stdout.strip().splitlines()[-1])["wall_ns"]


def jit_op_names(trace_dir: Path) -> set[str]:
    """Names of the XLA ops that ran for ``matmul_tanh``, told apart by their hlo_module stat."""
    xspace = load_xspace(find_xplane_files(trace_dir)[0])
    cpu = next(p for p in host_planes(xspace) if p.name == CPU_PLANE)
    return {e.name for e in events(cpu) if e.stats.get("hlo_module") == "jit_matmul_tanh"}


def test_trace_is_found_and_parsed(cpu_trace):
    trace_dir, _ = cpu_trace
    files = find_xplane_files(trace_dir)
    assert len(files) == 1 and files[0].parent.parent.name == "profile"
    xspace = load_xspace(files[0])
    names = [p.name for p in xspace.planes]
    assert CPU_PLANE in names and "/host:metadata" in names
    assert device_planes(xspace) == []  # no accelerator on a CPU run
    assert CPU_PLANE in [p.name for p in host_planes(xspace)]


def test_cpu_op_time_is_positive_and_within_wall_time(cpu_trace):
    trace_dir, wall_ns = cpu_trace
    op_names = jit_op_names(trace_dir)
    assert op_names, "no event of jit_matmul_tanh on the CPU plane"
    measured = device_time(trace_dir, plane_prefix=CPU_PLANE, name_filter=op_names.__contains__)
    assert measured.planes == (CPU_PLANE,)
    assert measured.events % CALLS == 0 and measured.events >= CALLS
    assert 0 < measured.total_ps <= wall_ns * 1000
    assert set(measured.by_name) == op_names
    # A part's union never exceeds the whole's; the parts together cover at least the whole.
    assert max(measured.by_name.values()) <= measured.total_ps <= sum(measured.by_name.values())
    assert top_ops(measured, 1)[0][1] == max(measured.by_name.values())


def test_cpu_trace_has_no_device_code(cpu_trace):
    trace_dir, _ = cpu_trace
    with pytest.raises(TraceError, match="no device code ran"):
        device_time(trace_dir)


def test_filter_matching_nothing_is_an_error_not_zero(cpu_trace):
    trace_dir, _ = cpu_trace
    with pytest.raises(TraceError, match="no device code ran"):
        device_time(trace_dir, plane_prefix=CPU_PLANE, name_filter=lambda name: False)


def ev(start: int, end: int, name: str = "op") -> TraceEvent:
    return TraceEvent(plane="/device:TPU:0", line="XLA Ops", name=name,
                      start_ps=start, duration_ps=end - start)


@pytest.mark.parametrize("intervals, union", [
    ([], 0),
    ([(0, 10)], 10),
    ([(0, 10), (20, 25)], 15),                 # disjoint
    ([(0, 10), (5, 15)], 15),                  # overlapping
    ([(0, 100), (10, 20), (30, 40)], 100),     # nested
    ([(0, 10), (10, 20)], 20),                 # touching
    ([(50, 60), (0, 30), (20, 40), (55, 58), (70, 70)], 50),  # unsorted, nested, zero-length
])
def test_union_duration(intervals, union):
    assert union_duration_ps([ev(s, e) for s, e in intervals]) == union


def test_top_ops_sorts_longest_first():
    measured = DeviceTime(total_ps=10, events=4, by_name={"a": 3, "b": 7, "c": 3},
                          planes=("/device:TPU:0",))
    assert top_ops(measured, 2) == [("b", 7), ("a", 3)]
    assert top_ops(measured, 10) == [("b", 7), ("a", 3), ("c", 3)]


TPU_LIKE = """
planes {
  id: 1 name: "/device:TPU:0"
  lines { id: 1 name: "XLA Modules" timestamp_ns: 1000
    events { metadata_id: 1 offset_ps: 0 duration_ps: 10000 }
  }
  lines { id: 2 name: "XLA Ops" timestamp_ns: 1002
    events { metadata_id: 2 offset_ps: 0 duration_ps: 3000 stats { metadata_id: 9 str_value: "jit_f" } }
    events { metadata_id: 3 offset_ps: 4000 duration_ps: 4000 }
    events { metadata_id: 3 offset_ps: 20000 duration_ps: 2000 }
  }
  event_metadata { key: 1 value { id: 1 name: "jit_f" } }
  event_metadata { key: 2 value { id: 2 name: "fusion.1" } }
  event_metadata { key: 3 value { id: 3 name: "my_kernel" } }
  stat_metadata { key: 9 value { id: 9 name: "hlo_module" } }
}
planes { id: 2 name: "/host:CPU" lines { id: 1 name: "python" timestamp_ns: 0
  events { metadata_id: 1 offset_ps: 0 duration_ps: 99000000 } }
  event_metadata { key: 1 value { id: 1 name: "PjitFunction(f)" } } }
"""


def test_device_plane_of_a_hand_made_tpu_trace(tmp_path):
    run = tmp_path / "plugins" / "profile" / "2026_01_01_00_00_00"
    run.mkdir(parents=True)
    (run / "host.xplane.pb").write_bytes(ProfileData.text_proto_to_serialized_xspace(TPU_LIKE))
    xspace = load_xspace(find_xplane_files(tmp_path)[0])
    [tpu] = device_planes(xspace)
    fusion = next(e for e in events(tpu) if e.name == "fusion.1")
    assert (fusion.line, fusion.start_ps, fusion.duration_ps) == ("XLA Ops", 1_002_000, 3000)
    assert fusion.stats == {"hlo_module": "jit_f"}  # a stat's name resolved from stat_metadata
    # Module [1000, 1010) ns covers ops [1002, 1005) and [1006, 1010); the last op runs at [1022, 1024).
    measured = device_time(tmp_path)
    assert (measured.total_ps, measured.events, measured.planes) == (12_000, 4, ("/device:TPU:0",))
    assert measured.by_name == {"jit_f": 10_000, "fusion.1": 3000, "my_kernel": 6000}
    kernel = device_time(tmp_path, name_filter=lambda name: name == "my_kernel")
    assert (kernel.total_ps, kernel.events) == (6000, 2)


def test_newest_file_comes_first(tmp_path):
    old, new = tmp_path / "a" / "h.xplane.pb", tmp_path / "b" / "h.xplane.pb"
    for i, path in enumerate((old, new)):
        path.parent.mkdir()
        path.write_bytes(b"")
        os.utime(path, ns=(10**18 + i, 10**18 + i))
    assert find_xplane_files(tmp_path) == [new, old]


def test_missing_or_unreadable_trace_is_an_error(tmp_path):
    (tmp_path / "notes.txt").write_text("no trace here")
    with pytest.raises(TraceError, match="no \\*.xplane.pb trace"):
        find_xplane_files(tmp_path)
    with pytest.raises(TraceError):
        device_time(tmp_path / "does-not-exist")
    garbage = tmp_path / "bad.xplane.pb"
    garbage.write_bytes(b"\xff not a protobuf")
    with pytest.raises(TraceError, match="cannot read trace"):
        load_xspace(garbage)
