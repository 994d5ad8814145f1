"""``speechlab serve``'s HTTP and WebSocket interface, against a real server (conftest.py): the
models it lists, transcripts equal to ``speechlab transcribe --json`` over HTTP and WebSocket,
malformed frames and files, uploads past the limit (refused before they are read, the server
keeping its memory), streams past the limit, the loopback default and the other panels'
endpoints."""

from __future__ import annotations

import http.client
import json
import math
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from serve_support import (MAX_STREAMS, collect, http_json, post, send_frames, stream_file,
                           ws_connect)

MB = 1 << 20


def test_models_lists_every_loaded_model_with_its_kind(server):
    status, models = http_json(server.url + "/api/models")
    assert status == 200
    by_name = {m["name"]: m for m in models}
    assert by_name["hf"] == {"name": "hf", "kind": "asr", "streaming": False, "languages": ["en"]}
    assert by_name["tones"] == {"name": "tones", "kind": "asr", "streaming": True,
                                "languages": ["en", "hi"]}
    assert by_name["salad"]["kind"] == "tts" and by_name["w2v"]["kind"] == "ssl"
    assert by_name["ctc"] == {"name": "ctc", "kind": "asr", "streaming": False,
                              "languages": ["en"]}
    _, caps = http_json(server.url + "/api/capabilities")
    assert caps["tones"] == ["transcribe", "stream", "early_stop", "hotwords"]
    assert caps["ctc"] == ["transcribe", "hotwords", "lattice"]
    assert caps["hf"] == ["transcribe", "attention"]
    assert caps["w2v"] == ["attention"] and caps["salad"] == ["synthesize"]


@pytest.mark.parametrize("name", ["hf", "tones", "ctc"])
def test_http_and_websocket_transcripts_equal_the_command_line(server, cli_json, name):
    expected = cli_json(name, server.wav)
    assert expected["text"]  # the planted or sharpened models say something
    status, got = post(server.url, f"/api/transcribe?model={name}&filename={server.wav}",
                       server.wav.read_bytes())
    assert status == 200 and got == expected
    # one-second frames: a step decodes at most a second, so the partial results fall at the
    # same audio times however fast the server is (smaller frames coalesce as timing allows)
    messages = stream_file(server, name, server.wav, chunk_seconds=1.0)
    final = messages[-1]
    assert final["type"] == "final"
    assert {k: v for k, v in final.items() if k not in ("segment", "start", "end", "last")} \
        == {"type": "final", **{k: v for k, v in expected.items() if k != "file"}}
    assert final["segment"] == 0 and final["last"] is True and final["start"] == 0.0
    partials = [m for m in messages if m["type"] == "partial"]
    if name == "tones":  # streams: partial results came before the end, growing to the text
        assert [p["seconds"] for p in partials] == pytest.approx([1, 2, 3, 3.72], abs=0.01)
        texts = [p["text"] for p in partials]
        assert all(b.startswith(a) for a, b in zip(texts, texts[1:]))
        assert any(0 < len(t) < len("the fox") for t in texts) and texts[-1] == "the fox"
        assert set(partials[0]["lid"]) == {"en", "hi"}
        # each partial's words, with their confidences as the search stood then
        for p in partials:
            assert " ".join(w["word"] for w in p["words"]) == p["text"]
            assert all(0 < w["confidence"] <= 1 and w["end"] <= p["seconds"] for w in p["words"])
        assert [w["word"] for w in partials[-1]["words"]] == [w["word"] for w in final["words"]]
    else:  # decodes at 'done'
        assert partials == []


