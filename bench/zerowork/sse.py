"""Response bodies as vLLM's chat and generate servers write them (compact JSON).

Field order and presence follow vLLM's pydantic models: ``exclude_unset`` chat chunks
(``serving_chat``), ``exclude_none`` usage chunks, and the generate stream of
``token_in_token_out/serving.py``.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass

DONE = b"data: [DONE]\n\n"
#: What every generated token is: one word of text, one token id.
OUTPUT_TEXT, OUTPUT_TOKEN_ID = " zero", 7


def _json(value: object) -> str:
    return json.dumps(value, separators=(",", ":"))


def _event(data: str) -> bytes:
    return f"data: {data}\n\n".encode()


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    media_tokens: dict[str, int] | None = None  # chat only: vLLM's multimodal_tokens

    def body(self) -> dict:
        details: dict = {"cached_tokens": self.cached_tokens}
        if self.media_tokens:
            details["multimodal_tokens"] = self.media_tokens
        return {"prompt_tokens": self.prompt_tokens,
                "total_tokens": self.prompt_tokens + self.completion_tokens,
                "completion_tokens": self.completion_tokens, "prompt_tokens_details": details}


class ChatStream:
    """The SSE events of one streamed chat completion."""

    def __init__(self, model_json: str) -> None:
        self.head = (f'{{"id":"chatcmpl-{uuid.uuid4().hex}","object":"chat.completion.chunk",'
                     f'"created":{int(time.time())},"model":{model_json},"choices":')

    def opening(self) -> bytes:
        """The role chunk, sent with the first token."""
        return _event(self.head + '[{"index":0,"delta":{"role":"assistant","content":""},'
                      '"logprobs":null,"finish_reason":null}],"prompt_token_ids":null,'
                      '"prompt_text":null}')

    def token(self, last: bool) -> bytes:
        end = '"finish_reason":"length","stop_reason":null' if last else '"finish_reason":null'
        return _event(self.head + f'[{{"index":0,"delta":{{"content":{_json(OUTPUT_TEXT)}}},'
                                  f'"logprobs":null,{end},"token_ids":null}}]}}')

    def usage(self, usage: Usage) -> bytes:
        return _event(self.head + f'[],"usage":{_json(usage.body())}}}')


class GenerateStream:
    """The SSE events of one streamed ``/inference/v1/generate`` (``output_mode=tokens``)."""

    def __init__(self, request_id: str) -> None:
        self.head = f'{{"request_id":{_json(request_id)},'

    def opening(self) -> bytes:
        """Nothing: generate has no role chunk."""
        return b""

    def token(self, last: bool) -> bytes:
        reason = '"length"' if last else "null"
        return _event(self.head + '"usage":null,"output_mode":"tokens","choices":[{"index":0,'
                      f'"finish_reason":{reason},"stop_reason":null,"token_ids":[{OUTPUT_TOKEN_ID}],'
                      '"routed_experts":null,"sampling_mask":null,"weight_versions":null,'
                      '"logprobs":null}]}')

    def usage(self, usage: Usage) -> bytes:
        return _event(self.head + f'"usage":{_json(usage.body())},"output_mode":"tokens",'
                      '"choices":[]}')


def chat_response(model: str, n_tokens: int, usage: Usage) -> dict:
    """A non-streamed chat completion."""
    return {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion",
            "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant",
                                                 "content": OUTPUT_TEXT * n_tokens,
                                                 "tool_calls": []},
                         "logprobs": None, "finish_reason": "length", "stop_reason": None,
                         "token_ids": None}],
            "service_tier": None, "system_fingerprint": None, "usage": usage.body(),
            "prompt_logprobs": None, "prompt_token_ids": None, "kv_transfer_params": None}


def generate_response(request_id: str, model: str, n_tokens: int, usage: Usage) -> dict:
    """A non-streamed generate response."""
    return {"request_id": request_id, "model": model, "created": int(time.time()),
            "usage": usage.body(), "output_mode": "tokens",
            "choices": [{"index": 0, "finish_reason": "length", "stop_reason": None,
                         "token_ids": [OUTPUT_TOKEN_ID] * n_tokens, "logprobs": None}]}
