"""Nothing stored is ever lost: a results directory belongs to one run, every generated output lands
beside stored data and never on it, and everything checkable is checked before any work.

Each class of fault is a table of cases, tried on a copy of the session's jiang2024-fig1 smoke run:
the command exits non-zero with one clear line (no traceback) and every file under the test's
directory is byte-identical afterwards (:mod:`attnlab.engine.guard`)."""

import json
import shutil
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from attnlab import api
from attnlab.cli import app
from attnlab.errors import AttnlabError

runner = CliRunner()
SWEEP = '[data]\nname = "jiang2024"\nM = 4\nd = 8\nN = 4\n[model]\nname = "jiang2024"\nd_h = 4\nd_v = 4\n'


def files_of(d: Path) -> dict:
    return {p.relative_to(d): p.read_bytes() for p in sorted(Path(d).rglob("*")) if p.is_file()}


@pytest.fixture
def run(smoke, tmp_path) -> Path:
    """A copy of a finished jiang2024-fig1 smoke run, in the test's own directory."""
    dest = tmp_path / "fig1"
    shutil.copytree(smoke("jiang2024-fig1").out, dest)
    return dest


def invoke(args, env=None):
    return runner.invoke(app, [str(a) for a in args], env=env)


def refused(tmp_path: Path, args, needle: str, code: int = 2, env=None):
    """Run ``args``: a non-zero exit with ``needle`` in one error line, and no file changed."""
    before = files_of(tmp_path)
    r = invoke(args, env)
    text = r.output.replace("\n", " ")
    assert r.exit_code == code, r.output
    assert r.output.startswith("error: ") and "Traceback" not in r.output, r.output
    assert needle in text, r.output
    assert files_of(tmp_path) == before, "a stored or existing file changed"
    return r


def part_of(run: Path) -> Path:
    return next((run / "parts").glob("part-*.parquet"))


# ---------------------------------------------------------------- a results directory is one run's


@pytest.mark.parametrize(
    "args, needle",
    [
        (  # another experiment into a run's directory: refused, naming both
            ["reproduce", "jiang2024-fig3", "--scale", "smoke", "--out", "{run}"],
            "holds the results of jiang2024-fig1 at smoke scale; this run is jiang2024-fig3 at smoke scale",
        ),
        (  # the same experiment at another scale would replace its verdict and report
            ["reproduce", "jiang2024-fig1", "--scale", "cpu", "--out", "{run}"],
            "holds the results of jiang2024-fig1 at smoke scale; this run is jiang2024-fig1 at cpu scale",
        ),
        (  # a user grid into an experiment's directory
            ["sweep", "{spec}", "--out", "{run}"],
            "holds the results of jiang2024-fig1 at smoke scale; this run is the user grid 'grid.toml'",
        ),
        (  # a dry run refuses what the run would refuse
            ["reproduce", "jiang2024-fig3", "--scale", "smoke", "--out", "{run}", "--dry-run"],
            "holds the results of jiang2024-fig1",
        ),
        (["reproduce", "jiang2024-fig1", "--scale", "smoke", "--out", "{run}/parts/run2"], "inside the stored parts"),
        (["reproduce", "jiang2024-fig1", "--scale", "smoke", "--out", "{run}/parts"], "inside the stored parts"),
        (["sweep", "{spec}", "--out", "{run}/parts/damaged"], "inside the stored parts"),
        (["reproduce", "all", "--scale", "smoke", "--out", "{run}"], "reproduce all writes one directory per id"),
        (["report", "{run}", "--index", "{part}"], "is stored data of the run in"),
        (["report", "{run}", "--index", "{run}/results.parquet"], "is stored data of the run in"),
        (["audit", "jiang2024-fig3", "--scale", "smoke", "--sims", "2", "--out", "{run}"], "holds the results of"),
        (["audit", "jiang2024-fig1", "--scale", "smoke", "--sims", "2", "--out", "{run}/parts"], "stored parts"),
    ],
)
def test_another_runs_results_are_never_written_into(run, tmp_path, args, needle):
    spec = tmp_path / "grid.toml"
    spec.write_text(SWEEP)
    part = part_of(run)
    refused(tmp_path, [a.format(run=run, spec=spec, part=part) for a in args], needle)


