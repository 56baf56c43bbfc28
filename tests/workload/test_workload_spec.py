"""Spec validation: every shipped dataset loads; bad input names the file and key path."""

from __future__ import annotations

import pytest

from bench.errors import BenchError
from bench.workload import spec as wspec

SHIPPED = ("smoke", "image", "audio", "video", "mixed-tenants", "multi-turn")


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_datasets_load(name: str) -> None:
    ws = wspec.load(name)
    assert ws.name == name and ws.requests > 0 and len(ws.sha256) == 64


def test_datasets_dir_is_not_a_package() -> None:
    assert not (wspec.DATASETS_DIR / "__init__.py").exists()


def test_smoke_covers_all_modalities() -> None:
    assert set(wspec.load("smoke").media) == {"image", "audio", "video"}


BAD = [
    ("[workload]\nrequests = 3\ncolour = 1\n", "[workload].colour", "unknown key"),
    ("[workload]\nrequests = 3\n[media.image]\nwidth = -3\n", "[media.image].width",
     "must be a positive integer, got -3"),
    ("[workload]\nrequests = 'many'\n", "[workload].requests", "must be a positive integer"),
    ("[workload]\nrequests = 0\n", "[workload].requests", "got 0"),
    ("[workload]\nrequests = true\n", "[workload].requests", "got True"),
    ("[workload]\n", "[workload].requests", "is required"),
    ("[workload]\nrequets = 3\n", "[workload].requests",
     "is required (is 'requets' a misspelling of it?)"),
    ("[workload]\nrequests = 3\nmax_token = 3\n", "[workload].max_token",
     "unknown key; did you mean 'max_tokens'?"),
    ("[workload]\nrequests = 3\n[tenants]\ncount = 2\nsalt = 'secret'\n", "[tenants].salt",
     "must be one of"),
    ("[workload]\nrequests = 3\n[tenants]\ncount = 2\nsalt = ['none']\n", "[tenants].salt",
     "one per tenant"),
    ("[workload]\nrequests = 3\n[repeats]\nratio = 1.5\n", "[repeats].ratio", "in [0.0, 1.0]"),
    ("[workload]\nrequests = 3\n[media.video]\nwidth = 65\n", "[media.video].width", "even"),
    ("[workload]\nrequests = 3\n[media.image]\nheight = [300, 100]\n", "[media.image].height",
     "min <= max"),
    ("[workload]\nrequests = 3\n[media.video]\nframes = 8\nduration_s = 1.0\n",
     "[media.video].frames", "not both"),
    ("[workload]\nrequests = 3\n[media.audio]\nsubtype = 'MP3'\n", "[media.audio].subtype",
     "must be one of"),
    ("[workload]\nrequests = 3\n[media.image]\nkinds = []\n", "[media.image].kinds", "non-empty"),
    ("[workload]\nrequests = 3\n[media.smell]\npool = 1\n", "[media].smell", "unknown key"),
    ("[workload]\nrequests = 3\n[extras]\n", "[extras]", "unknown table"),
    ("[workload]\nrequests = 3\n[arrival]\nprocess = 'poisson'\n", "[arrival].rate", "required"),
    ("[workload]\nrequests = 3\n[text]\nsystem_scope = 'global'\nsystem_words = 4\n",
     "[text].system_words", ">= 32"),
    ("workload = 3\n", "[workload]", "must be a table"),
]


@pytest.mark.parametrize("body, where, words", BAD, ids=[where for _, where, _ in BAD])
def test_bad_specs_name_file_and_key(make_spec, body: str, where: str, words: str) -> None:
    path = make_spec(body, "bad")
    with pytest.raises(BenchError) as err:
        wspec.load(path)
    message = str(err.value)
    assert message.startswith(f"{path}: {where}"), message
    assert words in message, message


def test_invalid_toml_names_file(make_spec) -> None:
    path = make_spec("[workload\n", "broken")
    with pytest.raises(BenchError, match="broken.toml: not valid TOML"):
        wspec.load(path)


def test_unknown_dataset_name_lists_known() -> None:
    with pytest.raises(BenchError, match="known: .*smoke"):
        wspec.load("no-such-dataset")
