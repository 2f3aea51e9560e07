"""Exact token counts and the mean-token floor of the li2023 data model: counts given as integers
or resolved from fractions, α stored as the realised n/L, the α_* columns of a grid checked for
strictly increasing net counts, and the analytic margin z of the best mean-token rule against a
Monte Carlo of the generator."""

import jax
import numpy as np
import pytest
from scipy.stats import norm

from attnlab.data import li2023 as ldata
from attnlab.errors import AttnlabError
from attnlab.experiments import get
from attnlab.experiments.li2023 import diagram, floor


def roles(X):
    r = np.asarray(X["role"])
    return (r == ldata.RELEVANT).sum(1), (r == ldata.CONFUSION).sum(1)


@pytest.mark.parametrize("n_star", [2, 5, 6, 7, 11, 12, 13])
def test_counts_resolve_to_integers_and_alpha_is_realised(n_star):
    L = 50
    s = ldata.Spec(n_star=n_star, L=L)
    assert s.alpha_star == n_star / L and s.alpha_hash == (n_star // 6) / L  # n_# = ⌊n_*/6⌋ ≤ n_*/6 < n_*/(2e)
    assert "n_star" not in s.model_dump()  # a cell holds the realised α, so counts and fractions share an id
    assert ldata.Spec(**s.model_dump()).model_dump() == s.model_dump()  # idempotent: a stored cell validates to itself
    assert ldata.Spec(alpha_star=n_star / L, L=L).alpha_hash == s.alpha_hash  # the α path resolves the same
    kw = {k: s.model_dump()[k] for k in floor._FIELDS}
    X, _ = ldata.dataset(jax.random.PRNGKey(0), 16, **kw)
    rel, conf = roles(X)
    assert set(rel.tolist()) == {n_star} and set(conf.tolist()) == {n_star // 6}


def test_explicit_confusion_counts_and_alpha_snapping():
    s = ldata.Spec(n_star=9, n_hash=0, L=50)
    assert (s.alpha_star, s.alpha_hash) == (0.18, 0.0)
    assert ldata.Spec(alpha_star=0.15, L=50).alpha_star == 0.14  # 7.5 tokens: ties round down, α snapped to 7/50
    assert ldata.Spec(alpha_star=0.3, counts="binomial").alpha_hash == pytest.approx(0.05)  # binomial: α is a rate
    for bad, field in (
        (dict(n_star=9, alpha_star=0.2), "n_star"),
        (dict(n_star=9, n_hash=1, alpha_hash=0.02), "n_hash"),
        (dict(n_star=60, L=50), "n_star"),
        (dict(n_star=3, n_hash=3), "alpha_star"),
        (dict(n_star=30, n_hash=25, L=50), "alpha_hash"),
        (dict(n_star=3, counts="binomial"), "n_star"),
    ):
        with pytest.raises(ValueError, match=f"data.{field}"):
            ldata.Spec(**bad)


def test_a_grid_of_counts_needs_strictly_increasing_net_counts():
    exp = get("li2023-fig1")
    ok = exp.spec("smoke")
    spec = ok.model_copy(update={"data": {k: v for k, v in ok.data.items() if k != "alpha_star"} | {"n_star": [5, 6]}})
    with pytest.raises(AttnlabError, match=r"data.n_star: .*\(5, 0\) and \(6, 1\) have net counts 5 and 5"):
        exp.cells(spec)
    spec = ok.model_copy(
        update={"data": {k: v for k, v in ok.data.items() if k != "alpha_star"} | {"n_star": [5, 7], "n_hash": 2}}
    )
    with pytest.raises(AttnlabError, match=r"data.n_hash: n_#/n_\* = 2/5 exceeds 0.184"):
        exp.cells(spec)
    for sid in ("li2023-fig1", "li2023-fig2", "li2023-fig1-protocol", "li2023-fig1-theorem"):
        for scale in ("cpu", "paper"):
            e = get(sid)
            grid = e.cells(e.spec(scale, ["reps=1"]))
            diagram.check_counts(grid, 1 / (2 * np.e))  # every shipped grid is exact
            nets = sorted(
                {
                    (
                        c["data.alpha_star"],
                        round(c["data.alpha_star"] * c["data.L"]) - round(c["data.alpha_hash"] * c["data.L"]),
                    )
                    for c in grid
                }
            )
            assert all(b[1] > a[1] for a, b in zip(nets, nets[1:], strict=False)), (sid, scale, nets)


@pytest.mark.parametrize(
    ("noise", "tau", "d", "L", "n_star", "noisy_frac"),
    [
        ("coord", 0.2, 100, 50, 8, 0.0),
        ("gaussian", 1.0, 40, 30, 6, 0.0),
        ("ball", 0.5, 20, 40, 7, 0.0),
        ("coord", 0.15, 60, 50, 9, 0.2),
    ],
)
def test_the_mean_token_margin_matches_a_monte_carlo_of_the_generator(noise, tau, d, L, n_star, noisy_frac):
    """y·(x̄₁ − x̄₂) over fresh samples has mean/sd = z, and the best linear rule's error Φ(−z).
    The ratio's standard error at n samples is about √((1 + z²/2)/n): under 1 % of z here."""
    n = 8000
    s = ldata.Spec(n_star=n_star, L=L, d=d, tau=tau, noise=noise, noisy_frac=noisy_frac, noisy_tau=0.4)
    f = s.model_dump()
    X, y = ldata.dataset(jax.random.PRNGKey(1), n, **{k: f[k] for k in floor._FIELDS})
    xbar = np.asarray(X["tokens"]).mean(1)
    m = np.asarray(y) * (xbar[:, 0] - xbar[:, 1])
    z = ldata.margin_of(f)
    assert m.mean() / m.std() == pytest.approx(z, rel=0.03)
    assert np.mean(m <= 0) == pytest.approx(norm.sf(z), abs=3 * np.sqrt(norm.sf(z) / n) + 1e-4)
    assert ldata.floor_success(z, 1000) == pytest.approx(norm.cdf(z) ** 1000)


def test_the_margin_of_the_cpu_grid_is_the_issue_arithmetic():
    """z = (n_* − n_#)/(τ√(2L)) at τ = 0.2, L = 50 (per-coordinate noise): net/2."""
    for n_star, z in ((6, 2.5), (8, 3.5), (9, 4.0), (13, 5.5)):
        assert ldata.margin_of(
            ldata.Spec(n_star=n_star, L=50, d=100, tau=0.2, noise="coord").model_dump()
        ) == pytest.approx(z)
    assert ldata.floor_success(3.0, 1000) == pytest.approx(0.26, abs=0.01)
    assert ldata.floor_success(4.0, 1000) == pytest.approx(0.97, abs=0.01)
