"""Progress on long work: log lines with the real-time factor off a terminal, a bar on one."""

from __future__ import annotations

import logging

from speechlab.progress import WorkProgress


def test_log_lines_give_fraction_rate_and_time_left(caplog):
    with caplog.at_level(logging.INFO, logger="speechlab.progress"):
        with WorkProgress("decoding x.wav", 10.0, log_every=0.0, bar=False) as p:
            for done in (2.5, 5.0, 10.0):
                p.update(done)
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0].startswith("decoding x.wav: 2.5/10.0 s audio (25%), real-time factor ")
    assert "left" in lines[0] and len(lines) == 3  # 2.5, 5.0, and the final summary
    assert lines[-1].startswith("decoding x.wav: 10.0 s audio in ")


def test_quiet_when_disabled_or_between_log_periods(caplog):
    with caplog.at_level(logging.INFO, logger="speechlab.progress"):
        with WorkProgress("a", 10.0, enabled=False) as p:
            p.update(5.0)
        with WorkProgress("b", 10.0, log_every=3600.0, bar=False) as p:
            p.update(5.0)
    assert [r.getMessage()[:2] for r in caplog.records] == ["b:"]  # the final line only


def test_the_terminal_bar_follows_the_work():
    import io

    from rich.console import Console

    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=120, color_system=None)
    shown = []
    with WorkProgress("decoding x.wav", 10.0, bar=True, console=console) as p:
        for done in (3.0, 6.0, 10.0):
            p.update(done)
            shown.append(screen.getvalue())
    # each update is on the screen as soon as it is made, and not before
    assert "3/10 s audio" in shown[0] and "6/10" not in shown[0]
    assert "6/10 s audio" in shown[1] and "10/10" not in shown[1]
    assert "10/10 s audio" in shown[2]
    assert "decoding x.wav" in shown[0]
