"""Source of ``_lowerable``, which the batch template's kernels call the reference through.

The batch template runs the reference's own code inside the kernel, so every primitive it
uses must have a Pallas TPU lowering; ``erfc`` (exact GELU) and ``expm1`` (ELU, SELU) have
none, and a traced ``copy`` has none either. ``_lowerable(fn)`` traces ``fn`` and evaluates its jaxpr with those two replaced by
equivalents that lower (``1 - erf``, ``exp - 1``: off by at most an f32 ulp of 1 where they
differ; a copy is its operand), inside nested calls too (``jax.nn.gelu``'s ``custom_jvp``). Every other primitive is
bound as traced.
"""

LOWERABLE_SOURCE = '''
def _lowerable(fn):
    """fn with the primitives Pallas TPU cannot lower replaced by ones it can (erfc, expm1)."""
    from jax.extend import core as _core

    replace = {"erfc": lambda x: 1.0 - jax.lax.erf(x), "expm1": lambda x: jnp.exp(x) - 1.0,
               "copy": lambda x: x, "copy_p": lambda x: x}
    calls = {"pjit": "jaxpr", "jit": "jaxpr", "closed_call": "call_jaxpr", "custom_jvp_call": "call_jaxpr",
             "custom_vjp_call": "call_jaxpr", "remat": "jaxpr", "checkpoint": "jaxpr"}

    def run(jaxpr, consts, args):
        env = dict(zip(jaxpr.constvars, consts))
        env.update(zip(jaxpr.invars, args))
        read = lambda v: v.val if isinstance(v, _core.Literal) else env[v]  # noqa: E731
        for eqn in jaxpr.eqns:
            ins, name = [read(v) for v in eqn.invars], eqn.primitive.name
            sub = eqn.params.get(calls.get(name, ""))
            if name in replace:
                outs = [replace[name](*ins)]
            elif sub is not None:
                inner = getattr(sub, "jaxpr", sub)
                outs = run(inner, getattr(sub, "consts", ()), ins)
            else:
                outs = eqn.primitive.bind(*ins, **eqn.params)
                outs = outs if eqn.primitive.multiple_results else [outs]
            env.update(zip(eqn.outvars, outs))
        return [read(v) for v in jaxpr.outvars]

    def call(*args):
        closed, shape = jax.make_jaxpr(fn, return_shape=True)(*args)
        leaves = run(closed.jaxpr, closed.consts, jax.tree_util.tree_leaves(args))
        return jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(shape), leaves)

    return call
'''
