"""Determinism, manifest reading and validation, output directories and the CLI commands."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from bench.commands import generate as generate_cmd
from bench.commands import inspect as inspect_cmd
from bench.errors import BenchError
from bench.workload import load_workload, manifest
from bench.workload.build import generate
from bench.workload.manifest import WORKLOAD_SCHEMA, iter_lines

ALL_MEDIA = """
[workload]
requests = 16
seed = 3
[tenants]
count = 2
salt = ["tenant", "none"]
[sessions]
turns = [1, 3]
[repeats]
ratio = 0.4
cross_tenant = 0.5
variant = 0.5
[arrival]
process = "gamma"
rate = 3.0
[media.image]
pool = 2
variants = 0.5
width = [32, 80]
height = [32, 80]
[media.audio]
pool = 2
subtype = "FLOAT"
duration_s = [0.2, 0.4]
[media.video]
pool = 1
width = 32
height = 32
frames = 4
"""


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def test_same_spec_and_seed_give_identical_bytes(make_spec, tmp_path) -> None:
    spec = make_spec(ALL_MEDIA)
    a, b = _files(generate(spec, out=tmp_path / "a")), _files(generate(spec, out=tmp_path / "b"))
    assert a == b
    assert {"workload.json", "requests.jsonl", "media.jsonl"} <= set(a)
    assert sum(k.startswith("media/") for k in a) >= 5
    c = _files(generate(spec, seed=4, out=tmp_path / "c"))
    assert c["requests.jsonl"] != a["requests.jsonl"]


def test_metadata(smoke_dir) -> None:
    meta = load_workload(smoke_dir).metadata
    assert (meta["kind"], meta["schema_version"]) == (manifest.KIND, manifest.VERSION)
    assert meta["spec"]["name"] == "smoke"
    assert len(meta["spec"]["sha256"]) == 64 and meta["seed"] == 0
    assert {"pillow", "libsndfile", "av", "libavcodec"} <= set(meta["libraries"])
    assert sum(meta["counts"]["expect"].values()) == meta["counts"]["requests"] == 12
    assert [t["salt_ref"] for t in meta["tenants"]] == ["t0", "t1"]


def test_load_workload_streams_valid_requests(smoke_dir) -> None:
    wl = load_workload(smoke_dir / "requests.jsonl")
    reqs = list(wl.requests())
    assert len(reqs) == 12 and list(wl) == reqs
    for req in reqs:
        assert list(req) == list(WORKLOAD_SCHEMA["request"])
        for part in (p for m in req["messages"] for p in m["content"] if "media" in p):
            assert wl.media[part["media"]].path.is_absolute()
            assert wl.media[part["media"]].modality == part["type"]


@pytest.mark.parametrize("mutate, problem", [
    (lambda r: r.pop("oracle"), "oracle: missing"),
    (lambda r: r.update(turn="0"), "turn: wrong type str"),
    (lambda r: r.update(secret="x"), "secret: unknown key"),
    (lambda r: r["oracle"].update(expect="maybe"), "oracle.expect: must be one of"),
    (lambda r: r["messages"][0].update(role="robot"), "messages[0].role"),
])
def test_bad_request_line_names_file_and_line(smoke_dir, tmp_path, mutate, problem) -> None:
    lines = (smoke_dir / "requests.jsonl").read_text().splitlines()
    bad = json.loads(lines[2])
    mutate(bad)
    file = tmp_path / "requests.jsonl"
    file.write_text("\n".join(lines[:2] + [json.dumps(bad)]) + "\n")
    with pytest.raises(BenchError) as err:
        list(iter_lines(file, "request"))
    assert str(err.value).startswith(f"{file}:3: {problem}")


def test_schema_version_is_checked(smoke_dir, tmp_path) -> None:
    copy = tmp_path / "old"
    copy.mkdir()
    meta = json.loads((smoke_dir / "workload.json").read_text())
    (copy / "workload.json").write_text(json.dumps({**meta, "schema_version": 0}))
    with pytest.raises(BenchError, match="schema_version 0"):
        load_workload(copy)
    with pytest.raises(BenchError, match="not a workload"):
        load_workload(tmp_path)


def test_output_directories(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("SALTBENCH_CACHE", str(tmp_path / "cache"))
    out = generate("smoke", requests=3)
    assert out.parent == tmp_path / "cache" / "workloads"
    assert out.name.startswith("smoke-") and out.name.endswith("-s0-n3")
    stamp = (out / "workload.json").stat().st_mtime_ns
    assert generate("smoke", requests=3) == out  # already there: kept
    assert (out / "workload.json").stat().st_mtime_ns == stamp
    generate("smoke", requests=3, force=True)
    assert not list(out.parent.glob(".*tmp*"))
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with pytest.raises(BenchError, match="not a workload; refusing"):
        generate("smoke", out=tmp_path / "mine")
    with pytest.raises(BenchError, match="--requests"):
        generate("smoke", requests=0)


def test_cli_generate_and_inspect(tmp_path, capsys) -> None:
    parser = argparse.ArgumentParser()
    generate_cmd.add_arguments(parser)
    args = parser.parse_args(["smoke", "--seed", "1", "--requests", "5", "--out", str(tmp_path / "w")])
    assert generate_cmd.run(args) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "w")
    parser = argparse.ArgumentParser()
    inspect_cmd.add_arguments(parser)
    assert inspect_cmd.run(parser.parse_args([str(tmp_path / "w")])) == 0
    shown = capsys.readouterr().out
    for words in ("workload smoke (seed 1)", "expected hit fraction", "image", "salt ref"):
        assert words in shown
