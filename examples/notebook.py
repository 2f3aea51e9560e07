# %% [markdown]
# attnlab from Python: run a grid, load its results, query them, plot them, reproduce a figure.
#
# Cells are separated by `# %%` (VS Code, Jupytext and Spyder run them one by one); run the
# whole file with `python examples/notebook.py`. Results go under $ATTNLAB_NOTEBOOK_OUT
# (default results/notebook); rerunning resumes, so finished cells are not trained again.

# %%
import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # drop this line in a notebook to see the figure inline
import matplotlib.pyplot as plt  # noqa: E402

import attnlab  # noqa: E402 (cheap: JAX is imported on the first run)

HERE = Path(__file__).resolve().parent
OUT = Path(os.environ.get("ATTNLAB_NOTEBOOK_OUT", "results/notebook"))

# %% A grid from a TOML file: learning rate × init scale on the jiang2024 model, made even smaller
# with overrides (the same `name=v1,v2` syntax as `attnlab sweep --set`).
grid_dir = OUT / "lr-init"
verdict = attnlab.sweep(
    HERE / "jiang2024_lr_init.toml", grid_dir, sets=["train.max_steps=20", "seeds=1"], progress=False
)
print(f"{verdict['cells']} cells, {verdict['cells_trained_now']} trained now, report: {grid_dir / 'report.html'}")

# %% The results table: one row per cell (config columns, metrics, status, probe traces).
df = attnlab.load(grid_dir)  # a pandas DataFrame; format="arrow" gives a pyarrow Table
summary = df.groupby(["model.init_scale", "train.lr"])["test_loss"].agg(["mean", "std", "count"])
print(summary)

# %% The same question in SQL (DuckDB): `results` is results.parquet, `parts` every stored part.
best = attnlab.query(
    grid_dir,
    """
    SELECT "model.init_scale" AS init_scale, "train.lr" AS lr, avg(test_error) AS test_error
    FROM results GROUP BY ALL ORDER BY test_error LIMIT 3
""",
)
print(best)

# %% A plot of your own from the table: the training loss over steps of every cell.
fig, ax = plt.subplots(figsize=(5, 3.2))
for _, row in df.iterrows():
    ax.plot(
        row["trace_step"],
        row["trace_train_loss"],
        lw=1,
        label=f"lr {row['train.lr']:g}, init/{row['model.init_scale']:g}",
    )
ax.set_xlabel("step")
ax.set_ylabel("training loss")
ax.legend(fontsize=6)
fig.savefig(OUT / "train_loss.png", dpi=120, bbox_inches="tight")

# %% A grid from a dict (the TOML tables as Python): jiang2024 data into the li2023 ViT.
vit_dir = OUT / "jiang-vit"
attnlab.sweep(
    {
        "title": "jiang2024 data into the li2023 ViT",
        "data": {"name": "jiang2024", "M": 4, "d": 16, "mu": [0.5, 4.5], "N": 8, "n_test": 40},
        "model": {"name": "li2023-vit", "m": 16},
        "train": {"lr": 0.1, "max_steps": 20, "loss_threshold": 0.01, "log_every": 10},
    },
    vit_dir,
    progress=False,
)
print(attnlab.load(vit_dir, format="arrow").select(["data.mu", "test_error"]).to_pylist())

# %% A paper figure at smoke scale (seconds); --set overrides work here too.
fig1 = attnlab.reproduce(
    "jiang2024-fig1", scale="smoke", out=OUT / "fig1", sets=["N=2,4", "mu=5", "reps=1", "lr=0.05"], progress=False
)
for claim in fig1["claims"]:
    print(claim["id"], claim["outcome"], claim["measured"])