def test_a_stream_with_pauses_gets_a_final_per_utterance_and_goes_on(server, tmp_path):
    from speechlab.testing.tone_rnnt import tone_samples

    wav = tmp_path / "three.wav"
    audio = np.concatenate([tone_samples("the fox", lead=0.6, tail=1.6)] * 3)
    sf.write(wav, audio, 16000)
    messages = stream_file(server, "tones", wav, query="&silence_after_text=1.0")
    finals = [m for m in messages if m["type"] == "final"]
    assert [(m["segment"], m["text"], m["last"]) for m in finals] == [
        (0, "the fox", False), (1, "the fox", False), (2, "the fox", False), (3, "", True)]
    assert all(m["language"] == "en" and m["words"] for m in finals[:3])
    assert [m["start"] for m in finals[1:]] == [m["end"] for m in finals[:-1]]
    # the partials after an utterance's final speak of the next one
    order = [(m["type"], m["segment"]) for m in messages]
    assert order.index(("final", 0)) < order.index(("partial", 1))
    partials_of_two = [m["text"] for m in messages if m["type"] == "partial" and m["segment"] == 2]
    assert partials_of_two and all("the fox the" not in t for t in partials_of_two)
    for query in ("&silence_after_text=0", "&max_utterance=x"):
        ws = ws_connect(server, f"/ws/asr?model=tones{query}")
        got, code = collect(ws)
        assert [m["type"] for m in got] == ["error"] and code == 1008
        assert ("silence_after_text" if "silence" in query else "max_utterance") in got[0]["message"]


def test_a_whole_recording_model_streams_utterances_cut_by_voice(server, tmp_path):
    from speechlab.testing.audio import have_espeak, spoken_with_pauses

    if not have_espeak():
        pytest.skip("needs espeak-ng")
    audio, spans = spoken_with_pauses()
    wav = tmp_path / "talk.wav"
    sf.write(wav, audio, 16000)
    messages = stream_file(server, "hf", wav, query="&vad=1&silence_after_text=0.8")
    finals = [m for m in messages if m["type"] == "final"]
    assert [(m["segment"], m["last"]) for m in finals] == [(0, False), (1, False), (2, False),
                                                            (3, True)]
    for m, (a, b) in zip(finals, spans):
        assert m["start"] <= a and b <= m["end"]
    # without vad=1 it decodes the whole recording at 'done', as before
    messages = stream_file(server, "hf", wav)
    assert [m["type"] for m in messages] == ["final"] and messages[0]["end"] == \
        pytest.approx(len(audio) / 16000, abs=0.01)
    ws = ws_connect(server, "/ws/asr?model=tones&vad=1")
    got, code = collect(ws)
    assert code == 1008 and "streams and ends its utterances itself" in got[0]["message"]


def test_a_server_adds_no_words_unless_told(model_paths):
    import speechlab
    from speechlab.serve.runtime import Runtime, ServeLimits
    from speechlab.serve.models import ServedModel

    for allowed in (False, True):
        ctc = speechlab.load(model_paths["ctc"])
        assert ctc.new_words  # the library's default: a hotword it lacks is added
        runtime = Runtime({"ctc": ServedModel("ctc", ctc)}, ServeLimits(new_words=allowed))
        try:
            assert ctc.new_words is allowed
        finally:
            runtime.close()


def test_loading_does_what_a_whole_recording_models_first_request_would(model_paths):
    """The first person to speak to a CTC-topology model does not wait for its lattice arrays:
    ``load_models`` builds them (the page asks such a model for its words' confidences)."""
    from speechlab.serve.models import load_models

    served = load_models([model_paths["ctc"], model_paths["tones"]], say=lambda line: None)
    ctc, tones = served.values()
    assert ctc.model._lattice_graph is not None
    assert tones.streaming  # a streaming model is left as it loaded: nothing to do early


def test_a_language_allowlist_limits_the_decoders_over_http_and_websocket(server):
    messages = stream_file(server, "tones", server.wav, query="&languages=hi")
    assert all(m["active"] == ["hi"] for m in messages if m["type"] == "partial")
    assert messages[-1]["language"] == "hi" and messages[-1]["lid"] == {"hi": 1.0}
    status, got = post(server.url, "/api/transcribe?model=tones&languages=en",
                       server.wav.read_bytes())
    assert status == 200 and got["text"] == "the fox" and got["lid"] == {"en": 1.0}
    status, got = post(server.url, "/api/transcribe?model=tones&languages=fr",
                       server.wav.read_bytes())
    assert status == 400 and "languages 'fr'" in got["error"]
    status, got = post(server.url, "/api/transcribe?model=hf&languages=en",
                       server.wav.read_bytes())
    assert status == 400 and "LID head" in got["error"]


