"""The bench suites (``attnlab bench``) and their end-to-end check against PyTorch, used by ``make bench``.

    python benchmarks/bench_suite.py --check                # needs torch: every suite, checked
    python benchmarks/bench_suite.py [attnlab bench options] # a suite itself, e.g. --suite li2023 --cells 40 --json FILE

``--check`` fails (non-zero exit) rather than skipping when PyTorch is missing: install it with
``make bench`` or ``.venv/bin/pip install torch==2.13.0``. For every suite (jiang2024, li2023,
wu2023) it checks that

* the paper-style PyTorch model computes the same f(X), loss and gradients as attnlab's model
  when given the same parameters, on a cell of the suite's own scale (so the baseline trains the
  same function, only its init draws differ), and that untrained parameters get no gradient;
* its init follows attnlab's law (jiang2024: U(±1/√fan_in)/init_scale, checked against the bound;
  the others: the RMS of every drawn parameter within sampling error of attnlab's);
* a 2-cell smoke run of the whole suite gives a complete report: both sides ran on both cells,
  finite positive ratios, the agreement over the 2 cells, FLOP/s and compile time, JSON-ready.
"""

from __future__ import annotations

import json
import sys

import numpy as np
from rich.console import Console

from attnlab.bench import baseline, report, runner, suites, torch_models
from attnlab.errors import AttnlabError


def check_same_function(torch, suite: str) -> None:
    """attnlab's model and the suite's module: same f, loss and gradients on shared parameters, on
    the widest cell of the suite's default scale; the same init law."""
    _, _, cells = suites.suite_cells(suite)
    cell = max(cells, key=lambda c: suites.SUITES[suite].flops(suites.model_hparams(c))["forward"])
    d = baseline.check_model(torch, suite, cell)
    assert d.pop("untrained_without_grad") == 1.0, "fixed parameters must get no gradient"
    for k, err in d.items():
        assert err < 1e-3 if k.startswith("grad") else err < 1e-4, (suite, k, err)
    if suite == "jiang2024":  # the init law: U(±1/√fan_in)/init_scale, as attnlab's
        fresh = torch_models._paper_model(torch)(1024, 512, 512, 16.0)
        bound = 1 / 1024**0.5 / 16
        w = fresh.W_Q.weight.detach().numpy()
        assert np.abs(w).max() <= bound and np.abs(w).max() > 0.99 * bound
        assert abs(w.std() - bound / 3**0.5) < 0.01 * bound
    else:
        for name, (a, t, n) in baseline.init_rms(torch, suite, cell).items():
            assert abs(t / a - 1) < 5 / (2 * n) ** 0.5, (suite, name, a, t, n)


def check_suite(suite: str) -> dict:
    r = runner.run_suite(suite, cells=2, scale="smoke", progress=False, console=Console(stderr=True), gemm_n=256)
    a, b, ratio, g = r["attnlab"], r["baseline"], r["ratio"], r["agreement"]
    assert r["cells"] == 2 and b["cells"] == 2 and not b["extrapolated"], b
    for k in ("steady", "whole", "steady_cpu_time", "whole_cpu_time"):
        assert ratio[k] is not None and ratio[k] > 0, (k, ratio)
    assert g["cells"] + g["non_finite_pairs"] == 2 and g["mean_abs_diff"] is not None, g
    assert a["flops_per_s_steady"] > 0 and b["flops_per_s"] > 0 and a["compile_s_aot"] > 0
    name = r["outcome"]["name"]
    for row in r["per_cell"]:
        assert row[f"attnlab_{name}"] is not None and row[f"baseline_{name}"] is not None, row
        assert row["baseline_status"] in ("converged", "cap"), row
    json.dumps(r)
    return r


def check() -> int:
    try:
        torch = baseline.import_torch()
    except AttnlabError as e:
        print(f"bench check FAILED: {e}", file=sys.stderr)
        return 1
    for suite in suites.SUITES:
        check_same_function(torch, suite)
        print(
            f"ok: {suite}: the PyTorch baseline computes attnlab's f, loss and gradients on the same parameters; "
            "same init law"
        )
        r = check_suite(suite)
        report.render(r, Console())
        print(f"ok: {suite}: 2-cell smoke run of the suite end to end")
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["--check"]:
        return check()
    from attnlab.cli import app

    app(["bench", *argv])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
