"""vllm-router pieces that need no running server: its help, command line and decision log,
the replica options, ports, and how a response names its replica."""

from __future__ import annotations

from pathlib import Path

import pytest
from multidict import CIMultiDict

from bench.engine.replicas import check_replica_args, distinct_ports
from bench.engine.router import KV_AWARE, RouterConfig, kv_decisions, policies_in_help
from bench.engine.target import Replica, Target
from bench.errors import BenchError
from bench.options import target_args
from bench.run.replicas import ADDRESS_HEADER, URL_HEADER, PerReplica, servers_delta

HELP = """usage: vllm-router [-h] [--host HOST]
  --policy {random,round_robin,cache_aware,kv_aware,power_of_two}
                        Load balancing policy to use.
"""
LOG = ('\x1b[2m2026-12-03\x1b[0m DEBUG vllm_router_rs::policies::kv_aware: KV prefix decision '
       '\x1b[3moutcome\x1b[0m\x1b[2m=\x1b[0m"cache_salt" worker="http://127.0.0.1:1"\n'
       'DEBUG KV prefix decision outcome="unverified_identity" worker="http://127.0.0.1:2"\n'
       'DEBUG KV prefix decision outcome="cache_salt" worker="http://127.0.0.1:2"\n')


def test_policies_are_read_from_the_help() -> None:
    assert policies_in_help(HELP) == ["random", "round_robin", "cache_aware", "kv_aware",
                                      "power_of_two"]
    assert policies_in_help("no policy here") == []


def test_kv_aware_gets_each_replicas_event_source() -> None:
    config = RouterConfig(["http://127.0.0.1:1", "http://127.0.0.1:2"], KV_AWARE,
                          kv_events={"http://127.0.0.1:1": "tcp://127.0.0.1:5557"}, kv_block_size=32,
                          kv_model="m", metrics_port=9)
    flags = config.flags(8000)
    assert flags[flags.index("--worker-urls") + 1:flags.index("--policy")] == [
        "http://127.0.0.1:1", "http://127.0.0.1:2"]
    assert "http://127.0.0.1:1=tcp://127.0.0.1:5557" in flags
    assert flags[flags.index("--kv-event-block-size") + 1] == "32"
    plain = RouterConfig(["http://127.0.0.1:1"], "round_robin", metrics_port=9).flags(8000)
    assert "--kv-event-source" not in plain and plain[plain.index("--prometheus-port") + 1] == "9"


def test_kv_decisions_are_counted_from_the_router_log(tmp_path: Path) -> None:
    log = tmp_path / "router.log"
    log.write_text(LOG)
    assert kv_decisions(log) == {"cache_salt": 2, "unverified_identity": 1}
    assert kv_decisions(tmp_path / "missing.log") == {}


@pytest.mark.parametrize("overrides, message", [
    ({"replica_url": ["http://r0"]}, "--replica-url needs --server-url"),
    ({"router": "round_robin"}, "it needs --replicas"),
    ({"replicas": 2, "server_url": "http://router"}, "drop --server-url"),
    ({"replicas": 2, "port": 8000}, "--port"),
    ({"replicas": 2, "server_url": "http://x", "replica_url": ["http://r0"]}, "choose one"),
])
def test_replica_options_that_cannot_go_together(overrides: dict, message: str) -> None:
    with pytest.raises(BenchError, match=message):
        check_replica_args(target_args(**overrides))


def test_distinct_ports() -> None:
    ports = distinct_ports(5)
    assert len(set(ports)) == 5


def _per_replica() -> PerReplica:
    target = Target("http://127.0.0.1:9", "m", 32, None, {}, replicas=(
        Replica("r0", "http://127.0.0.1:1001", True), Replica("r1", "http://127.0.0.1:1002", True)))
    return PerReplica(target, session=None, serial=False)  # type: ignore[arg-type]


def test_a_response_names_its_replica_by_address_or_url() -> None:
    servers = _per_replica()
    by_address = CIMultiDict({ADDRESS_HEADER: "127.0.0.1:1002"})
    by_url = CIMultiDict({URL_HEADER: "http://127.0.0.1:1001/"})
    assert servers._from_headers([by_address]) == "r1"
    assert servers._from_headers([by_url]) == "r0"
    # generate-features renders first (through the router, anywhere): the last one counts
    assert servers._from_headers([by_url, by_address]) == "r1"
    assert servers._from_headers([CIMultiDict({ADDRESS_HEADER: "10.0.0.1:1"})]) is None


def test_replica_deltas_are_kept_and_summed() -> None:
    before = {"r0": {"q": 1.0}, "r1": {"q": 5.0}}
    after = {"r0": {"q": 4.0, "h": 2.0}, "r1": {"q": 6.0}}
    total, each = servers_delta(before, after)
    assert total == {"q": 4.0, "h": 2.0}
    assert each == {"r0": {"q": 3.0, "h": 2.0}, "r1": {"q": 1.0}}
    assert _per_replica().delta(before, after) == (total, {"attribution": "unknown",
                                                           "counters": each})