def test_hotwords_over_http_and_websocket(server):
    import speechlab

    ctc = speechlab.load(server.paths["ctc"])
    word = ctc.graph.lang.words[0]
    status, got = post(server.url, f"/api/transcribe?model=ctc&hotwords={word}&hotword_score=50",
                       server.wav.read_bytes())
    assert status == 200 and word in got["text"].split()  # a boost that large always wins
    final = stream_file(server, "tones", server.wav, query="&hotwords=the%20fox")[-1]
    assert final["text"] == "the fox"
    for query, message in (("model=hf&hotwords=go", "does not take hotwords"),
                           ("model=ctc&hotwords=zebra", "adding words is off here"),
                           ("model=ctc&hotwords=go&hotword_score=0", "hotword_score must be")):
        status, got = post(server.url, f"/api/transcribe?{query}", server.wav.read_bytes())
        assert status == 400 and message in got["error"], got


def test_nbest_and_confidence_over_http_and_websocket(server):
    status, got = post(server.url, "/api/transcribe?model=tones&nbest=2", server.wav.read_bytes())
    assert status == 200 and got["nbest"][0]["text"] == got["text"] == "the fox"
    assert all(0 < w["confidence"] <= 1 for w in got["words"])
    final = stream_file(server, "tones", server.wav, query="&nbest=2")[-1]
    assert final["nbest"][0]["text"] == final["text"] == "the fox"
    status, got = post(server.url, "/api/transcribe?model=ctc&nbest=x", server.wav.read_bytes())
    assert status == 400 and "nbest must be" in got["error"]


def test_a_request_chooses_among_the_models_searches(server):
    want = post(server.url, "/api/transcribe?model=tones", server.wav.read_bytes())[1]["text"]
    for method in ("greedy", "modified_beam"):
        status, got = post(server.url, f"/api/transcribe?model=tones&method={method}",
                           server.wav.read_bytes())
        assert status == 200 and got["text"] == want == "the fox"
        assert stream_file(server, "tones", server.wav, query=f"&method={method}")[-1]["text"] \
            == want
    status, got = post(server.url, "/api/transcribe?model=tones&method=exhaustive",
                       server.wav.read_bytes())
    assert status == 400 and "method 'exhaustive'" in got["error"], got


def test_early_stopping_switches_decoders_off_and_bad_settings_are_refused(server):
    messages = stream_file(server, "tones", server.wav, query="&tau=10&s_th=1")
    partials = [m for m in messages if m["type"] == "partial"]
    assert partials[0]["active"] == ["en", "hi"] or partials[0]["seconds"] > 0.3
    assert partials[-1]["active"] == ["en"] and messages[-1]["text"] == "the fox"
    assert stream_file(server, "tones", server.wav)[-2]["active"] == ["en", "hi"]
    for query, message in (("&tau=x", "tau must be a number"), ("&s_th=-1", "s_th must be"),
                           ("&language=fr", "language 'fr'")):
        ws = ws_connect(server, f"/ws/asr?model=tones{query}")
        got, code = collect(ws)
        assert [m["type"] for m in got] == ["error"] and message in got[0]["message"]
        assert code == 1008
    ws = ws_connect(server, "/ws/asr?model=hf&tau=5")
    got, code = collect(ws)
    assert "early stopping" in got[0]["message"] and code == 1008


