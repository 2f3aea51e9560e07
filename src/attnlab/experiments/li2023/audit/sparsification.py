"""The audit design of li2023-fig4: a simulator of the test loss and error of the mean-pooled model
as tokens are removed per strategy, at test time and retrained, the plug-in of its operating
point, and H1 / H0 of every strategy's claims."""

from __future__ import annotations

import numpy as np
from scipy import optimize, stats

from attnlab.audit import ClaimAudit, Design, Hypothesis
from attnlab.data import li2023 as ldata
from attnlab.data import sparsify
from attnlab.experiments.li2023.audit.base import table

SPARSIFY = "Li et al. 2023, Fig. 4 and its token sparsification result: removing irrelevant or noisy tokens helps"


def _loss(m: np.ndarray, loss: str) -> np.ndarray:
    return np.maximum(0, 1 - m) if loss == "hinge" else np.logaddexp(0, -m)


def simulate_sparsification(world: dict, noise: dict, spec, cells: list[dict], rng: np.random.Generator) -> dict:
    """Each trained cell gets its own test set of n_test samples with the design's token counts (n_*
    relevant, n_# confusion, the rest irrelevant; [noisy_frac·L] noisy tokens at random positions,
    ‖z‖ = τ_l·χ_d). The trained model is the theory's mean-pooled one: each token contributes
    b·(+1 relevant, −1 confusion, 0 irrelevant) plus noise ∝ its noise level τ_l, averaged over the
    kept tokens; b and the noise scale are set so the test loss and error before removal are the
    run's (the operating point), scaled per cell. The four strategies remove tokens in their own
    order (irrelevant first, largest ‖z‖ first, random, least attention first = irrelevant first
    under the concentration of Fig. 3); the rows are the derived table's (cell × strategy × k).
    The retrained cells (training-time sparsification, their test samples sparsified alike) get
    fresh draws; retraining sets the scale of the margin, so their margin is the kept tokens' sum
    with the kept signal scaled back to the operating margin: removal changes the noise beside the
    signal, not the scale (at test time the mean over fewer tokens also rescales the margin by
    L/(L − k), which makes irrelevant-first there close to automatic)."""
    from attnlab.engine.grid import cell_id

    cols_all = table(cells)
    retrained = cols_all["data.sparsify"] != "none" if "data.sparsify" in cols_all else np.zeros(len(cells), bool)
    base = [c for c, r in zip(cells, retrained, strict=True) if not r]
    c0, C = base[0], len(base)
    L, n, d = int(c0["data.L"]), int(c0["data.n_test"]), int(c0["data.d"])
    n_rel, n_conf = ldata.n_tokens(c0["data.alpha_star"], L), ldata.n_tokens(c0["data.alpha_hash"], L)
    n_noisy = ldata.n_tokens(c0["data.noisy_frac"], L)
    ks = np.arange(0, spec.k_max + 1, spec.k_step)
    b = noise["margin"] * L / (n_rel - n_conf)
    c = noise["spread"] * L / np.sqrt(n_noisy * c0["data.noisy_tau"] ** 2 + (L - n_noisy) * c0["data.tau"] ** 2)

    def draw(C):
        """Per-token contributions f, roles and noise norms of C cells' test samples."""
        shape = (C, n, L)
        # roles at fixed positions (every order below breaks ties at random, so positions are exchangeable):
        # +1 relevant, −1 confusion, 0 irrelevant; the noisy tokens a random subset, independent of the roles
        pos = np.arange(L)
        role = np.broadcast_to(np.where(pos < n_rel, 1.0, np.where(pos < n_rel + n_conf, -1.0, 0.0)), shape)
        noisy = np.zeros(shape, bool)
        np.put_along_axis(noisy, rng.random(shape).argpartition(n_noisy, -1)[..., :n_noisy], True, -1)
        level = np.where(noisy, c0["data.noisy_tau"], c0["data.tau"])
        norm = level * np.sqrt(rng.chisquare(d, shape))  # ‖z_l‖ of per-coordinate Gaussian noise
        # the mean-pooled model: margin M and sd S before removal (the operating point), scaled per cell
        f = (b * role + c * level * rng.standard_normal(shape)) * np.exp(
            noise["cell_sd"] * rng.standard_normal((C, 1, 1))
        )
        return f, role, norm

    def order(how: str, role, norm):
        """Removal priority (highest first): irrelevant first, largest ‖z‖ first, at random, and the
        misspecified orders: relevant (and confusion) tokens first, smallest ‖z‖ first, or irrelevant
        first with odds 3:1 against each other token at every removal ("half": less informed than
        irrelevant-first, more than random)."""
        u = rng.random(role.shape)
        return {
            "irrelevant": lambda: 2.0 * (role == 0) + u,
            "noisiest": lambda: norm,
            "random": lambda: u,
            "relevant": lambda: 2.0 * (role != 0) + u,
            "quietest": lambda: -norm,
            # irrelevant tokens three times as likely to go next as the others (Gumbel top-k: Plackett–Luce)
            "half": lambda: np.log(np.where(role == 0, 3.0, 1.0)) - np.log(-np.log(u)),
        }[how]()

    def removed(f, prio, ks):
        """Σ of f over the kept tokens after removing each k of ks (highest priority first)."""
        fs = np.take_along_axis(f, np.argsort(-prio, -1), -1)
        return f.sum(-1, keepdims=True) - np.concatenate([np.zeros(f.shape[:2] + (1,)), np.cumsum(fs, -1)], -1)[..., ks]

    # test time: the model trained on all tokens, evaluated on the mean over the kept tokens
    f, role, norm = draw(C)
    informed = {
        "irrelevant": "irrelevant",
        "noisiest": "noisiest",
        "random": "random",
        "attention": "irrelevant",
    }  # attention concentrated on relevant and confusion keys
    loss, hinge, err = (np.empty((C, len(sparsify.STRATEGIES), len(ks))) for _ in range(3))
    for j, s in enumerate(sparsify.STRATEGIES):
        how = world[s]
        m = removed(f, order(informed[s] if how == "informed" else how, role, norm), ks) / (L - ks)  # y·F
        loss[:, j], hinge[:, j] = _loss(m, c0["train.loss"]).mean(1), _loss(m, "hinge").mean(1)
        err[:, j] = (m <= 0).mean(1)
    S, K = len(sparsify.STRATEGIES), len(ks)
    cols = {k: np.repeat(v, S * K) for k, v in table(base).items()}
    cols |= {
        "id": np.repeat([cell_id(c) for c in base], S * K),
        "removal": np.full(C * S * K, "test", object),
        "strategy": np.tile(np.repeat(np.array(sparsify.STRATEGIES, object), K), C),
        "k_removed": np.tile(ks, C * S),
        "test_loss": loss.ravel(),
        "test_hinge": hinge.ravel(),
        "test_error": err.ravel(),
    }
    # training time: a model retrained on the kept tokens; training sets the scale of its margin
    # (it stops at zero training hinge loss), so the signal kept is scaled back to the operating
    # margin and what changes is the noise kept beside it: the mean margin stays, its spread moves
    train = [cc for cc, r in zip(cells, retrained, strict=True) if r]
    rows = []
    for (s, k), group in _groups(train).items():
        f, role, norm = draw(len(group))
        how = s if world[s] == "informed" else world[s]
        prio = order(how, role, norm)
        kept = removed(f, prio, [k])[..., 0]
        kept_signal = removed(b * role, prio, [k])[..., 0].mean()
        m = kept * (n_rel - n_conf) / (L * kept_signal / b) if kept_signal > 0 else kept / (L - k)
        rows.append((group, _loss(m, c0["train.loss"]).mean(1), _loss(m, "hinge").mean(1), (m <= 0).mean(1)))
    if rows:
        group = [cc for g, *_ in rows for cc in g]
        tr = table(group)
        tr |= {
            "id": np.array([cell_id(cc) for cc in group]),
            "removal": np.full(len(group), "train", object),
            "strategy": tr["data.sparsify"].astype(object),
            "k_removed": tr["data.sparsify_k"].astype(int),
            "test_loss": np.concatenate([r[1] for r in rows]),
            "test_hinge": np.concatenate([r[2] for r in rows]),
            "test_error": np.concatenate([r[3] for r in rows]),
        }
        cols = {key: np.concatenate([cols[key], tr[key]]) for key in cols}
    return cols


