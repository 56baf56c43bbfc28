"""The isolation experiment's design: steps, probe order, side-channel rows, a cell and a
uuid probe against scripted requests (no engine)."""

from __future__ import annotations

import asyncio
import random
from types import SimpleNamespace

import pytest

from bench.isolation import cells, side_channel, uuid_probe
from bench.isolation.experiment import (
    IsolationOptions,
    cells_of,
    resolve_samples,
    side_channel_cells,
)
from bench.isolation.probe import prompt
from bench.isolation.side_channel import (
    CROSS_TENANT,
    REFERENCE,
    SEEN,
    UNSEEN,
    add_tests,
    probe_orders,
    summarize,
)
from bench.stats import POWER_TARGET, samples_for_power
from bench.verdicts.boundary import exit_code

STEP_NAMES = ["same-salt-repeat", "cross-salt", "unsalted-repeat", "salted-after-unsalted",
              "salted-then-unsalted", "cross-salt-same-media"]


def test_token_only_path_gets_text_cells_only() -> None:
    got = cells_of(IsolationOptions())
    assert ("generate-tokens", "text") in got
    assert ("generate-tokens", "image") not in got
    assert ("generate-parts", "video") in got


def test_steps() -> None:
    assert [s.name for s in cells.STEPS] == STEP_NAMES
    by_name = {s.name: s for s in cells.STEPS}
    assert by_name["salted-then-unsalted"].salts == ("A", None)
    assert by_name["cross-salt-same-media"].salts == ("A", "B")
    assert by_name["cross-salt-same-media"].diverge


def test_prompt_trailing_text_follows_the_media() -> None:
    parts = prompt("image", "img-1", tag="t", trailing="end")[0]["content"]
    assert [p["type"] for p in parts] == ["text", "image", "text"]
    assert parts[0]["text"].startswith("[t] ") and parts[2]["text"] == "end"
    assert len(prompt("image", "img-1")[0]["content"]) == 2


def test_probe_order_is_randomised_per_sample() -> None:
    orders = probe_orders(20, random.Random(1))
    assert len(orders) == 20
    assert all(sorted(o) == sorted((SEEN, UNSEEN)) for o in orders)
    assert orders.count((SEEN, UNSEEN)) == orders.count((UNSEEN, SEEN)) == 10
    assert orders == probe_orders(20, random.Random(1))  # seeded
    assert orders != probe_orders(20, random.Random(2))
    odd = probe_orders(7, random.Random(3))
    assert {odd.count((SEEN, UNSEEN)), odd.count((UNSEEN, SEEN))} == {3, 4}
    assert len(set(probe_orders(2, random.Random(4)))) == 2


def test_side_channel_rows_are_paired_and_only_cross_tenant_rows_form_the_family() -> None:
    # Every unseen probe 1 ms slower than its seen one, under a drift that swamps it.
    drift = [10.0, 40.0, 20.0, 70.0, 30.0, 60.0]
    drifting = [(d + 1, d) for d in drift]
    rows = [summarize("chat", "image", CROSS_TENANT, drifting),
            summarize("chat", "audio", CROSS_TENANT, [(1.0, 6.0), (4.0, 3.0), (2.0, 5.0),
                                                      (5.0, 2.0), (3.0, 4.0), (6.0, 1.0)]),
            summarize("chat", "video", CROSS_TENANT, [(1.0, 2.0), (None, 3.0)]),
            summarize("chat", "image", REFERENCE, [(d + 5, d) for d in drift] + [(3.0, None)])]
    assert "p_value" not in rows[0] and rows[0]["median_a_ms"] == 36.0  # partial save
    assert rows[3]["pairs_dropped"] == 1 and rows[3]["n_a"] == rows[3]["n_b"] == 6
    add_tests(rows)
    keys = {"path", "modality", "kind", "auc", "ci_low", "ci_high", "n_a", "n_b", "median_a_ms",
            "median_b_ms", "p_value", "p_adjusted", "min_detectable_auc", "finding",
            "in_family", "pairs_dropped"}
    assert all(keys <= set(r) and "distinguishable" not in r for r in rows)
    paired, null, short, control = rows
    # Paired: 1/64 (one-sided, 6 pairs), Holm over the 2 tested cross-tenant rows.
    assert paired["auc"] == 1.0 and paired["p_value"] == pytest.approx(1 / 64)
    assert paired["p_adjusted"] == pytest.approx(2 / 64) and paired["finding"] == "distinguishable"
    assert null["auc"] == pytest.approx(0.5) and null["finding"] == "no evidence"
    assert short["auc"] is None and short["finding"] == "too few samples"
    assert short["median_a_ms"] == 1.0 and (short["n_a"], short["n_b"]) == (1, 1)
    assert short["pairs_dropped"] == 1
    # The positive control is tested alone, outside the family.
    assert (control["in_family"], paired["in_family"]) == (False, True)
    assert control["p_adjusted"] == control["p_value"] == pytest.approx(1 / 64)