def test_malformed_frames_get_errors_and_the_stream_goes_on(server):
    audio, _ = sf.read(server.wav, dtype="float32")
    ws = ws_connect(server, "/ws/asr?model=tones")
    half = len(audio) // 2
    ws.send(audio[:half].astype("<f4").tobytes())
    for bad in (b"abc", b"", np.array([np.nan, 1], "<f4").tobytes(), "hello", "{}",
                np.array([1e30, -1e30], "<f4").tobytes()):
        ws.send(bad)
    ws.send(audio[half:].astype("<f4").tobytes())
    ws.send("done")
    send_frames(ws, [audio[:100].astype("<f4").tobytes()])  # after done: an error, or closed
    got, code = collect(ws)
    errors = [m["message"] for m in got if m["type"] == "error"]
    assert any("multiple of 4 bytes" in e for e in errors)
    assert any("empty audio frame" in e for e in errors)
    assert any("NaN" in e for e in errors)
    assert any("samples reach 1e+30 in magnitude" in e for e in errors)
    assert any("unknown text frame 'hello'" in e for e in errors)
    assert got[-1]["type"] == "final" and got[-1]["text"] == "the fox" and code == 1000
    # a model that is not there, or not a recognizer: an error, and the socket closes
    for query, message in (("model=nope", "no model named 'nope'"), ("model=salad", "not a speech"),
                           ("", "say which model")):
        got, code = collect(ws_connect(server, f"/ws/asr?{query}"))
        assert message in got[0]["message"] and code in (1008,)
    # 'done' with no audio for a model that reads whole recordings
    ws = ws_connect(server, "/ws/asr?model=hf")
    ws.send("done")
    got, _ = collect(ws)
    assert got[-1]["type"] == "error" and "no audio" in got[-1]["message"]
    assert http_json(server.url + "/api/models")[0] == 200


def test_bad_files_get_one_clear_error_naming_the_upload(server, tmp_path):
    nan = tmp_path / "nan.wav"
    sf.write(nan, np.full(1600, np.nan, np.float32), 16000, subtype="FLOAT")
    for body, name, message in ((b"RIFF nothing", "bad.wav", "bad.wav"),
                                (nan.read_bytes(), "nan.wav", "non-finite"),
                                (b"", "empty.wav", "no body")):
        for path in ("/api/transcribe?model=hf", "/api/attention?model=w2v",
                     "/api/lattice?model=ctc"):
            status, got = post(server.url, f"{path}&filename={name}", body)
            assert status == 400 and message in got["error"], (path, got)
            assert "speechlab-serve-" not in got["error"]  # never the server's own paths
    status, got = post(server.url, "/api/transcribe?model=nope", b"x")
    assert status == 404 and "no model named 'nope'" in got["error"]
    status, got = post(server.url, "/api/transcribe?model=salad", b"x")
    assert status == 400 and "not a speech recognizer" in got["error"]
    status, got = post(server.url, "/api/lattice?model=hf", server.wav.read_bytes())
    assert status == 400 and "CTC-topology" in got["error"]


def _peak_rss_reset() -> None:
    Path("/proc/self/clear_refs").write_text("5")


def _status_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise KeyError(field)


def test_a_300_mb_upload_is_refused_early_and_the_server_keeps_serving(server):
    host, port = server.url.removeprefix("http://").split(":")
    # Content-Length says 300 MB: refused before any of it is read.
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    conn.putrequest("POST", "/api/transcribe?model=hf")
    conn.putheader("Content-Length", str(300 * MB))
    conn.endheaders()
    conn.send(b"RIFF" + bytes(1020))
    response = conn.getresponse()
    assert response.status == 413 and "100 MB" in json.loads(response.read())["error"]
    conn.close()
    # Chunked, with no length: refused once it passes 100 MB, spooled to disk until then.
    try:
        _peak_rss_reset()
        before = _status_mb("VmRSS")
    except OSError:
        before = None
    block = bytes(MB)
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    conn.putrequest("POST", "/api/transcribe?model=hf")
    conn.putheader("Transfer-Encoding", "chunked")
    conn.endheaders()
    sent = 0
    try:
        for _ in range(300):
            conn.send(b"%x\r\n%s\r\n" % (len(block), block))
            sent += len(block)
    except (BrokenPipeError, ConnectionResetError):
        pass  # the server answered and closed: the rest is never read
    response = conn.getresponse()
    assert response.status == 413
    conn.close()
    assert sent < 300 * MB
    if before is not None:  # the server (this process) never held the upload in memory
        assert _status_mb("VmHWM") - before < 64
    assert http_json(server.url + "/api/models")[0] == 200
    status, got = post(server.url, "/api/transcribe?model=tones", server.wav.read_bytes())
    assert status == 200 and got["text"] == "the fox"


