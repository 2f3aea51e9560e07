"""The Parquet store (parts, assembly, manifest) and provenance, on small hand-made tables."""

import json
import re

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from attnlab.engine.store import Store
from attnlab.errors import AttnlabError
from attnlab.provenance import provenance, versions

V = {"jax": "0.10.2", "jaxlib": "0.10.2"}


def rows(ids, n=1, loss=0.5):
    return pa.table({"id": list(ids), "N": [n] * len(ids), "test_loss": [loss] * len(ids)})


def test_write_part_takes_a_table_and_done_ids_sees_it(tmp_path):
    store = Store(tmp_path)
    assert store.done_ids() == set()
    path = store.write_part(rows(["b", "a"]))
    assert path.parent == store.parts and re.fullmatch(r"part-[0-9a-f]{16}\.parquet", path.name)
    assert store.write_part(rows(["a", "b"], n=7)) == path  # named by the sorted ids
    store.write_part(rows(["c"]))
    assert store.done_ids() == {"a", "b", "c"}
    assert pq.read_table(path).column_names == ["id", "N", "test_loss"]


def test_write_part_needs_an_id_column_and_a_table(tmp_path):
    store = Store(tmp_path)
    with pytest.raises(ValueError, match="id"):
        store.write_part(pa.table({"N": [1]}))
    with pytest.raises(TypeError, match="Table"):
        store.write_part([{"id": "a", "N": 1}])


def test_assemble_keeps_the_requested_order_and_the_first_part_wins(tmp_path):
    store = Store(tmp_path)
    p1 = store.write_part(rows(["a", "b"], n=1, loss=0.1))
    p2 = store.write_part(rows(["b", "c"], n=2, loss=0.2))  # "b" written twice
    first = min(p1, p2, key=lambda p: p.name)
    table = store.assemble(["c", "b", "a"])
    assert table.column("id").to_pylist() == ["c", "b", "a"]
    assert table.column_names == ["id", "N", "test_loss"]
    b = table.to_pylist()[1]
    assert b["N"] == (1 if first == p1 else 2)
    assert pq.read_table(tmp_path / "results.parquet").equals(table)
    assert store.assemble(["a"]).column("id").to_pylist() == ["a"]  # a subset is fine


def test_assemble_unions_parts_with_different_columns(tmp_path):
    store = Store(tmp_path)
    store.write_part(rows(["a"]))
    store.write_part(pa.table({"id": ["b"], "N": [2], "test_loss": [0.3], "extra": [1.5]}))
    table = store.assemble(["a", "b"])
    assert table.column("extra").to_pylist() == [None, 1.5]


def test_assemble_with_missing_ids_names_them_and_writes_nothing(tmp_path):
    store = Store(tmp_path)
    store.write_part(rows(["a", "b"]))
    wanted = ["a", "b"] + [f"m{i}" for i in range(7)]
    with pytest.raises(AttnlabError) as e:
        store.assemble(wanted)
    msg = str(e.value)
    assert "7 of 9" in msg and "m0" in msg and "m4" in msg and "m5" not in msg and "2 more" in msg
    assert "Rerun" in msg
    assert not (tmp_path / "results.parquet").exists()

    with pytest.raises(AttnlabError, match=r"(?s)1 of 2 .*N=64 rep=3 \[zz\]") as e:
        store.assemble(["a", "zz"], describe=lambda i: "N=64 rep=3")

    with pytest.raises(AttnlabError, match="1 of 1"):
        Store(tmp_path / "empty").assemble(["a"])


def test_assemble_of_nothing_from_nothing(tmp_path):
    assert Store(tmp_path).assemble([]).num_rows == 0


@pytest.mark.parametrize("name", ['it\'s a "quoted" dir', "runs [ab] *? {x,y}", "~"])
def test_paths_with_quotes_spaces_and_glob_characters(tmp_path, name):
    out = tmp_path / name / "out"
    store = Store(out)
    store.check_compatible({"schema": {"f": 1}, **V})
    store.write_part(rows(["a", "b"]))
    store.write_part(rows(["c"]))
    # A sibling that the glob "runs [ab]" matches, with a part of the same name (same ids):
    # DuckDB would read it instead of the real one if the path were not escaped.
    decoy = Store(tmp_path / "runs a" / "out")
    decoy.write_part(rows(["a", "b"], n=99))
    decoy.write_part(rows(["decoy"], n=99))
    assert store.done_ids() == {"a", "b", "c"}
    table = store.assemble(["c", "a"])
    assert table.column("id").to_pylist() == ["c", "a"]
    assert table.column("N").to_pylist() == [1, 1]
    assert (out / "results.parquet").exists()
    store.check_compatible({"schema": {"f": 1}, **V})


def test_relative_tilde_directory_is_not_the_home_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    store = Store("~/out")  # a directory literally named "~", as Python sees it
    store.write_part(rows(["a"]))
    assert store.done_ids() == {"a"}