def test_default_samples_follow_the_power_target() -> None:
    opts, target = resolve_samples(IsolationOptions())
    tested = len(side_channel_cells(IsolationOptions()))
    assert tested == 9 and target == {**POWER_TARGET, "tests": tested}
    assert opts.samples == samples_for_power(0.8, 0.8, 0.05, tests=9) == 37
    assert resolve_samples(IsolationOptions(samples=8)) == (IsolationOptions(samples=8), None)
    text_only, none = resolve_samples(IsolationOptions(modalities=["text"]))
    assert text_only.samples == 0 and none is None


def test_measure_keeps_each_pair_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """A failed probe drops its pair, never shifts the others: ``ttft_a_ms[i]`` and
    ``ttft_b_ms[i]`` are two adjacent requests of one sample."""
    sent: list[tuple[str, str | None]] = []

    async def exchange(session, path, messages, max_tokens, salt, timeout_s) -> dict:
        media = messages[0]["content"][1]["media"]
        sent.append((media, salt))
        if media == "m4":  # sample 1's unseen probe
            return {"ok": False, "error": "HTTP 500: x"}
        return {"ok": True, "ttft_ms": float(len(sent))}  # the request's position, from 1

    monkeypatch.setattr(side_channel, "exchange", exchange)
    cross, reference = asyncio.run(side_channel.measure(
        None, SimpleNamespace(name="chat"), "image", [f"m{i}" for i in range(9)], 3, 1.0,
        random.Random(0)))
    assert (cross["n_a"], cross["n_b"], cross["pairs_dropped"]) == (2, 2, 1)
    at = {position: media for position, (media, _) in enumerate(sent, 1)}
    for unseen, seen in zip(cross["ttft_a_ms"], cross["ttft_b_ms"]):
        assert abs(unseen - seen) == 1  # sent one after the other
        sample = int(at[int(seen)][1:]) // 3
        assert (at[int(seen)], at[int(unseen)]) == (f"m{3 * sample}", f"m{3 * sample + 1}")
    assert reference["pairs_dropped"] == 0
    assert [hit - miss for miss, hit in zip(reference["ttft_a_ms"], reference["ttft_b_ms"])] \
        == [1.0] * 3
    salt_a = sent[0][1]  # tenant A sends the seen media first, then B probes the pair
    salt_b = {salt for media, salt in sent[1:3]}
    assert sent[0][0] == "m0" and None not in salt_b | {salt_a} and salt_b != {salt_a}
    assert {salt for media, salt in sent if media == "m2"} == {None}


class Script:
    """Scripted ``exchange``: one outcome per call (ok, or an error), recorded."""

    def __init__(self, outcomes: list[int | str]) -> None:
        self.outcomes, self.sent = list(outcomes), []

    async def __call__(self, session, path, messages, max_tokens, salt, timeout_s) -> dict:
        self.sent.append((messages, salt))
        out = self.outcomes.pop(0)
        if isinstance(out, str):
            return {"ok": False, "error": out}
        return {"ok": True, "error": None, "prompt_tokens": 100, "cached_tokens": out,
                "ttft_ms": 1.0}


@pytest.fixture
def no_counters(monkeypatch: pytest.MonkeyPatch) -> None:
    async def scrape(session, base_url) -> dict:
        return {}
    monkeypatch.setattr("bench.measured.counters.settled_scrape", scrape)


def run_cell(script: Script, monkeypatch: pytest.MonkeyPatch) -> dict:
    monkeypatch.setattr(cells, "exchange", script)
    return asyncio.run(cells.run_cell(None, "http://x", SimpleNamespace(name="chat"), "image",
                                      "img-1", 16, 1.0))


def test_a_failed_step_does_not_hide_a_later_leak(monkeypatch, no_counters) -> None:
    # same-salt-repeat's first request fails; cross-salt-same-media's second leaks.
    script = Script(["HTTP 500: x", 0, 0, 0, 96, 0, 0, 0, 0, 0, 32])
    cell = run_cell(script, monkeypatch)
    assert cell["verdict"] == "LEAK" and cell["leaked_tokens"] == 32
    assert cell["reason"] == ("cross-salt-same-media: 32 cached tokens; "
                              "same-salt-repeat/first: HTTP 500: x")
    assert [s["name"] for s in cell["steps"] if "/first" not in s["name"]] == STEP_NAMES[1:]
    assert exit_code({"cells": [cell], "uuid_probe": []}) == 1
    # The last step: salts A then B, the same lead and media, different trailing text.
    (first, salt_1), (second, salt_2) = script.sent[-2:]
    a, b = first[0]["content"], second[0]["content"]
    assert a[:2] == b[:2] and a[2] != b[2] and salt_1 != salt_2 and None not in (salt_1, salt_2)
    # salted-then-unsalted: salt A (the one cross-salt-same-media starts with), then none.
    assert [salt for _, salt in script.sent[-4:-2]] == [salt_1, None]


