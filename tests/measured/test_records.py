import logging

import pytest

from bench.errors import BenchError
from bench.measured.records import RecordWriter, read_records

RECORDS = [{"ok": True, "ttft_ms": 1.5, "itl_ms": [1.0, 2.0]}, {"ok": False, "error": "HTTP 400: bad\nline"}]


def test_round_trip_and_append(tmp_path):
    path = tmp_path / "run" / "records.jsonl"
    with RecordWriter(path) as writer:
        for record in RECORDS:
            writer.write(record)
    with RecordWriter(path) as writer:
        writer.write({"ok": True})
    assert read_records(path) == [*RECORDS, {"ok": True}]
    assert path.read_text().count("\n") == 3


def test_record_is_on_disk_before_close(tmp_path):
    path = tmp_path / "records.jsonl"
    with RecordWriter(path) as writer:
        writer.write(RECORDS[0])
        assert read_records(path) == [RECORDS[0]]


def test_truncated_last_line_skipped_with_warning(tmp_path, caplog):
    path = tmp_path / "records.jsonl"
    path.write_text('{"ok": true}\n{"ok": fal')
    with caplog.at_level(logging.WARNING):
        assert read_records(path) == [{"ok": True}]
    assert "records.jsonl:2" in caplog.text


def test_writer_cuts_partial_line_before_appending(tmp_path):
    path = tmp_path / "records.jsonl"
    path.write_text('{"ok": true}\n{"ok": fal')
    with RecordWriter(path) as writer:
        writer.write({"ok": False})
    assert read_records(path) == [{"ok": True}, {"ok": False}]


def test_corrupt_middle_line_raises_naming_file_and_line(tmp_path):
    path = tmp_path / "records.jsonl"
    path.write_text('{"ok": true}\n{"ok": tru\n{"ok": false}\n')
    with pytest.raises(BenchError, match=r"records\.jsonl:2: corrupt record"):
        read_records(path)


def test_corrupt_complete_last_line_raises(tmp_path):
    path = tmp_path / "records.jsonl"
    path.write_text('{"ok": true}\n[1, 2]\n')
    with pytest.raises(BenchError, match=r"records\.jsonl:2: record is not a JSON object"):
        read_records(path)


def test_missing_file_raises_bench_error(tmp_path):
    with pytest.raises(BenchError, match="nope.jsonl"):
        read_records(tmp_path / "nope.jsonl")


def test_batched_writes_reach_the_file_within_their_delay_and_on_exit(tmp_path) -> None:
    import asyncio

    path = tmp_path / "records.jsonl"

    async def go() -> tuple[int, int, int]:
        with RecordWriter(path, max_delay_s=0.05) as writer:
            for i in range(100):
                writer.write({"i": i})
            right_away = path.read_text().count("\n")
            await asyncio.sleep(0.1)
            after_delay = path.read_text().count("\n")
            writer.write({"i": 100})
        return right_away, after_delay, path.read_text().count("\n")

    assert asyncio.run(go()) == (0, 100, 101)
    assert [r["i"] for r in read_records(path)] == list(range(101))