def test_a_part_that_fails_mid_write_leaves_nothing(tmp_path, monkeypatch):
    def half_then_crash(table, where, **kw):
        where.write(b"PAR1 half a file")
        raise OSError("disk full")

    store = Store(tmp_path)
    store.write_part(rows(["a"]))
    before = sorted(store.parts.iterdir())
    monkeypatch.setattr(pq, "write_table", half_then_crash)
    with pytest.raises(OSError, match="disk full"):
        store.write_part(rows(["b"]))
    monkeypatch.undo()
    assert sorted(store.parts.iterdir()) == before  # neither a part nor a temporary file
    assert store.done_ids() == {"a"}


def manifest(tmp_path):
    return json.loads((tmp_path / "store.json").read_text())


def test_check_compatible_first_call_writes_the_manifest_and_same_versions_pass(tmp_path):
    store = Store(tmp_path)
    store.check_compatible({"schema": {"jiang2024": 1}, **V})
    assert manifest(tmp_path) == {"schema": {"jiang2024": 1}, **V}
    store.write_part(rows(["a"]))
    store.check_compatible({"schema": {"jiang2024": 1}, **V})
    # a new family in the same directory is added
    store.check_compatible({"schema": {"other": 3}, **V})
    assert manifest(tmp_path)["schema"] == {"jiang2024": 1, "other": 3}


def test_check_compatible_before_any_part_merges_and_updates(tmp_path):
    store = Store(tmp_path)
    store.check_compatible({"schema": {"a": 1}, **V})
    store.check_compatible({"schema": {"b": 2}, "jax": "0.10.3", "jaxlib": "0.10.3"})
    assert manifest(tmp_path) == {"schema": {"a": 1, "b": 2}, "jax": "0.10.3", "jaxlib": "0.10.3"}


def test_a_different_jax_version_raises_unless_forced(tmp_path):
    store = Store(tmp_path)
    store.check_compatible({"schema": {"f": 1}, "jax": "0.9.1", "jaxlib": "0.9.1"})
    store.write_part(rows(["a"]))
    with pytest.raises(AttnlabError) as e:
        store.check_compatible({"schema": {"f": 1}, **V})
    msg = str(e.value)
    assert "jax 0.9.1 (this is 0.10.2)" in msg and "jaxlib 0.9.1 (this is 0.10.2)" in msg
    assert "--force" in msg and "--out" in msg and str(tmp_path) in msg
    assert "last bits" in msg

    store.check_compatible({"schema": {"f": 1}, **V}, force=True)
    m = manifest(tmp_path)
    assert m["jax"] == "0.10.2" and m["jaxlib"] == "0.10.2"
    assert m["history"] == [{"schema": {"f": 1}, "jax": "0.9.1", "jaxlib": "0.9.1"}]
    store.check_compatible({"schema": {"f": 1}, **V})  # passes from now on


def test_a_different_schema_version_raises_naming_the_family(tmp_path):
    store = Store(tmp_path)
    store.check_compatible({"schema": {"f": 1, "g": 1}, **V})
    store.write_part(rows(["a"]))
    with pytest.raises(AttnlabError, match=r"schema version 1 of family 'g' \(this is 2\)") as e:
        store.check_compatible({"schema": {"g": 2}, **V})
    assert "jax" not in str(e.value).split(";")[0]  # only what differs is named
    store.check_compatible({"schema": {"g": 2}, **V}, force=True)
    assert manifest(tmp_path)["schema"] == {"f": 1, "g": 2}


def test_parts_without_a_manifest_are_a_mismatch(tmp_path):
    store = Store(tmp_path)
    store.write_part(rows(["a"]))
    with pytest.raises(AttnlabError, match="--force"):
        store.check_compatible({"schema": {"f": 1}, **V})
    assert not (tmp_path / "store.json").exists()
    store.check_compatible({"schema": {"f": 1}, **V}, force=True)
    m = manifest(tmp_path)
    assert m["schema"] == {"f": 1} and m["jax"] == V["jax"] and len(m["history"]) == 1
    store.check_compatible({"schema": {"f": 1}, **V})


def test_a_corrupt_manifest_is_a_user_error(tmp_path):
    (tmp_path / "store.json").write_text("{not json")
    with pytest.raises(AttnlabError, match="store.json"):
        Store(tmp_path).check_compatible({"schema": {"f": 1}, **V})


def test_provenance():
    p = provenance("vmap", "float32")
    keys = {"attnlab_version", "git_sha", "jax_version", "jaxlib_version", "backend", "strategy", "dtype"}
    assert set(p) == keys
    assert all(isinstance(v, str) and v for v in p.values())
    assert p["strategy"] == "vmap" and p["dtype"] == "float32"
    assert re.fullmatch(r"[0-9a-f]{40}(\+dirty)?", p["git_sha"])  # this checkout
    assert provenance("vmap", "float32")["git_sha"] == p["git_sha"]
    assert versions() == {"jax": p["jax_version"], "jaxlib": p["jaxlib_version"]}


def test_git_sha_is_unknown_without_git(monkeypatch):
    from attnlab import provenance as prov

    monkeypatch.setenv("PATH", "/nonexistent")
    prov.git_sha.cache_clear()
    try:
        assert prov.git_sha() == "unknown"
    finally:
        prov.git_sha.cache_clear()
