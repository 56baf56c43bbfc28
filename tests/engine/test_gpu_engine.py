"""What a CUDA engine's metadata reads from its torch, on the CPU engine: no CUDA."""

from bench.engine.gpu import torch_cuda
from bench.engine.provision import provision
from bench.engine.spec import default_engine_spec


def test_a_cpu_build_of_torch_has_no_cuda_version() -> None:
    env = provision(default_engine_spec())
    assert torch_cuda(env.python) is None