def test_an_error_alone_is_an_error(monkeypatch, no_counters) -> None:
    cell = run_cell(Script([0, 96, 0, "timeout", 0, 96, 0, 0, 0, 0, 0, 0]), monkeypatch)
    assert (cell["verdict"], cell["reason"]) == ("ERROR", "cross-salt: timeout")
    assert len(cell["steps"]) == 12 and exit_code({"cells": [cell]}) == 2


def run_probe(script: Script, monkeypatch: pytest.MonkeyPatch) -> dict:
    monkeypatch.setattr(uuid_probe, "exchange", script)
    return asyncio.run(uuid_probe.run_uuid_probe(None, "http://x", SimpleNamespace(name="chat"),
                                                 "image", "img-x", "img-y", 16, 1.0))


def test_uuid_probe_verdicts(monkeypatch, no_counters) -> None:
    isolated = {"path": "chat", "modality": "image", "verdict": "ISOLATED"}
    # x (A), y (B, same uuid), y (A, same uuid), y (A, no uuid)
    ok = run_probe(Script([0, 0, 96, 48]), monkeypatch)
    assert (ok["verdict"], ok["leaked_tokens"], ok["reason"]) == ("ISOLATED", 0, None)
    assert "the uuid replaces the content hash" in ok["finding"]  # a finding, not a verdict
    # Both items of one prompt size and no counters: a substitution could not show.
    assert ok["content"] == "ERROR" and "cannot tell" in ok["content_reason"]
    assert exit_code({"cells": [isolated], "uuid_probe": [ok]}) == 2
    assert exit_code({"cells": [isolated], "uuid_probe": [ok]}, fail_on=("kv-cache",)) == 0
    leak = run_probe(Script([0, 32, 96, "HTTP 500: x"]), monkeypatch)
    assert (leak["verdict"], leak["leaked_tokens"]) == ("LEAK", 32)
    assert leak["finding"].startswith("another salt: 32 cached tokens (salt leak)")
    assert leak["reason"] == "y-salt-b-same-uuid: 32 cached tokens; y-salt-a-no-uuid: HTTP 500: x"
    assert exit_code({"cells": [isolated], "uuid_probe": [leak]}, fail_on=("kv-cache",)) == 1
    failed = run_probe(Script(["timeout", 0, 96, 48]), monkeypatch)
    assert (failed["verdict"], failed["leaked_tokens"]) == ("ERROR", 0)
    assert failed["reason"] == "x-salt-a: timeout"
    assert exit_code({"cells": [isolated], "uuid_probe": [failed]}, fail_on=("kv-cache",)) == 2


def test_per_tenant_uuids_never_share_a_key_across_tenants(monkeypatch) -> None:
    """The gateway mitigation: every media item carries a uuid namespaced by a digest of its
    tenant's salt (never the salt), so tenants A and B never send one key; an unsalted
    repeat keeps its key (the positive control still hits)."""
    sent: list[tuple[str, str | None, str | None]] = []

    async def exchange(session, path, messages, max_tokens, salt, timeout_s) -> dict:
        part = messages[0]["content"][1]
        sent.append((part["media"], part.get("uuid"), salt))
        return {"ok": True, "ttft_ms": 1.0}

    monkeypatch.setattr(side_channel, "exchange", exchange)
    asyncio.run(side_channel.measure(None, SimpleNamespace(name="chat"), "image",
                                     [f"m{i}" for i in range(6)], 2, 1.0, random.Random(0),
                                     per_tenant=True))
    keys = {(media, salt): uuid for media, uuid, salt in sent}
    salts = {salt for _, _, salt in sent if salt}
    assert len(salts) == 2 and all(uuid and uuid.startswith("tenant-") for uuid in keys.values())
    assert not any(salt in uuid for uuid in keys.values() for salt in salts)
    seen = [media for media, _, salt in sent if salt][0]  # tenant A's first item
    assert len({uuid for (media, _), uuid in keys.items() if media == seen}) == 2
    unsalted = [uuid for media, uuid, salt in sent if salt is None]
    assert unsalted[0] == unsalted[1] and unsalted[0].startswith("tenant-none-")


def test_per_tenant_uuid_probe_sends_each_tenant_its_own_key(monkeypatch, no_counters) -> None:
    script = Script([0, 0, 96, 48])
    monkeypatch.setattr(uuid_probe, "exchange", script)
    asyncio.run(uuid_probe.run_uuid_probe(None, "http://x", SimpleNamespace(name="chat"),
                                          "image", "img-x", "img-y", 16, 1.0, per_tenant=True))
    uuids = [messages[0]["content"][1]["uuid"] for messages, _ in script.sent]
    x, cross, same, control = uuids
    assert cross != x and same == x and control not in (x, cross)
