"""The explicit AdamW of the fork arms equals torch.optim.AdamW (1e-6 relative over 100 steps)."""

import torch

from interp.optimizer import explicit_step, shadow_params


def _problem(seed: int):
    gen = torch.Generator().manual_seed(seed)
    params = [torch.randn(7, 5, generator=gen, requires_grad=True), torch.randn(5, generator=gen, requires_grad=True)]
    target = torch.randn(11, 5, generator=gen)
    x = torch.randn(11, 7, generator=gen)

    def grads(ps):
        loss = ((x @ ps[0] + ps[1] - target) ** 2).mean() + ps[0].abs().sum() * 1e-3
        return torch.autograd.grad(loss, ps)

    return params, grads


def test_explicit_adamw_equals_torch_over_100_steps():
    ref, grads = _problem(0)
    mine = [p.detach().clone().requires_grad_(True) for p in ref]
    kw = dict(lr=3e-3, betas=(0.9, 0.999), weight_decay=0.01, eps=1e-8)
    opt_ref, opt_mine = torch.optim.AdamW(ref, **kw), torch.optim.AdamW(mine, **kw)
    for step in range(100):
        lr = 3e-3 * (1 + 0.5 * (step % 3))  # a changing lr, as a schedule sets it
        for o in (opt_ref, opt_mine):
            o.param_groups[0]["lr"] = lr
        for p, g in zip(ref, grads(ref)):
            p.grad = g
        opt_ref.step()
        g = grads(mine)
        explicit_step(opt_mine, list(g), list(g))
    for a, b in zip(ref, mine):
        assert torch.allclose(a, b, rtol=1e-6, atol=0), (a - b).abs().max()
    for p_ref, p_mine in zip(ref, mine):
        s_ref, s_mine = opt_ref.state[p_ref], opt_mine.state[p_mine]
        assert float(s_ref["step"]) == float(s_mine["step"]) == 100
        for key in ("exp_avg", "exp_avg_sq"):
            assert torch.allclose(s_ref[key], s_mine[key], rtol=1e-6, atol=1e-12)


def test_shadow_is_the_step_not_taken_and_moments_are_fed_separately():
    params, grads = _problem(1)
    opt = torch.optim.AdamW(params, lr=1e-2, weight_decay=0.1)
    g = list(grads(params))
    explicit_step(opt, g, g)  # a state with non-zero moments
    before = [p.detach().clone() for p in params]
    g = list(grads(params))
    shadow = shadow_params(opt, g)
    assert all(torch.equal(p, b) for p, b in zip(params, before))  # nothing moved
    explicit_step(opt, g, g)
    assert all(torch.equal(p.detach(), s) for p, s in zip(params, shadow))  # the same arithmetic, bit for bit
    # the second moment alone sees a different gradient: the first moment equals the clean step's
    params2, _ = _problem(1)
    opt2 = torch.optim.AdamW(params2, lr=1e-2, weight_decay=0.1)
    g0 = list(grads(params2))
    noisy = [x + 0.3 for x in g0]
    explicit_step(opt2, g0, noisy)
    params3, _ = _problem(1)
    opt3 = torch.optim.AdamW(params3, lr=1e-2, weight_decay=0.1)
    explicit_step(opt3, g0, g0)
    for p2, p3 in zip(params2, params3):
        assert torch.equal(opt2.state[p2]["exp_avg"], opt3.state[p3]["exp_avg"])
        assert not torch.equal(opt2.state[p2]["exp_avg_sq"], opt3.state[p3]["exp_avg_sq"])