def test_streams_past_the_limit_are_told_the_server_is_busy(server):
    open_ = [ws_connect(server, "/ws/asr?model=tones") for _ in range(MAX_STREAMS)]
    for ws in open_:  # each holds its slot once it has answered a frame
        ws.send(np.zeros(1600, "<f4").tobytes())
        assert json.loads(ws.recv(timeout=10))["type"] == "partial"
    got, code = collect(ws_connect(server, "/ws/asr?model=tones"))
    assert got[0]["type"] == "error" and got[0]["message"].startswith("busy") and code == 1013
    open_[0].close()
    messages = stream_file(server, "tones", server.wav)  # a slot is free again
    assert messages[-1]["text"] == "the fox"
    for ws in open_[1:]:
        ws.close()


def test_the_default_host_is_loopback_and_other_hosts_or_sites_are_refused(server):
    from speechlab.cli import build_parser
    from speechlab.serve.commands import is_loopback

    args = build_parser().parse_args(["serve"])
    assert args.host == "127.0.0.1" and args.port == 8000 and is_loopback(args.host)
    assert is_loopback("::1") and is_loopback("localhost") and not is_loopback("0.0.0.0")
    for headers in ({"Host": "attacker.example"}, {"Origin": "http://attacker.example"}):
        request = urllib.request.Request(server.url + "/api/models", headers=headers)
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(request, timeout=10)
        assert e.value.code == 403
    same = urllib.request.Request(server.url + "/api/models", headers={"Origin": server.url})
    assert urllib.request.urlopen(same, timeout=10).status == 200
    with pytest.raises(Exception):
        ws_connect(server, "/ws/asr?model=tones", origin="http://attacker.example").recv(timeout=5)


def test_synthesis_gives_a_wav_and_the_panel_its_f0_and_spectrogram(server):
    import io

    status, body = post(server.url, "/api/synthesize?model=salad",
                        json.dumps({"text": "Hello world."}).encode(), raw=True)
    assert status == 200 and body[:4] == b"RIFF"
    wav, rate = sf.read(io.BytesIO(body))
    assert rate == 16000 and len(wav) > 1600 and np.isfinite(wav).all()
    status, out = post(server.url, "/api/speech?model=salad",
                       json.dumps({"text": "Hello world."}).encode())
    assert status == 200 and out["seconds"] == pytest.approx(len(wav) / 16000, abs=0.01)
    assert out["f0"]["frame_seconds"] == pytest.approx(0.005) and max(out["f0"]["hz"]) > 50
    assert len(out["spectrogram"]["db"][0]) == 128 and out["spectrogram"]["max_hz"] == 8000
    for body, message in ((b"not json", "must be JSON"), (b'{"text": 3}', 'string "text"'),
                          (b'{"text": "  "}', "empty"),
                          (json.dumps({"text": "a" * 3000}).encode(), "at most 2000")):
        status, got = post(server.url, "/api/synthesize?model=salad", body)
        assert status == 400 and message in got["error"]
    status, got = post(server.url, "/api/synthesize?model=hf", b'{"text": "hi"}')
    assert status == 400 and "not a speech synthesizer" in got["error"]


def test_attention_maps_and_lattice_hypotheses_of_one_upload(server, cli_json):
    status, out = post(server.url, "/api/attention?model=w2v", server.wav.read_bytes())
    assert status == 200 and [b["block"] for b in out["blocks"]] == [1, 2, 3, 4, 5, 6]
    labels = {b["block"]: b["label"] for b in out["blocks"]}
    assert labels[2] == labels[3] == "diagonal"  # the local blocks attend to neighbours
    assert all(len(b["map"]) == 64 and len(b["map"][0]) == 64 for b in out["blocks"])
    status, out = post(server.url, "/api/lattice?model=ctc", server.wav.read_bytes())
    assert status == 200
    assert out["text"] == cli_json("ctc", server.wav)["text"]  # Viterbi as transcribe decodes
    shares = [h["share"] for h in out["hypotheses"]]
    assert shares[:5] == sorted(shares[:5], reverse=True) and sum(shares[:5]) <= 1 + 1e-9
    viterbi = [h for h in out["hypotheses"] if h["viterbi"]]
    assert len(viterbi) == 1 and viterbi[0]["text"] == out["text"]
    assert math.isclose(viterbi[0]["share"], out["bhp"], rel_tol=1e-9)
    assert 0 < out["bpp"] <= 1 and out["lattice"]["states"] > 0