def _groups(cells: list[dict]) -> dict[tuple[str, int], list[dict]]:
    """Retrained cells by (training strategy, k)."""
    out: dict[tuple[str, int], list[dict]] = {}
    for c in cells:
        out.setdefault((c["data.sparsify"], int(c["data.sparsify_k"])), []).append(c)
    return out


def operating_point(loss: np.ndarray, error: float, how: str = "logistic") -> dict:
    """Margin M, sd S and the per-cell log-scale sd of a Gaussian margin N(M, S²) whose mean loss is
    that of the cells before removal and whose error Φ(−M/S) is ``error``."""
    x, w = np.polynomial.hermite_e.hermegauss(60)
    z = -stats.norm.ppf(np.clip(error, 1e-6, 0.49))
    mean_loss = lambda S, g=1.0: float(w @ _loss(g * S * (z + x), how)) / np.sqrt(2 * np.pi)
    S = optimize.brentq(lambda S: mean_loss(S) - np.mean(loss), 1e-3, 3.0 / z)  # the root below the loss's minimum
    slope = (np.log(mean_loss(S, 1.01)) - np.log(mean_loss(S, 0.99))) / 0.02  # d log loss / d log scale
    return {"margin": float(z * S), "spread": float(S), "cell_sd": float(np.std(np.log(loss), ddof=1) / abs(slope))}


