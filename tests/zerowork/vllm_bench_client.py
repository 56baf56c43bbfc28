"""Runs in the ENGINE environment (not .venv): sends requests with vLLM's own benchmark client.

Usage: ``python vllm_bench_client.py JOB.json OUT.json``. ``JOB.json`` is a list of
``{"function": "chat" | "completions", "api_url", "model", "output_len", "body"}``;
``body`` is the request body saltbench sends, passed as ``extra_body`` so that vLLM's
payload is saltbench's body plus vLLM's own keys. ``OUT.json`` gets, per request, the
fields of vLLM's ``RequestFuncOutput`` that the parity test compares.
"""

import asyncio
import json
import sys

import aiohttp
from vllm.benchmarks.lib.endpoint_request_func import (
    RequestFuncInput,
    async_request_openai_chat_completions,
    async_request_openai_completions,
)

FUNCTIONS = {"chat": async_request_openai_chat_completions,
             "completions": async_request_openai_completions}


async def run(job: list[dict]) -> list[dict]:
    out = []
    async with aiohttp.ClientSession() as session:
        for req in job:
            body = req["body"]
            given = RequestFuncInput(
                prompt="", api_url=req["api_url"], prompt_len=0, output_len=req["output_len"],
                model=req["model"], ignore_eos=True, extra_body=body,
                chat_messages=body.get("messages"))
            got = await FUNCTIONS[req["function"]](given, session)
            out.append({"success": got.success, "error": got.error, "ttft": got.ttft,
                        "itl": got.itl, "latency": got.latency,
                        "generated_text": got.generated_text, "prompt_len": got.prompt_len,
                        "output_tokens": got.output_tokens})
    return out


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        requests = json.load(f)
    with open(sys.argv[2], "w") as f:
        json.dump(asyncio.run(run(requests)), f)
