"""Losses, optimisers, the batch sampler and the trainer: a vectorised bucket trainer and a
plain reference. It knows no paper: everything paper-specific comes in through a :class:`Problem`.

Vectorised path (:func:`train_bucket`): a bucket of cells is one compiled program built from
batched (``vmap``-ed) per-cell functions, in one of two strategies:

    vmap        jit( while_loop( vmap(step_one) ) ), in segments, compacting the batch to the
                cells still running (accelerators: fills the device)
    sequential  jit( lax.map( cell -> while_loop(step) ) ), each cell to its own stop step
                (CPU: a vmapped step costs as much per cell as a single one, so this avoids
                waiting for stragglers and padding)

The step counter lives outside the ``vmap`` so it is a plain scalar: the loop stops as soon as
every cell is done, and the probe and stop schedules are real branches. Per cell, at step t:

* the loss of the step's batch B_t and its gradient are computed, with the model's ``aux``
  (``has_aux``): full batch, B_t = the whole training set; mini-batch (``batch_size = b``),
  B_t = the t-th slice of b indices of a fresh per-cell permutation of the N training samples
  each epoch (the last batch of an epoch may be short);
* on the stop schedule (every ``stop_every`` steps, and at ``max_steps``) the stop quantity on
  the *full* training set, J(θ_t), is judged: the training loss L(θ_t) by default, or the mean
  of another per-sample quantity (``Problem.stop_fn``, e.g. the hinge loss, so "zero training
  hinge loss" can stop a run trained with the logistic loss). For full batch it comes from the
  step's own forward pass; a mini-batch value is too noisy, so it is computed on the full set:
  the cell stops at the first such t with J(θ_t) < ``loss_threshold`` (``converged``), or at
  t = ``max_steps`` (``cap``); a non-finite step loss stops it at once (``diverged``). From then
  on its parameters are frozen by a mask, so metrics taken after the loop are those of θ_stop;
* otherwise θ_{t+1} = θ_t + optimiser update, with the cell's own learning rate times the
  multiplier of each parameter's group (``optax.multi_transform``);
* at every t of a recorder's schedule its probes of θ_t are written into preallocated arrays:
  scalar probes (and the full training loss) on ``log_steps``, array-valued probes (kernels,
  spectra) on ``array_log_steps``; a slot after a cell's stop holds the probes of θ_stop.

Randomness: every stream is ``fold_in(cell key, STREAMS[name])`` with a fixed integer id, so
adding a stream later changes no existing one.

Dual (Gram) form, a fast path a model may declare (:class:`Dual`): parameters W that enter the
model only through token projections P_W = X W (X: the training tokens stacked, n·L × d) move,
under full-batch GD or momentum, only inside the row space of X, W_t = W_0 + Xᵀ A_t, so

    P_W(t) = X W_0 + G A_t,   G = X Xᵀ,   A_{t+1} = A_t + update(∂L/∂P_W)

with the optimiser's own (linear) update applied to A. A step then costs (nL)²·width instead of
nL·d·width, and W_t = W_0 + Xᵀ A_t is rebuilt only where a probe, the final metrics or the saved
parameters need it. Exact in exact arithmetic; tests check it against the plain path.

Reference path (:func:`train_reference`): the same per-cell functions, one cell at a time, in a
Python loop. Tests check that both paths agree.
"""

from attnlab.train.bucket import (
    COMPILE_TIME,
    PROGRAMS_BUILT,
    compile_ahead,
    compile_cache_dir,
    default_strategy,
    enable_compile_cache,
    train_bucket,
)
from attnlab.train.reference import train_reference
from attnlab.train.types import (
    CAP,
    CONVERGED,
    DIVERGED,
    LOSSES,
    REDUCTIONS,
    STATUS_NAMES,
    STREAMS,
    Dual,
    Loss,
    Params,
    Problem,
    TrainConfig,
    log_schedule,
    stream,
)

__all__ = [
    "CAP",
    "COMPILE_TIME",
    "CONVERGED",
    "DIVERGED",
    "LOSSES",
    "PROGRAMS_BUILT",
    "REDUCTIONS",
    "STATUS_NAMES",
    "STREAMS",
    "Dual",
    "Loss",
    "Params",
    "Problem",
    "TrainConfig",
    "compile_ahead",
    "compile_cache_dir",
    "default_strategy",
    "enable_compile_cache",
    "log_schedule",
    "stream",
    "train_bucket",
    "train_reference",
]
