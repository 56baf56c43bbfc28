"""Stepping transformers down while vLLM's video loader lookup fails (no engine, fake pip)."""

from __future__ import annotations

from bench.engine.cpu_repairs import MAX_TRANSFORMERS_STEPS, older_transformers
from bench.errors import BenchError

FAULT = {"status": "error", "error_type": "TypeError", "error": "TypeError: unhashable type: 'dict'"}


def _probe(transformers: str, video: dict) -> dict:
    return {"versions": {"transformers": transformers}, "declared_transformers": ">=5.5.3",
            "video_loader": video}


def test_steps_down_one_minor_release_until_the_lookup_works() -> None:
    installs: list[list[str]] = []
    probes = iter([_probe("5.23.0", FAULT), _probe("5.22.2", {"status": "ok"})])
    probe, done = older_transformers(_probe("5.24.0", FAULT), lambda a, w: installs.append(a),
                                     lambda: next(probes))
    assert installs == [["install", "transformers>=5.5.3,<5.24"],
                        ["install", "transformers>=5.5.3,<5.23"]]
    assert probe["versions"]["transformers"] == "5.22.2"
    assert done == ["transformers 5.24.0 -> 5.22.2: vLLM's video loader lookup failed "
                    "(TypeError: unhashable type: 'dict'); fixed"]


def test_nothing_to_do_when_the_lookup_works_or_fails_otherwise() -> None:
    def never(*_: object) -> None:
        raise AssertionError("pip must not run")

    for video in ({"status": "ok"}, {"status": "error", "error_type": "OSError", "error": "x"}):
        probe = _probe("5.24.0", video)
        assert older_transformers(probe, never, never) == (probe, [])


def test_stops_when_the_vllm_accepts_nothing_older() -> None:
    def pip(args: list[str], what: str) -> None:
        if args[-1].endswith("<5.23"):
            raise BenchError("ResolutionImpossible")

    probe, done = older_transformers(_probe("5.24.0", FAULT), pip, lambda: _probe("5.23.0", FAULT))
    assert probe["versions"]["transformers"] == "5.23.0" and done[0].endswith("still failing")


def test_gives_up_after_a_bounded_number_of_steps() -> None:
    installs: list[list[str]] = []
    older_transformers(_probe("5.24.0", FAULT), lambda a, w: installs.append(a),
                       lambda: _probe(f"5.{24 - len(installs)}.0", FAULT))
    assert len(installs) == MAX_TRANSFORMERS_STEPS


def test_probe_script_reports_no_lookup_without_vllm() -> None:
    import importlib.util

    from bench.engine.provision import script

    spec = importlib.util.spec_from_file_location("probe_env", script("probe_env.py"))
    probe_env = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(probe_env)
    if importlib.util.find_spec("vllm") is None:  # the suite's own venv has no engine
        assert probe_env.video_loader()["status"] == "missing"
        assert probe_env.declared_transformers() is None
