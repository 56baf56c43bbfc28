"""The cache-hit oracle on tiny hand-checked specs, and against a brute-force recomputation."""

from __future__ import annotations

import pytest
from wlhelpers import read_media, read_requests

from bench.workload.build import generate

BASE = """
[workload]
requests = {n}
[tenants]
count = 2
salt = "{salt}"
[text]
system_words = 4
user_words = 3
"""


def _gen(make_spec, tmp_path, body: str):
    return read_requests(generate(make_spec(body), out=tmp_path / "wl"))


@pytest.mark.parametrize("salt, second", [("tenant", "none"), ("shared", "full"), ("none", "full")])
def test_cross_tenant_repeat_hits_only_under_one_salt(make_spec, tmp_path, salt, second) -> None:
    reqs = _gen(make_spec, tmp_path, BASE.format(n=4, salt=salt) + """
[repeats]
ratio = 1.0
cross_tenant = 1.0
""")
    first, cross, *later = reqs
    assert first["oracle"] == {"prefix_of": None, "shared_messages": 0, "expect": "none",
                               "reason": "new case: no shared prefix"}
    assert cross["tenant"] != first["tenant"] and cross["messages"] == first["messages"]
    assert cross["oracle"]["prefix_of"] == "r000000"
    assert cross["oracle"]["shared_messages"] == 2
    assert cross["oracle"]["expect"] == second
    for req in later:  # the same prompt again from the second tenant: always a full hit
        assert req["oracle"]["expect"] == "full"
        assert req["oracle"]["prefix_of"] == ("r000001" if second == "none" else "r000000")


def test_turns_extend_the_previous_prompt(make_spec, tmp_path) -> None:
    reqs = _gen(make_spec, tmp_path, BASE.format(n=6, salt="tenant") + """
[sessions]
turns = 3
concurrent = 1
""")
    assert [r["turn"] for r in reqs] == [0, 1, 2, 0, 1, 2]
    for prev, req in zip(reqs, reqs[1:]):
        if req["turn"] == 0:
            assert req["oracle"]["expect"] == "none" and req["case"] != prev["case"]
            continue
        n = len(prev["messages"])
        assert req["messages"][:n] == prev["messages"]
        assert [m["role"] for m in req["messages"][n:]] == ["assistant", "user"]
        assert req["oracle"] == {"prefix_of": prev["id"], "shared_messages": n,
                                 "expect": "partial", "reason": req["oracle"]["reason"]}
        assert req["session"] == prev["session"] and req["case"] == prev["case"]


@pytest.mark.parametrize("scope", ["tenant", "global"])
def test_shared_system_prompt(make_spec, tmp_path, scope) -> None:
    reqs = _gen(make_spec, tmp_path, f"""
[workload]
requests = 12
[tenants]
count = 2
salt = "tenant"
[text]
system_scope = "{scope}"
system_words = 32
""")
    seen: dict[str, str] = {}
    for req in reqs:
        oracle = req["oracle"]
        if req["tenant"] in seen:
            assert oracle["expect"] == "partial" and oracle["shared_messages"] == 1
            assert oracle["prefix_of"] == seen[req["tenant"]]
        elif scope == "global" and seen:  # same system prompt, other salt: no hit
            assert oracle["expect"] == "none" and oracle["shared_messages"] == 1
        else:
            assert oracle == {"prefix_of": None, "shared_messages": 0, "expect": "none",
                              "reason": "new case: no shared prefix"}
        seen.setdefault(req["tenant"], req["id"])


def test_re_encoded_media_breaks_the_prefix(make_spec, tmp_path) -> None:
    reqs = _gen(make_spec, tmp_path, """
[workload]
requests = 3
[repeats]
ratio = 1.0
variant = 1.0
[media.image]
pool = 1
per_request = 1
""")
    assert [p.get("media") for p in reqs[0]["messages"][1]["content"]][1:] == ["img-00000"]
    assert reqs[1]["messages"][1]["content"][1]["media"] == "img-00000-v"
    assert reqs[1]["oracle"]["expect"] == "partial" and reqs[1]["oracle"]["shared_messages"] == 1
    assert reqs[1]["oracle"]["reason"].startswith("re-encoded repeat of r000000")
    assert reqs[2]["oracle"]["expect"] == "full"


def test_cases_start_with_their_own_nonce(smoke_dir) -> None:
    firsts: dict[str, str] = {}
    for req in read_requests(smoke_dir):
        text = req["messages"][0]["content"][0]["text"]
        # The case id leads, so that it falls inside the first KV block.
        assert text.startswith(f"[{req['case']} smoke-")
        assert firsts.setdefault(req["case"], text) == text
    assert len(set(firsts.values())) == len(firsts)


@pytest.mark.parametrize("process, check", [
    ("none", lambda a: all(x is None for x in a)),
    ("constant", lambda a: a == [i * 0.25 for i in range(len(a))]),
    ("poisson", lambda a: a[0] == 0.0 and all(y >= x for x, y in zip(a, a[1:])) and a[-1] > 0),
    ("gamma", lambda a: a[0] == 0.0 and all(y >= x for x, y in zip(a, a[1:])) and a[-1] > 0),
])
def test_arrivals(make_spec, tmp_path, process, check) -> None:
    rate = "" if process == "none" else "rate = 4.0"
    reqs = _gen(make_spec, tmp_path, f"[workload]\nrequests = 20\n[arrival]\nprocess = '{process}'\n{rate}\n")
    assert check([r["arrival_s"] for r in reqs])


@pytest.mark.parametrize("name, n", [("smoke", None), ("mixed-tenants", 150), ("multi-turn", 120)])
def test_oracle_matches_brute_force(tmp_path, name, n) -> None:
    out = generate(name, requests=n, out=tmp_path / name)
    sha = {k: m["sha256"] for k, m in read_media(out).items()}
    key = lambda m: (m["role"], [sha.get(p.get("media"), p.get("text")) for p in m["content"]])  # noqa: E731
    seen: list[tuple[str, str | None, list]] = []
    for req in read_requests(out):
        msgs = [key(m) for m in req["messages"]]
        best = {True: (0, None), False: (0, None)}
        for rid, salt, prev in seen:
            shared = next((i for i, (a, b) in enumerate(zip(msgs, prev)) if a != b),
                          min(len(msgs), len(prev)))
            same = salt == req["salt_ref"]
            if shared > best[same][0]:
                best[same] = (shared, rid)
        if best[True][0]:
            expect = "full" if best[True][0] == len(msgs) else "partial"
            want = (best[True][1], best[True][0], expect)
        else:
            want = (best[False][1], best[False][0], "none")
        o = req["oracle"]
        assert (o["prefix_of"], o["shared_messages"], o["expect"]) == want, req["id"]
        seen.append((req["id"], req["salt_ref"], msgs))