def test_a_legacy_directory_is_known_by_its_verdict(run, tmp_path):
    """A results directory written before store.json recorded its run is known by verdict.json."""
    manifest = json.loads((run / "store.json").read_text())
    del manifest["run"]
    (run / "store.json").write_text(json.dumps(manifest))
    refused(tmp_path, ["reproduce", "jiang2024-fig3", "--scale", "smoke", "--out", run], "holds the results of")


def test_reproduce_all_checks_every_destination_before_any_id_runs(run, tmp_path):
    root = tmp_path / "all"
    root.mkdir()
    shutil.move(run, root / "jiang2024-fig3")  # a fig1 run in the folder of fig3
    refused(tmp_path, ["reproduce", "all", "--scale", "smoke", "--out", root], "jiang2024-fig3: holds the results")
    assert not (root / "jiang2024-fig1").exists()  # the first id did not run either


# ---------------------------------------------------------------- generated outputs beside stored data


def test_a_generated_file_never_replaces_a_directory_or_someone_elses_file(run, tmp_path):
    (tmp_path / "mine.html").write_text("my notes")
    refused(tmp_path, ["report", run, "--index", tmp_path / "mine.html"], "a file attnlab did not write is there")
    refused(tmp_path, ["report", run, "--index", tmp_path], "is a directory")
    (tmp_path / "blocker").write_text("x")
    refused(tmp_path, ["report", run, "--index", tmp_path / "blocker" / "i.html"], "is a file, not a directory")
    (tmp_path / "docs-file").write_text("x")
    refused(tmp_path, ["docs", "--docs", tmp_path / "docs-file"], "is a file, not a directory")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "jiang2024.md").write_text("# my own page")
    refused(tmp_path, ["docs", "--docs", docs], "a file attnlab did not write is there")
    (tmp_path / "audit-out").mkdir()
    (tmp_path / "audit-out" / "audit.json").mkdir()
    refused(tmp_path, ["audit", "jiang2024-fig1", "--sims", "2", "--out", tmp_path / "audit-out"], "is a directory")
    r = invoke(["report", run, "--index", tmp_path / "index.html"])  # an index page may be written over by another
    assert r.exit_code == 0 and invoke(["report", run, "--index", tmp_path / "index.html"]).exit_code == 0


# ---------------------------------------------------------------- docs --collect


def _collect_setup(tmp_path: Path, smoke) -> tuple[Path, Path]:
    """A docs directory with committed entries, and a run directory to collect from."""
    root = Path(__file__).resolve().parents[2] / "docs"
    docs = tmp_path / "docs"
    shutil.copytree(root / "results", docs / "results")
    for page in root.glob("*.md"):
        shutil.copy(page, docs / page.name)
    return docs, tmp_path / "all"


def _cpu_copy(src: Path, dest: Path) -> Path:
    """A smoke run relabelled as cpu (docs take cpu and paper runs only)."""
    shutil.copytree(src, dest)
    v = json.loads((dest / "verdict.json").read_text())
    (dest / "verdict.json").write_text(json.dumps(v | {"scale": "cpu"}))
    return dest


@pytest.mark.parametrize(
    "damage, needle",
    [
        ("misplaced", "holds a run of 'jiang2024-fig1', not of jiang2024-fig3"),
        ("truncated", "verdict.json: malformed JSON"),
        ("not a verdict", "not a verdict (needs experiment, scale, cells and claims)"),
        ("bad spec", "spec.json: invalid spec"),
        ("bad png", "not a PNG image"),
        ("smoke", "the docs show cpu or paper runs"),
    ],
)
def test_collect_skips_a_damaged_or_misplaced_run_and_keeps_the_committed_entry(smoke, tmp_path, damage, needle):
    docs, all_dir = _collect_setup(tmp_path, smoke)
    fig1 = smoke("jiang2024-fig1").out
    if damage == "misplaced":
        d = _cpu_copy(fig1, all_dir / "jiang2024-fig3")
    else:
        d = _cpu_copy(fig1, all_dir / "jiang2024-fig1")
        verdict = d / "verdict.json"
        if damage == "truncated":
            verdict.write_bytes(verdict.read_bytes()[:100])
        elif damage == "not a verdict":
            verdict.write_text(json.dumps({"experiment": "jiang2024-fig1"}))
        elif damage == "bad spec":
            (d / "spec.json").write_text(json.dumps(json.loads((d / "spec.json").read_text()) | {"reps": -1}))
        elif damage == "bad png":
            next(d.glob("*.png")).write_bytes(b"not an image")
        elif damage == "smoke":
            verdict.write_text(json.dumps(json.loads(verdict.read_text()) | {"scale": "smoke"}))
    committed = files_of(docs / "results")
    r = invoke(["docs", "--collect", all_dir, "--docs", docs])
    assert r.exit_code == 1 and "Traceback" not in r.output, r.output
    assert needle in r.output.replace("\n", " ") and "its committed entry is left as it was" in r.output, r.output
    assert files_of(docs / "results") == committed