def plug_in_sparsification(cols: dict, spec) -> dict:
    """The operating point of the run's cells before removal (k = 0)."""
    at0 = (np.asarray(cols["k_removed"]) == 0) & (np.asarray(cols["strategy"]) == "random")
    if "removal" in cols:
        at0 &= np.asarray(cols["removal"]) == "test"
    return operating_point(
        np.asarray(cols["test_loss"], float)[at0],
        float(np.mean(np.asarray(cols["test_error"])[at0])),
        str(np.asarray(cols["train.loss"])[at0][0]),
    )


# H1: each informed order removes what the paper says it removes, at the size this mean-pooled model
# gives at the design's counts; H0 per claim: that order carries no information (it removes like
# random removal: the contrast the paper draws), or random removal does what irrelevant-first does
_INFORMED = {"irrelevant": "informed", "noisiest": "informed", "random": "random", "attention": "informed"}
_H1_SPARSE = Hypothesis(
    "the informed orders remove the tokens the mean-pooled model's margin suffers from", SPARSIFY, _INFORMED
)
_NO_INFORMATION = {  # per removal order: the claim's H0, that it carries no information
    "irrelevant": Hypothesis(
        "irrelevant-first removes like random removal",
        "no effect of which tokens are removed",
        _INFORMED | {"irrelevant": "random"},
    ),
    "noisiest": Hypothesis(
        "noisiest-first removes like random removal", "no effect of the noise level", _INFORMED | {"noisiest": "random"}
    ),
}
_RANDOM = ClaimAudit(
    "random",
    Hypothesis("random removal keeps the share of relevant tokens", SPARSIFY, _INFORMED),
    Hypothesis(
        "random removal helps like irrelevant-first",
        "which tokens are removed does not matter",
        _INFORMED | {"random": "irrelevant"},
    ),
)
_HARMFUL = {  # per claim: a misspecified world, an order that removes what the model needs
    "irrelevant": Hypothesis(
        "the order removes relevant and confusion tokens first", "the reverse", _INFORMED | {"irrelevant": "relevant"}
    ),
    "noisiest": Hypothesis(
        "the order removes the quietest tokens first", "the reverse", _INFORMED | {"noisiest": "quietest"}
    ),
    "random": Hypothesis(
        "random removal in fact removes the noisiest tokens first", "another law", _INFORMED | {"random": "noisiest"}
    ),
}
_ORDER_H1 = Hypothesis(
    "irrelevant-first gains most, noisiest-first less (irrelevant first at odds 3:1), random least",
    SPARSIFY + "; the order of the curves",
    _INFORMED | {"noisiest": "half"},
)
_ORDER = (
    _ORDER_H1,
    Hypothesis(
        "noisiest-first gains most, irrelevant-first less: the two informed orders swapped",
        "the reverse order of the informed strategies",
        _INFORMED | {"irrelevant": "half", "noisiest": "irrelevant"},
    ),
    Hypothesis("every order removes at random", "no order", _INFORMED | {"irrelevant": "random", "noisiest": "random"}),
)
SPARSIFICATION = Design(
    simulate=simulate_sparsification,
    claims=tuple(  # removal in training, then at test time: the same hypotheses
        ClaimAudit(f"{c.claim}{suffix}", c.h1, c.h0, misspecified=(_HARMFUL[c.claim],))
        for suffix in ("", "-test")
        for c in (*(ClaimAudit(k, _H1_SPARSE, h0) for k, h0 in _NO_INFORMATION.items()), _RANDOM)
    )
    # order-k at the smoke scale's k = 2, 4 and the cpu and paper scales' 10, 20
    + tuple(ClaimAudit(f"order-{k}", _ORDER[0], _ORDER[1], misspecified=(_ORDER[2],)) for k in (2, 4, 10, 20))
    + (
        ClaimAudit(
            "attention",
            _H1_SPARSE,
            Hypothesis("the attention ranks tokens at random", "no concentration", _INFORMED | {"attention": "random"}),
        ),
    ),
    noise={"margin": 1.32, "spread": 0.54, "cell_sd": 0.098},
    noise_source="default: a cpu-scale run of li2023-fig4",
    plug_in=plug_in_sparsification,
)
