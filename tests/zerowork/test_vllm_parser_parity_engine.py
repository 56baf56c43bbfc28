"""The zero-work server's streams parse identically in saltbench's client and in vLLM's own
benchmark client (``vllm/benchmarks/lib/endpoint_request_func.py``).

saltbench builds each request with its path and sends it with ``post_stream``; the same
body goes to vLLM's request function, run by the engine environment's interpreter
(``vllm_bench_client.py``; vLLM is not importable from ``.venv``). Both must agree on
success, ITL gaps (token events - 1), output text, prompt and output tokens, and both must
have a TTFT. The server spaces its token chunks (``itl_ms``), so the streams arrive in
many reads and both parsers join events across them.

Chat goes through ``async_request_openai_chat_completions``. vLLM 0.32 has no request
function for ``/inference/v1/generate``; ``async_request_openai_completions`` (``vllm
bench serve --backend vllm``) reads a stream of the same outer shape (``choices``, then a
usage chunk) with the same parser, so the generate streams go through it, at the
generate URL with a query string that satisfies its check that the URL ends in
``completions`` (the server routes on the path alone).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
from pathlib import Path

import aiohttp

from bench.client.connections import streaming
from bench.client.stream import StreamResult, post_stream
from bench.engine.provision import provision
from bench.engine.spec import default_engine_spec
from bench.paths import PATHS
from bench.paths.base import PathContext, carries_tokens, is_token_event
from bench.paths.media_urls import MediaUrls
from bench.workload import generate, load_workload
from bench.zerowork import ZeroWorkServer
from bench.zerowork.sse import OUTPUT_TEXT

CLIENT = Path(__file__).with_name("vllm_bench_client.py")
SYSTEM = "You answer questions about pictures in one sentence. " * 8
#: name: (path, with an image, max_tokens, salt)
CASES = {
    "chat-text": ("chat", False, 16, None),
    "chat-image-salted": ("chat", True, 8, "parity-salt"),
    "chat-one-token": ("chat", False, 1, None),
    "generate-tokens": ("generate-tokens", False, 16, None),
    "generate-parts-image": ("generate-parts", True, 4, "parity-salt"),
    "generate-features-image": ("generate-features", True, 4, None),
}


def engine_python() -> Path:
    """The engine environment's interpreter (vLLM's benchmark client runs only there),
    provisioned first if needed (an engine test: the background provisioning's)."""
    return provision(default_engine_spec()).python


def messages(media_id: str | None) -> list[dict]:
    user = [{"type": "text", "text": "What is in this picture?"}]
    if media_id is not None:
        user.append({"type": "image", "media": media_id})
    return [{"role": "system", "content": [{"type": "text", "text": SYSTEM}]},
            {"role": "user", "content": user}]


async def saltbench_side(ctx: PathContext, media_id: str) -> list[tuple[str, dict, StreamResult, str]]:
    """Per case: the URL and body saltbench built, its ``post_stream`` result and the output
    text of the events it decoded (``is_token_event`` sees each one; chat deltas, generate
    ``text``, as vLLM reads them)."""
    out = []
    async with aiohttp.ClientSession() as session, streaming():
        for path_name, with_image, max_tokens, salt in CASES.values():
            path = PATHS[path_name](ctx)
            url, body = await path.build(session, messages(media_id if with_image else None),
                                         max_tokens, salt)
            texts: list[str] = []

            def token_event(event: dict, texts: list[str] = texts) -> int:
                if choices := event.get("choices"):
                    texts.append((choices[0].get("delta") or {}).get("content")
                                 or choices[0].get("text") or "")
                return is_token_event(event)

            result = await post_stream(url, body, is_token_event=token_event,
                                       carries_tokens=carries_tokens, timeout_s=30)
            out.append((url, body, result, "".join(texts)))
    return out


def vllm_side(python: Path, job: list[dict], tmp_path: Path) -> list[dict]:
    """vLLM's request functions on ``job``, in the engine interpreter (killed if it hangs)."""
    job_file, out_file = tmp_path / "job.json", tmp_path / "out.json"
    job_file.write_text(json.dumps(job))
    proc = subprocess.Popen([str(python), str(CLIENT), str(job_file), str(out_file)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, output.decode(errors="replace")[-3000:]
    return json.loads(out_file.read_text())


def test_zero_work_streams_parse_identically_in_saltbench_and_vllm(tmp_path: Path) -> None:
    python = engine_python()
    workload = load_workload(generate("image", requests=1, out=tmp_path / "wl"))
    media_id = next(iter(workload.media))
    with ZeroWorkServer(itl_ms=1.0) as server:
        ctx = PathContext(server.url, "zerowork", workload.media, MediaUrls("data"))
        ours = asyncio.run(saltbench_side(ctx, media_id))
        job = [{"function": "chat" if path_name == "chat" else "completions",
                "api_url": url if path_name == "chat" else f"{url}?via=completions",
                "model": "zerowork", "output_len": max_tokens, "body": body}
               for (url, body, _, _), (path_name, _, max_tokens, _) in zip(ours, CASES.values())]
        theirs = vllm_side(python, job, tmp_path)

    saltbench_view, vllm_view = {}, {}
    for name, (_, _, result, text), got in zip(CASES, ours, theirs):
        usage = result.usage or {}
        saltbench_view[name] = {
            "success": result.ok, "itl_gaps": len(result.itl_s), "text": text,
            "prompt_tokens": usage.get("prompt_tokens"),
            "output_tokens": usage.get("completion_tokens"),
            "ttft": result.ttft_s is not None and result.ttft_s > 0}
        vllm_view[name] = {
            "success": got["success"], "itl_gaps": len(got["itl"]), "text": got["generated_text"],
            "prompt_tokens": got["prompt_len"], "output_tokens": got["output_tokens"],
            "ttft": got["ttft"] > 0}
        assert result.ok and got["success"], (name, result.error, got["error"][-1000:])
    assert saltbench_view == vllm_view

    for name, (path_name, _, max_tokens, _) in CASES.items():
        view = saltbench_view[name]
        chat = path_name == "chat"
        # Chat's role-only first chunk is a token event for both: one more than generate.
        assert view["itl_gaps"] == (max_tokens if chat else max_tokens - 1), name
        assert view["text"] == (OUTPUT_TEXT * max_tokens if chat else ""), name
        assert view["output_tokens"] == max_tokens and view["prompt_tokens"] > 0, name
