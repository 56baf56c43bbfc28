"""Peer benchmark clients (vllm bench serve, AIPerf, GuideLLM, inference-perf): their
environments (:mod:`bench.peers.provision`) and one driver each (:mod:`bench.peers.base`)."""

from bench.peers.aiperf import AIPerf
from bench.peers.guidellm import GuideLLM
from bench.peers.inference_perf import InferencePerf
from bench.peers.vllm_bench import VllmBench

DRIVERS = {d.name: d for d in (VllmBench, AIPerf, GuideLLM, InferencePerf)}