def test_collect_takes_the_good_runs_beside_a_damaged_one(smoke, tmp_path):
    docs, all_dir = _collect_setup(tmp_path, smoke)
    _cpu_copy(smoke("jiang2024-fig1").out, all_dir / "jiang2024-fig1")
    bad = _cpu_copy(smoke("jiang2024-fig3").out, all_dir / "jiang2024-fig3")
    (bad / "verdict.json").write_text("{")
    fig3 = files_of(docs / "results" / "jiang2024-fig3")
    r = invoke(["docs", "--collect", all_dir, "--docs", docs])
    assert r.exit_code == 1 and "collected 1 runs" in r.output, r.output
    assert (
        json.loads((docs / "results" / "jiang2024-fig1" / "verdict.json").read_text())["cells"]
        == json.loads((all_dir / "jiang2024-fig1" / "verdict.json").read_text())["cells"]
    )
    assert files_of(docs / "results" / "jiang2024-fig3") == fig3


# ---------------------------------------------------------------- checked before any work


@pytest.fixture
def plugin(tmp_path, monkeypatch) -> str:
    """A user's module that raises on import, in the current directory (a name of its own per test:
    the module search path keeps the directories of earlier tests of this process)."""
    name = f"broken_{abs(hash(str(tmp_path))) % 10**8}"
    (tmp_path / f"{name}.py").write_text(
        textwrap.dedent(
            """\
            import math

            SCALE = math.sqrt(-1.0)  # a bug of the user's
            """
        )
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.dont_write_bytecode", True)  # a failed import must leave no file behind either
    return name


@pytest.mark.parametrize(
    "args",
    [
        ["check-part", "{m}:PART"],
        ["fields", "model.{m}:PART"],
        ["reproduce", "jiang2024-fig1", "--scale", "smoke", "--out", "out", "--set", "model.name={m}:PART"],
        ["sweep", "grid.toml", "--out", "out"],
    ],
)
def test_a_user_module_that_raises_on_import_is_one_message_with_its_file_and_line(plugin, tmp_path, args):
    (tmp_path / "grid.toml").write_text(
        SWEEP.replace('name = "jiang2024"\nd_h', f'name = ["jiang2024", "{plugin}:PART"]\nd_h')
    )
    r = refused(tmp_path, [a.format(m=plugin) for a in args], f"importing '{plugin}' raised ValueError: math domain")
    assert f"{tmp_path / plugin}.py:3 (SCALE = math.sqrt(-1.0)" in r.output.replace("\n", ""), r.output
    assert not (tmp_path / "out").exists()


def test_debugging_a_syntax_error_names_the_line(tmp_path, monkeypatch):
    (tmp_path / "typo_parts.py").write_text("PART = (\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.dont_write_bytecode", True)
    r = refused(tmp_path, ["fields", "model.typo_parts:PART"], "importing 'typo_parts' raised SyntaxError")
    assert "typo_parts.py:1" in r.output.replace("\n", "")


@pytest.mark.parametrize(
    "setup, args, needle, env",
    [
        ("tb-file", ["--log", "tensorboard"], "--log tensorboard: {out}/tb: is a file, not a directory", None),
        ("wandb-file", ["--log", "wandb"], "--log wandb: {out}/wandb: is a file, not a directory", None),
        (None, ["--log", "wandb"], "WANDB_MODE='bogus' is not a W&B mode", {"WANDB_MODE": "bogus"}),
        (None, ["--log", "comet", "--dry-run"], "--log: unknown tracker 'comet'", None),
        (None, ["--log", "wandb", "--dry-run"], "WANDB_MODE='bogus' is not a W&B mode", {"WANDB_MODE": "bogus"}),
        ("tb-file", ["--log", "tensorboard", "--dry-run"], "is a file, not a directory", None),
    ],
)
def test_a_misconfigured_tracker_is_refused_before_training(run, tmp_path, setup, args, needle, env):
    if setup:
        (run / setup.split("-")[0]).write_text("a file in the way")
    args = ["reproduce", "jiang2024-fig1", "--scale", "smoke", "--out", run, *args]
    refused(tmp_path, args, needle.format(out=run), env=env)


@pytest.mark.parametrize(
    "how, needle",
    [
        (["reproduce", "jiang2024-fig1", "--scale", "smoke", "--set", "N=2,2"], "the grid gives one cell twice"),
        (["reproduce", "jiang2024-fig1", "--scale", "smoke", "--set", "lr=0.1,0.10"], "the grid gives one cell twice"),
        (["sweep", "{spec}", "--set", "train.lr=0.1,0.1"], "train.lr: the grid axis ['0.1', '0.1'] gives the value"),
        (
            ["sweep", "{spec}", "--set", "data.N=2,2.0"],
            "data.N: the grid axis ['2', '2.0'] gives '2' and '2.0' the same",
        ),
        (["sweep", "{spec}", "--set", "model.name=jiang2024,jiang2024"], "model.name: the grid axis"),
    ],
)
def test_a_repeated_axis_value_is_refused_as_a_repeated_seed_is(tmp_path, how, needle):
    spec = tmp_path / "grid.toml"
    spec.write_text(SWEEP)
    for dry in ([], ["--dry-run"]):
        refused(tmp_path, [*(a.format(spec=spec) for a in how), "--out", tmp_path / "out", *dry], needle)
    assert not (tmp_path / "out").exists()


def test_audit_sims_are_bounded_as_the_help_says(tmp_path):
    refused(
        tmp_path, ["audit", "jiang2024-fig1", "--sims", "1000000000", "--out", tmp_path / "a"], "must be 1 to 10,000"
    )
    r = invoke(["audit", "--help"])
    assert "10,000" in r.output


# ---------------------------------------------------------------- a damaged Parquet file


def flip(path: Path) -> None:
    """Flip bytes in the middle of a Parquet file's data (its footer left intact)."""
    data = bytearray(path.read_bytes())
    for i in range(len(data) // 3, len(data) // 3 + 16):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    "args",
    [
        ["audit", "jiang2024-fig1", "--from", "{run}", "--sims", "2"],
        ["report", "{run}"],
        ["query", "{run}", "SELECT count(*) FROM results"],
    ],
)
def test_a_damaged_results_file_is_one_error_naming_it_and_its_repair(run, tmp_path, args):
    flip(run / "results.parquet")
    r = refused(tmp_path, [a.format(run=run) for a in args], f"{run}/results.parquet: damaged or unreadable Parquet")
    assert "Its parts rebuild it without training: rerun `attnlab reproduce jiang2024-fig1" in r.output.replace(
        "\n", ""
    )
    with pytest.raises(AttnlabError, match="damaged or unreadable Parquet"):
        api.load(run)


def test_a_damaged_part_is_named_by_query(run, tmp_path):
    part = part_of(run)
    flip(part)
    refused(tmp_path, ["query", run, "SELECT count(*) FROM parts"], f"{part}: damaged or unreadable Parquet")


def test_a_user_grid_resumes_into_its_own_directory_and_no_other(tmp_path):
    grid, other, out = tmp_path / "grid.toml", tmp_path / "other.toml", tmp_path / "out"
    grid.write_text(SWEEP + "[train]\nmax_steps = 5\n")
    other.write_text(SWEEP + "[train]\nmax_steps = 5\n")
    assert invoke(["sweep", grid, "--out", out, "--quiet"]).exit_code == 0
    grid.write_text(SWEEP + "[train]\nmax_steps = 5\nlr = [0.1, 0.05]\n")  # an edited spec resumes its grid
    assert invoke(["sweep", grid, "--out", out, "--quiet"]).exit_code == 0
    assert json.loads((out / "store.json").read_text())["run"] == {
        "experiment": "sweep",
        "scale": "user",
        "grid": "grid.toml",
    }
    refused(
        tmp_path,
        ["sweep", other, "--out", out],
        "holds the results of the user grid 'grid.toml'; this run is the user grid 'other.toml'",
    )


def test_a_committed_docs_entry_is_not_a_results_directory(tmp_path):
    entry = tmp_path / "entry"
    shutil.copytree(Path(__file__).resolve().parents[2] / "docs" / "results" / "jiang2024-fig1", entry)
    refused(tmp_path, ["reproduce", "jiang2024-fig1", "--out", entry, "--dry-run"], "holds a verdict without results")
