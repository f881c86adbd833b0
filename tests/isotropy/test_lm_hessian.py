"""Block HVP of a (tiny, random) causal LM: right loss, symmetric, matches finite differences."""

from __future__ import annotations

import numpy as np
import torch

from gnuq_core.isotropy import lm_hessian


def test_block_hvp_tiny_llama():
    model = lm_hessian.tiny_random_llama(seed=0).double()
    ids = list(np.random.default_rng(0).integers(0, 128, 24))
    with torch.no_grad():
        full = model(input_ids=torch.tensor([ids]), labels=torch.tensor([ids])).loss.item()
    mv, dim, loss = lm_hessian.block_hvp(model, ids)
    assert abs(loss() - full) < 1e-6  # transformers' loss upcasts logits to float32
    rng = np.random.default_rng(1)
    v, w = rng.standard_normal(dim), rng.standard_normal(dim)
    # symmetric to float32 rounding: the loss's softmax runs on float32 logits even in a float64 model
    # (3e-7 relative apart with torch's generic kernels, ATEN_CPU_CAPABILITY=default)
    assert abs(v @ mv(w) - w @ mv(v)) < 2e-6 * (1 + abs(v @ mv(w)))
    # an independent HVP: the *full* model as a function of the block's flat parameters
    from torch.func import functional_call

    prefix = f"model.layers.{len(model.model.layers) - 1}."
    names = [(prefix + n, p.shape) for n, p in model.model.layers[-1].named_parameters()]
    flat = torch.cat([p.detach().reshape(-1) for p in model.model.layers[-1].parameters()])
    ids_t = torch.tensor([ids])

    def full_loss(f):
        i, new = 0, {}
        for n, shape in names:
            k = int(np.prod(shape))
            new[n] = f[i:i + k].reshape(shape)
            i += k
        logits = functional_call(model, new, (ids_t,), {"use_cache": False}).logits[0, :-1]
        return torch.nn.functional.cross_entropy(logits, ids_t[0, 1:])

    _, hv_ref = torch.autograd.functional.hvp(full_loss, flat, torch.as_tensor(v))
    np.testing.assert_allclose(mv(v), hv_ref.numpy(), rtol=1e-4, atol=1e-6 * np.abs(hv_ref.numpy()).max())


def test_block_operator_tiny_random_and_bad_source():
    op = lm_hessian.block_operator("tiny-random", 10, seed=0)
    assert op["n_layers"] == 2 and op["name"] == lm_hessian.SOURCES["tiny-random"]
    v = np.random.default_rng(0).standard_normal(op["dim"])
    assert op["matvec"](v).shape == (op["dim"],) and np.isfinite(op["loss"]())
    try:
        lm_hessian.block_operator("gpt-nothing", 10)
    except ValueError as e:
        assert "source" in str(e)
    else:
        raise AssertionError("an unknown source must be refused")