def test_audio_is_bounded_by_its_rate_and_duration_before_it_is_decoded(server, tmp_path):
    """A header that declares 1 Hz or 3 MHz is refused before any resampling; an upload or a
    stream longer than --max-audio-s is refused (bytes do not bound it)."""
    import io
    from dataclasses import replace

    for rate in (1, 3_000_000):
        buf = io.BytesIO()
        sf.write(buf, np.zeros(4000, np.float32), rate, format="WAV", subtype="FLOAT")
        status, out = post(server.url, "/api/transcribe?model=tones&filename=r.wav",
                           buf.getvalue())
        assert status == 400 and f"sample rate {rate} Hz" in out["error"], out
    runtime = server.app.state.runtime
    limits = runtime.limits
    runtime.limits = replace(limits, max_audio_seconds=1.0)
    try:
        status, out = post(server.url, "/api/transcribe?model=tones&filename=long.wav",
                           server.wav.read_bytes())
        assert status == 400 and "this server transcribes at most 1 s at once" in out["error"]
        audio, _ = sf.read(server.wav, dtype="float32")
        assert len(audio) > 16000
        ws = ws_connect(server, "/ws/asr?model=tones")
        frames = [audio[i:i + 3200].astype("<f4").tobytes() for i in range(0, len(audio), 3200)]
        assert send_frames(ws, frames) > 16000 // 3200  # refused only once past 1 s
        got, code = collect(ws)
        assert "the stream passed 1 s" in got[-1]["message"] and code == 1008, got[-1:]
    finally:
        runtime.limits = limits


def test_malformed_synthesis_json_is_a_400_not_a_traceback(server):
    for body, message in ((b"[" * 10000 + b"]" * 10000, "not nested deeper"),
                          (json.dumps({"text": "caf\ud800"}).encode(), "not valid Unicode"),
                          (b"\xff\xfe", "must be JSON"), (b'{"text": 3}', 'a string "text"')):
        status, out = post(server.url, "/api/synthesize?model=salad", body)
        assert status == 400 and message in out["error"], (body[:20], out)


def test_an_idle_stream_is_closed_and_gives_its_slot_back(server):
    """Streams that send nothing (no audio, no 'done') are closed after --idle-s, so idle
    clients cannot hold every slot; a stream that keeps sending is not."""
    from dataclasses import replace

    runtime = server.app.state.runtime
    limits = runtime.limits
    runtime.limits = replace(limits, idle_seconds=1.0)
    try:
        idle = [ws_connect(server, "/ws/asr?model=tones") for _ in range(MAX_STREAMS)]
        for ws in idle:
            got, code = collect(ws, timeout=20)
            assert "no audio for 1 s" in got[-1]["message"] and code == 1013, got[-1:]
        # the server gives a slot back once its stream's tasks have ended: wait for that
        # (bounded), then a new stream is served
        import time

        deadline = time.monotonic() + 30
        while runtime.streams.used and time.monotonic() < deadline:
            time.sleep(0.05)
        assert runtime.streams.used == 0
        messages = stream_file(server, "tones", server.wav)  # a slot is free again
        assert messages[-1]["type"] == "final" and messages[-1]["text"] == "the fox"
    finally:
        runtime.limits = limits


def test_a_stalled_or_trickling_body_is_dropped_with_408(server):
    """An upload that stops sending, or sends a few bytes a second, cannot hold a request
    slot: 408 and the connection closed."""
    import socket
    from dataclasses import replace

    runtime = server.app.state.runtime
    limits = runtime.limits
    runtime.limits = replace(limits, body_idle_seconds=1.0)
    host, port = server.url.removeprefix("http://").split(":")
    try:
        for path in ("/api/transcribe?model=tones", "/api/synthesize?model=salad"):
            s = socket.create_connection((host, int(port)), timeout=30)
            s.sendall(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 10000\r\n"
                      "\r\nRIFF".encode())
            answer = b""
            while chunk := s.recv(4096):  # the whole answer: the server closes after it
                answer += chunk
            answer = answer.decode("latin-1")
            s.close()
            assert answer.startswith("HTTP/1.1 408") and "no byte of the body" in answer, answer
        assert runtime.jobs.used == 0 and runtime.receiving.used == 0
    finally:
        runtime.limits = limits


