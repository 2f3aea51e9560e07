"""The bench suite (``attnlab bench``) and its end-to-end check against PyTorch, used by ``make bench``.

    python benchmarks/bench_suite.py --check                # needs torch: a 2-cell smoke run, checked
    python benchmarks/bench_suite.py [attnlab bench options] # the suite itself, e.g. --cells 100 --json FILE

``--check`` fails (non-zero exit) rather than skipping when PyTorch is missing: install it with
``make bench`` or ``.venv/bin/pip install torch==2.13.0``. It checks that

* the paper-style PyTorch model computes the same f(X), loss and gradient as attnlab's model
  when given the same parameters (so the baseline trains the same function, only its init
  draws differ);
* a 2-cell smoke run of the whole suite gives a complete report: both sides ran on both cells,
  finite positive ratios, the agreement over the 2 cells, FLOP/s and compile time, JSON-ready.
"""

from __future__ import annotations

import json
import sys

import jax
import jax.numpy as jnp
import numpy as np
from rich.console import Console

from attnlab import bench
from attnlab.errors import AttnlabError
from attnlab.models import jiang2024 as jmodel


def check_same_function(torch) -> None:
    """attnlab's model and the baseline's module: same f, loss and gradients on shared parameters."""
    hp = jmodel.Hparams(M=5, d=12, d_h=6, d_v=4, init_scale=2.0)
    p = jmodel.init(jax.random.PRNGKey(0), hp)
    X = np.asarray(jax.random.normal(jax.random.PRNGKey(1), (6, hp.M, hp.d)))
    y = np.where(np.arange(6) % 2 == 0, 1.0, -1.0).astype(np.float32)

    def loss(tr):
        f, _ = jax.vmap(lambda x: jmodel.apply(tr | {"w_O": p["w_O"]}, x, hp))(jnp.asarray(X))
        return jmodel.logistic_loss(f, y).mean(), f

    train = {k: p[k] for k in jmodel.trainable(hp)}
    (L, f), g = jax.value_and_grad(loss, has_aux=True)(train)

    model = bench._paper_model(torch)(hp.d, hp.d_h, hp.d_v, hp.init_scale)
    with torch.no_grad():  # nn.Linear holds Wᵀ
        for name in ("W_Q", "W_K", "W_V"):
            getattr(model, name).weight.copy_(torch.from_numpy(np.asarray(p[name]).T.copy()))
        model.w_O.weight.copy_(torch.from_numpy(np.asarray(p["w_O"])[None, :].copy()))
    ft = model(torch.from_numpy(X))
    Lt = torch.nn.functional.softplus(-torch.from_numpy(y) * ft).mean()
    Lt.backward()
    np.testing.assert_allclose(ft.detach().numpy(), np.asarray(f), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(Lt.item(), float(L), rtol=1e-5)
    for name in ("W_Q", "W_K", "W_V"):
        np.testing.assert_allclose(getattr(model, name).weight.grad.numpy().T, np.asarray(g[name]), rtol=1e-3,
                                   atol=1e-6, err_msg=name)  # fmt: skip
    assert model.w_O.weight.grad is None, "w_O must stay fixed"
    # the init law: U(±1/√fan_in)/init_scale, as attnlab's
    fresh = bench._paper_model(torch)(1024, 512, 512, 16.0)
    bound = 1 / 1024**0.5 / 16
    w = fresh.W_Q.weight.detach().numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.99 * bound
    assert abs(w.std() - bound / 3**0.5) < 0.01 * bound


def check_suite() -> dict:
    r = bench.run_suite("jiang2024", cells=2, scale="smoke", progress=False, console=Console(stderr=True),
                        gemm_n=256)  # fmt: skip
    a, b, ratio, g = r["attnlab"], r["baseline"], r["ratio"], r["agreement"]
    assert r["cells"] == 2 and b["cells"] == 2 and not b["extrapolated"], b
    for k in ("steady", "whole", "steady_cpu_time", "whole_cpu_time"):
        assert ratio[k] is not None and ratio[k] > 0, (k, ratio)
    assert g["cells"] == 2 and g["non_finite_pairs"] == 0 and g["mean_abs_diff"] is not None, g
    assert a["flops_per_s_steady"] > 0 and b["flops_per_s"] > 0 and a["compile_s_aot"] > 0
    for row in r["per_cell"]:
        assert np.isfinite(row["attnlab_test_loss"]) and np.isfinite(row["baseline_test_loss"]), row
        assert row["baseline_status"] in ("converged", "cap"), row
    json.dumps(r)
    return r


def check() -> int:
    try:
        torch = bench.import_torch()
    except AttnlabError as e:
        print(f"bench check FAILED: {e}", file=sys.stderr)
        return 1
    check_same_function(torch)
    print("ok: the PyTorch baseline computes attnlab's f, loss and gradients on the same parameters; same init law")
    r = check_suite()
    bench.render(r, Console())
    print("ok: 2-cell smoke run of the suite end to end")
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["--check"]:
        return check()
    from attnlab.cli import app

    app(["bench", *argv])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
