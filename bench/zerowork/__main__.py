"""``python -m bench.zerowork --port P``: serve the zero-work target until SIGINT or SIGTERM."""

from __future__ import annotations

import argparse

from bench.zerowork.app import DEFAULT_MODEL, Settings, serve


def _at_least(kind: type, minimum: float):
    def parse(text: str):
        value = kind(text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {text}")
        return value
    return parse


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.zerowork", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--model", default=DEFAULT_MODEL, help="served model name")
    parser.add_argument("--block-size", type=_at_least(int, 1), default=32,
                        help="prefix-cache block size in tokens (default: 32)")
    parser.add_argument("--itl-ms", type=_at_least(float, 0), default=0.0,
                        help="delay between token chunks after the first (default: 0)")
    parser.add_argument("--output-tokens", type=_at_least(int, 1),
                        help="tokens per reply (default: each request's max_tokens)")
    parser.add_argument("--max-model-len", type=_at_least(int, 1), default=8192)
    parser.add_argument("--prefill-ms", type=_at_least(float, 0), default=0.0,
                        help="time a request holds a slot before its first token (default: 0)")
    parser.add_argument("--slots", type=_at_least(int, 1), default=1,
                        help="requests in prefill at once (default: 1)")
    args = parser.parse_args(argv)
    serve(Settings(model=args.model, block_size=args.block_size, itl_ms=args.itl_ms,
                   output_tokens=args.output_tokens, max_model_len=args.max_model_len,
                   prefill_ms=args.prefill_ms, slots=args.slots),
          host=args.host, port=args.port)


if __name__ == "__main__":
    main()
