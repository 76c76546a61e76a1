"""The staged template, the TPU templates' last resort: every matmul and convolution on a Pallas kernel, the
rest of the program left to XLA.

``template.py`` finds the matmuls (``spec.py``: each as its kernel sees it) and writes the candidate module;
``describe.py`` gives the cost model its kernels per point. The rest is the runtime pasted into every staged
candidate below its marker (``runtime.py`` runs the reference's own program with its matmuls on the kernels
of ``matmul.py``, convolutions on ``conv.py``'s and ``planar.py``'s, grouped matmuls on ``grouped.py``'s,
attention found by ``attention_match.py`` on ``attention.py``'s and ``paged.py``'s, tails fused by
``epilogue.py``).
"""
