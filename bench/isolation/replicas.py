"""Isolation behind a router: every replica judged on its own, and where the router sends
each tenant.

Direct: the isolation cells (:mod:`bench.isolation.cells`) run on every replica by its own
URL, so that each replica's cache is judged (cross-salt cached tokens must be 0 on all).
Routed: per path x modality, :data:`ROUNDS` fresh prompts go through the router: prime
with salt A, probe with salt B, then with A again, one at a time, each attributed to the
replica that served it. B must get nothing wherever it lands; A again must get the full
hit when it lands on the replica that holds A's prefix, and nothing elsewhere. Counted:
affinity (A again stayed with the prime), misdirected (B sent to the replica holding A's
identical prefix, for a hit the salt forbids) and the load per replica.
"""

from __future__ import annotations

import secrets
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import replace

import aiohttp

from bench import salts
from bench.engine.target import Target
from bench.isolation.cells import run_cell
from bench.isolation.probe import nonce, prompt
from bench.paths import make_paths
from bench.paths.base import PathContext, RequestPath
from bench.run.exchange import exchange
from bench.run.replicas import PerReplica
from bench.verdicts.isolation import ranked
from bench.verdicts.requests import full_hit_tokens
from bench.vocab import ISOLATED

#: Fresh prompts per routed cell: enough to see a round-robin router alternate.
ROUNDS = 4
#: (step, salt label): the routed sequence of each round.
SEQUENCE = (("prime", "A"), ("cross-salt", "B"), ("same-salt", "A"))


def replica_paths(ctx: PathContext, url: str, names: list[str],
                  drop_salt_on: tuple[str, ...]) -> dict[str, RequestPath]:
    """Path objects that send to ``url`` (media index shared with ``ctx``)."""
    return {p.name: p for p in make_paths(names, replace(ctx, base_url=url), drop_salt_on)}


async def direct_cells(session: aiohttp.ClientSession, target: Target, ctx: PathContext,
                       cells: list[tuple[str, str]], drop_salt_on: tuple[str, ...],
                       fresh: Callable[[str], str | None],
                       warm: Callable[[RequestPath, str], Awaitable[None]],
                       tick: Callable[[], None]) -> list[dict]:
    """The isolation cells on every replica but the first (which the experiment ran on
    already), each by its own URL; ``fresh(modality)`` gives new probe media."""
    out = []
    names = sorted({p for p, _ in cells})
    for replica in target.replicas[1:]:
        paths = replica_paths(ctx, replica.url, names, drop_salt_on)
        for name, modality in cells:
            await warm(paths[name], modality)
            cell = await run_cell(session, replica.url, paths[name], modality, fresh(modality),
                                  target.block_size, ctx.timeout_s)
            out.append({**cell, "replica": replica.name})
            tick()
    return out


def judge_round(steps: list[dict], block_size: int) -> None:
    """Each step's rule and whether it held (the steps of one round, in :data:`SEQUENCE`);
    a round with a request no replica claims cannot be judged."""
    if any(s["replica"] is None for s in steps):
        for s in steps:
            s["unattributed"] = True
        return
    prime = steps[0]["replica"]
    for s in steps:
        s["with_prime"] = s is not steps[0] and s["replica"] == prime
        full = s["step"] == "same-salt" and s["with_prime"]
        s["expected"] = full_hit_tokens(s["prompt_tokens"], block_size) if full else 0
        s["leak"], s["under"] = s["cached"] > s["expected"], s["cached"] < s["expected"]


def routed_verdict(steps: list[dict]) -> tuple[str, int, str | None]:
    """(verdict, leaked tokens, reason) of a routed cell, ranked as every verdict
    (:func:`bench.verdicts.isolation.ranked`); a failed or unattributed request is an ERROR."""
    judged = [s for s in steps if "leak" in s]
    leaks = [s for s in judged if s["leak"]]
    failed = [s for s in steps if s.get("error")]
    unknown = [s for s in steps if s.get("unattributed")]
    under = [s for s in judged if s["under"]]
    reason = "; ".join([*(f"{s['step']} on {s['replica']}: {s['cached']} cached tokens "
                          f"(allowed {s['expected']})" for s in leaks),
                        *(f"{s['step']}: {s['error']}" for s in failed),
                        *(f"round {s['round']} {s['step']}: served by an unknown replica"
                          for s in unknown),
                        *(f"{s['step']} on {s['replica']}: {s['cached']}/{s['expected']} "
                          "tokens" for s in under)])
    result = ranked(bool(leaks), bool(failed or unknown), bool(under))
    return (result, sum(s["cached"] - s["expected"] for s in leaks),
            reason if result != ISOLATED else None)


async def routed_cell(servers: PerReplica, path: RequestPath, modality: str,
                      media: Callable[[], str | None], block_size: int,
                      timeout_s: float) -> dict:
    """:data:`ROUNDS` rounds of :data:`SEQUENCE` through the router, judged per replica;
    ``media()`` gives each round its own probe media."""
    steps: list[dict] = []
    for round_ in range(ROUNDS):
        salt_of = {label: secrets.token_hex(16) for label in ("A", "B")}
        messages = prompt(modality, media(), tag=nonce())
        sent = []
        for step, label in SEQUENCE:
            record: dict = {"round": round_, "step": step, "salt": salts.digest(salt_of[label])}
            out = await servers.served(exchange(servers.session, path, messages, 4,
                                                salt_of[label], timeout_s), record)
            if not out["ok"]:
                sent.append({**record, "error": out["error"]})
                break
            sent.append({**record, "prompt_tokens": out["prompt_tokens"],
                         "cached": out["cached_tokens"]})
        else:
            judge_round(sent, block_size)
        steps += sent
    verdict, leaked, reason = routed_verdict(steps)
    judged = [s for s in steps if "with_prime" in s]
    return {"path": path.name, "modality": modality, "verdict": verdict,
            "leaked_tokens": leaked, "reason": reason, "steps": steps,
            "load": dict(Counter(s.get("replica") or "unknown" for s in steps)),
            "affinity": _share(judged, "same-salt"), "misdirected": _share(judged, "cross-salt")}


def _share(steps: list[dict], step: str) -> dict:
    """How many ``step`` requests landed with their round's prime."""
    of = [s for s in steps if s["step"] == step]
    return {"with_prime": sum(s["with_prime"] for s in of), "of": len(of)}


async def replica_experiments(session: aiohttp.ClientSession, target: Target, ctx: PathContext,
                              cells: list[tuple[str, str]], drop_salt_on: tuple[str, ...],
                              fresh: Callable[[str], str | None],
                              warm: Callable[[RequestPath, str], Awaitable[None]],
                              result: dict, tick: Callable[[], None]) -> None:
    """The direct cells of every other replica (into ``result["cells"]``) and the routed
    cells (``result["routed"]``)."""
    result["cells"] += await direct_cells(session, target, ctx, cells, drop_salt_on, fresh,
                                          warm, tick)
    names = sorted({p for p, _ in cells})
    async with aiohttp.ClientSession(headers=target.headers) as routed_session:
        servers = PerReplica(target, routed_session, serial=True)
        paths = replica_paths(ctx, target.base_url, names, drop_salt_on)
        for name, modality in cells:
            result["routed"].append(await routed_cell(
                servers, paths[name], modality, lambda m=modality: fresh(m), target.block_size,
                ctx.timeout_s))
            tick()


def replica_steps(target: Target, cells: int) -> int:
    """Progress ticks of :func:`replica_experiments`."""
    return cells * len(target.replicas) if target.replicas else 0
