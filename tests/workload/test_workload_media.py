"""Media decode with standard readers to the requested shape; variants keep the content."""

from __future__ import annotations

import time

import av
import numpy as np
import pytest
import soundfile as sf
from PIL import Image

from bench.media import audio, file_digest, image, video
from bench.workload import load_workload
from bench.workload.build import generate


def _video_frames(path) -> list[np.ndarray]:
    with av.open(str(path)) as c:
        return [f.to_ndarray(format="rgb24") for f in c.decode(video=0)]


def test_smoke_media_decode_to_their_params(smoke_dir) -> None:
    media = load_workload(smoke_dir).media
    assert {m.modality for m in media.values()} == {"image", "audio", "video"}
    for m in media.values():
        assert m.path.is_file() and file_digest(m.path) == (m.sha256, m.bytes)
        p = m.params
        if m.modality == "image":
            with Image.open(m.path) as img:
                assert img.size == (p["width"], p["height"])
                assert img.format == {"png": "PNG", "jpeg": "JPEG"}[p["format"]]
        elif m.modality == "audio":
            info = sf.info(str(m.path))
            assert (info.samplerate, info.channels, info.subtype) == (
                p["sample_rate"], p["channels"], p["subtype"])
            assert info.frames == p["frames"] and abs(info.duration - p["duration_s"]) < 1e-6
        else:
            frames = _video_frames(m.path)
            assert len(frames) == p["frames"]
            assert frames[0].shape == (p["height"], p["width"], 3)


@pytest.mark.parametrize("kind", image.KINDS)
def test_image_kinds(tmp_path, kind) -> None:
    m = image.write(tmp_path / "x", kind=kind, width=71, height=33, seed=5, fmt="png", quality=90)
    with Image.open(m.path) as img:
        assert img.size == (71, 33) and img.mode == "RGB"


def test_variants_share_content_not_bytes(make_spec, tmp_path) -> None:
    out = generate(make_spec("""
[workload]
requests = 6
[repeats]
ratio = 0.8
variant = 1.0
[media.image]
pool = 1
[media.audio]
pool = 1
[media.video]
pool = 1
frames = 4
"""), out=tmp_path / "wl")
    media = load_workload(out).media
    for prefix in ("img", "aud", "vid"):
        base, variant = media[f"{prefix}-00000"], media[f"{prefix}-00000-v"]
        assert variant.variant and not base.variant
        assert base.content_id == variant.content_id and base.sha256 != variant.sha256
    img = [np.asarray(Image.open(media[i].path), dtype=float) for i in ("img-00000", "img-00000-v")]
    assert img[0].shape == img[1].shape  # same picture, one copy JPEG-compressed
    assert np.corrcoef(img[0].ravel(), img[1].ravel())[0, 1] > 0.8
    pcm = [sf.read(media[i].path, dtype="int16")[0] for i in ("aud-00000", "aud-00000-v")]
    assert np.array_equal(pcm[0], pcm[1])
    vids = [_video_frames(media[i].path) for i in ("vid-00000", "vid-00000-v")]
    assert len(vids[0]) == len(vids[1]) == 4


def test_audio_kinds_and_subtypes_decode_alike(tmp_path) -> None:
    for kind in audio.KINDS:
        decoded = []
        for subtype in audio.SUBTYPES:
            m = audio.write(tmp_path / f"{kind}-{subtype}", kind=kind, sample_rate=8000,
                            channels=2, duration_s=0.25, seed=1, subtype=subtype)
            data, rate = sf.read(m.path, dtype="int16")
            assert rate == 8000 and data.shape == (2000, 2)
            decoded.append(data)
        assert all(np.array_equal(decoded[0], d) for d in decoded[1:])


def test_float_wav_has_no_timestamp(tmp_path) -> None:
    """libsndfile's PEAK chunk stores the wall clock; it must be switched off."""
    args = dict(kind="tone", sample_rate=8000, channels=1, duration_s=0.1, seed=2, subtype="FLOAT")
    first = audio.write(tmp_path / "a", **args)
    time.sleep(1.05)
    second = audio.write(tmp_path / "b", **args)
    assert first.path.read_bytes() == second.path.read_bytes()


@pytest.mark.parametrize("kind", video.KINDS)
def test_video_kinds_move(tmp_path, kind) -> None:
    m = video.write(tmp_path / "v", kind=kind, width=48, height=32, fps=10, frame_count=6,
                    seed=3, crf=20)
    frames = _video_frames(m.path)
    assert len(frames) == 6 and frames[0].shape == (32, 48, 3)
    assert any(not np.array_equal(frames[0], f) for f in frames[1:])
    with av.open(str(m.path)) as c:
        assert c.streams.video[0].codec_context.name == "h264"