def test_connections_that_never_complete_their_headers_are_closed(server, monkeypatch):
    """Connections that send nothing, or trickle header lines, are closed at the header
    deadline (speechlab.serve.protocol), so they cannot fill the connection cap; a request
    that completes its headers in time is served."""
    import socket

    from speechlab.serve.protocol import HeaderDeadlineProtocol

    monkeypatch.setattr(HeaderDeadlineProtocol, "header_seconds", 1.0)
    host, port = server.url.removeprefix("http://").split(":")
    silent = [socket.create_connection((host, int(port)), timeout=30) for _ in range(3)]
    trickle = socket.create_connection((host, int(port)), timeout=30)
    trickle.sendall(b"GET /api/models HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # never the blank line
    assert http_json(server.url + "/api/models")[0] == 200  # others are served meanwhile
    for s in [*silent, trickle]:
        assert s.recv(1024) == b""  # closed by the server (recv times out after 30 s if not)
        s.close()
    ok = socket.create_connection((host, int(port)), timeout=30)
    ok.sendall(b"GET /api/models HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    answer = b""
    while chunk := ok.recv(4096):  # Connection: close: the server closes after its answer
        answer += chunk
    assert answer.startswith(b"HTTP/1.1 200")
    ok.close()


def test_a_client_leaving_mid_upload_logs_no_traceback(server, caplog):
    import logging
    import socket
    import time

    runtime = server.app.state.runtime
    host, port = server.url.removeprefix("http://").split(":")
    with caplog.at_level(logging.WARNING):
        for path in ("/api/transcribe?model=tones", "/api/synthesize?model=salad"):
            s = socket.create_connection((host, int(port)), timeout=30)
            s.sendall(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100000\r\n"
                      "\r\nRIFF....".encode())
            time.sleep(0.2)  # let the server start reading (the outcome does not wait on it)
            s.close()
        deadline = time.monotonic() + 30
        while (runtime.jobs.used or runtime.receiving.used) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert http_json(server.url + "/api/models")[0] == 200
    assert runtime.jobs.used == 0 and runtime.receiving.used == 0
    assert not [r for r in caplog.records if r.exc_info], [r.getMessage() for r in caplog.records]


def test_trickling_uploads_do_not_take_the_inference_slots(server):
    """Uploads still being received hold slots of their own: while more of them trickle than
    there are inference slots, a normal upload is transcribed."""
    import socket

    runtime = server.app.state.runtime
    host, port = server.url.removeprefix("http://").split(":")
    slow = []
    for _ in range(runtime.limits.max_jobs + 2):
        s = socket.create_connection((host, int(port)), timeout=30)
        s.sendall(b"POST /api/transcribe?model=tones HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                  b"Content-Length: 100000\r\n\r\nRIFF")
        slow.append(s)
    try:
        status, out = post(server.url, "/api/transcribe?model=tones&filename=fox.wav",
                           server.wav.read_bytes())
        assert status == 200 and out["text"] == "the fox", out
    finally:
        for s in slow:
            s.close()


def test_a_model_whose_first_request_fails_is_said_and_the_others_served(model_paths,
                                                                           monkeypatch):
    from speechlab.serve.models import ServedModel, load_models

    def broken(self):
        if self.name == "ctc":
            raise RuntimeError("no lattice today")

    monkeypatch.setattr(ServedModel, "warm", broken)
    said: list[str] = []
    served = load_models([model_paths["ctc"], model_paths["tones"]], say=said.append)
    assert len(served) == 2  # named by their directories
    assert "first request failed (RuntimeError: no lattice today)" in said[0]
    assert "failed" not in said[1]
