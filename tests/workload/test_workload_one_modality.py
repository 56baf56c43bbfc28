"""``one_modality``: every new case carries media of exactly one modality."""

from __future__ import annotations

from bench.workload import generate, load_workload


def test_one_modality_per_request(make_spec, tmp_path) -> None:
    spec = make_spec("""
        [workload]
        requests = 40
        one_modality = true
        [media.image]
        pool = 2
        per_request = [0, 2]
        width = 32
        height = 32
        [media.audio]
        pool = 2
        per_request = 1
        duration_s = 0.2
    """)
    wl = load_workload(generate(spec, out=tmp_path / "wl"))
    seen = set()
    for req in wl.requests():
        assert len(req["modalities"]) == 1, req["id"]
        seen.add(req["modalities"][0])
    assert seen == {"image", "audio"}
