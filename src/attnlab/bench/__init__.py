"""``attnlab bench``: the engine against a paper-style serial PyTorch baseline, same cells, same process.

    attnlab bench [--suite jiang2024|li2023|wu2023] [--cells 100] [--baseline-cells K] [--scale S] [--json FILE]

A suite (:class:`attnlab.bench.suites.Suite`) is a declaration: its experiment, default scale, the baseline's PyTorch
model, the FLOP count of that model, the per-cell outcome compared and the experiment's success
level. Everything else (cell selection, timing, the serial loop, the report) is shared.

    jiang2024  jiang2024-fig1 at paper scale (M = 16, d = 1024, d_h = d_v = 512, full-batch GD lr
               0.1 to train loss < 0.01, cap 1000 steps); outcome: test loss at the stop, success < 0.2
    li2023     li2023-fig1 at cpu scale (the shallow ViT, L = 50, d = 100, m = 64, m_a = m_b = 32;
               logistic loss, SGD on mini-batches of 32, stop at zero training hinge loss judged
               every 10 steps, cap 1000); outcome: test error at the stop, success = 0
    wu2023     wu2023-width at cpu scale (the encoder, d_s = 8, d = 16, d_m = 1 … 64; ½·mean squared
               loss, full-batch GD for 800 epochs at the width-normalised step); outcome: final /
               initial training loss, success ≤ 10⁻³ (compared on a log scale)

Cells: a seeded subset spread over the experiment's grid (:func:`select_cells`). Grid cells only:
an experiment's lr-tuning stage (li2023-fig1) is not run, every cell trains at its own train.lr.

attnlab: the cells go through the engine twice, as ``attnlab reproduce`` trains them
(``engine.executors.run_cells`` into a temporary store): the first run compiles (``whole``), the
second reuses the compiled programs (``steady``). Compilation alone is then timed ahead of time
(``jit(...).lower(...).compile()`` of every chunk's program, on fresh functions so nothing is
cached).

Baseline: one model at a time, in plain PyTorch as a paper's own script trains it
(:func:`serial_cell`): ``nn.Linear`` layers initialised by the same law as attnlab's model (not
the same draws), ``torch.optim.SGD``, the cell's loss, batch size, stop rule and cap; jiang2024
evaluates the test loss at every step (the released scripts do), the others the test set once at
the stop. Its data are attnlab's (the cell's own key), and so are its mini-batches (the order
:func:`attnlab.train.step.batch` draws, :func:`batch_order`): only the init differs, so outcomes agree
statistically, not bit for bit. Data and batch order are drawn outside its timer. PyTorch threads
(:class:`Baseline`): every core for jiang2024; for the small li2023 and wu2023 models the faster of
1 and every core on short runs (``--baseline-threads`` overrides). With ``--baseline-cells`` <
cells it runs on a seeded sub-subset and its time per cell is extrapolated (stated in the report).

Reported: the ratio of time per cell (baseline / attnlab; steady and whole), the agreement of
outcomes (mean |Δ|, cells on different sides of the success level), the achieved FLOP/s of an
analytic count (:func:`cell_flops`) against a large float32 GEMM measured in the same run, compile
time, peak RSS. PyTorch is optional (``make bench`` or ``pip install torch==2.13.0``); everything
but the baseline works without it.
"""
