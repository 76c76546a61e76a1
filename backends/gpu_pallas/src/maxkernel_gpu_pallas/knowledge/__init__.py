"""The knowledge pack for Pallas on NVIDIA GPUs: the target's figures, then the lowering rules, within a budget."""

from __future__ import annotations

from importlib import resources

from ..targets import chip_figures


def chip_facts(target: str) -> str:
    c = chip_figures(target)
    return "\n".join([
        f"# Target: {c['name']} ({c['architecture']}), figures from: {c['source']}",
        f"- {c['num_sms']} SMs; shared memory {c['smem_per_sm_bytes'] // 1024} KB per SM, at most "
        f"{c['smem_per_block_bytes'] // 1024} KB per thread block (one Pallas program); L2 {c['l2_bytes'] >> 20} MB",
        f"- HBM {c['hbm_bytes_per_second'] / 1e12:.2f} TB/s, {c['hbm_capacity_bytes'] / 1e9:.0f} GB",
        f"- dense Tensor Core: bf16/f16 {c['bf16_flops_per_second'] / 1e12:.0f} TFLOP/s, tf32 "
        f"{c['tf32_flops_per_second'] / 1e12:.0f} TFLOP/s; CUDA cores f32 {c['fp32_flops_per_second'] / 1e12:.0f} TFLOP/s",
    ])


def knowledge_pack(target: str, budget_chars: int) -> str:
    """Chip facts, then the rules, each included whole while it fits the budget."""
    from maxkernel_pallas_judge.knowledge import within_budget

    return within_budget([chip_facts(target), resources.files(__package__).joinpath("pallas_gpu.md").read_text().strip()],
                         budget_chars)
