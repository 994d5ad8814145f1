"""The dependency scheduler: planted dependency graphs, failures and dead workers."""

from __future__ import annotations

import os
import time

import pytest

from speechlab.errors import ConfigError, SpeechlabError
from speechlab.experiment.scheduler import Work, WorkerDied, check_dependencies, run_jobs


def _wait_for_marker_or_mark(payload):
    """`long` finishes only once `after_seed` has run (or after 60 s): no wall-clock race."""
    key, marker = payload
    if key == "long":
        deadline = time.monotonic() + 60
        while not os.path.exists(marker) and time.monotonic() < deadline:
            time.sleep(0.01)
        return (key, os.getpid(), os.path.exists(marker), time.monotonic())
    if key == "after_seed":
        open(marker, "w").close()
    return (key, os.getpid(), None, time.monotonic())


def _fail_on(payload):
    """``bad`` fails; ``slow`` holds its worker until it is terminated (it waits for a marker
    nobody writes), so whichever worker starts first, ``bad`` fails while ``slow`` still runs:
    no sleep decides the order. If the scheduler waited for ``slow`` instead of stopping, the
    run would end only after ``slow``'s 120 s deadline, with ``slow`` and ``later`` reported
    done."""
    kind, marker = payload
    if kind == "bad":
        raise SpeechlabError("job bad is broken on purpose")
    if kind == "slow":
        deadline = time.monotonic() + 120
        while not os.path.exists(marker) and time.monotonic() < deadline:
            time.sleep(0.01)
    return kind


def _die(payload):
    if payload == "dies":
        os._exit(9)
    return payload


_SETUP = {}


def _remember_setup(tag):
    _SETUP["tag"] = tag


def _report_setup(payload):
    return _SETUP.get("tag"), os.getpid()


def test_in_process_runs_in_dependency_order_first_ready_first():
    order = []

    def execute(payload):
        order.append(payload)
        return payload.upper()

    items = [Work("c", "c", needs=("a", "b")), Work("a", "a"), Work("d", "d", needs=("c",)),
             Work("b", "b", needs=("a",))]
    out = run_jobs(items, execute, workers=1)
    # c is first in the list but waits for a and b; b waits for a.
    assert order == ["a", "b", "c", "d"]
    assert out == {"a": "A", "b": "B", "c": "C", "d": "D"}


def test_workers_never_start_a_job_before_what_it_needs_has_finished(tmp_path):
    marker = str(tmp_path / "after_seed.ran")
    items = [Work("long", ("long", marker)), Work("seed", ("seed", marker)),
             Work("after_seed", ("after_seed", marker), needs=("seed",)),
             Work("after_both", ("after_both", marker), needs=("long", "after_seed"))]
    out = run_jobs(items, _wait_for_marker_or_mark, workers=2)
    assert set(out) == {"long", "seed", "after_seed", "after_both"}
    # after_seed ran while long was still running (it filled the free worker): long saw its mark.
    assert out["long"][2] is True
    # ...and after_both ended after both of its needs.
    assert out["after_both"][3] >= max(out["long"][3], out["after_seed"][3])
    assert len({v[1] for v in out.values()}) == 2  # two worker processes did the work
    assert os.getpid() not in {v[1] for v in out.values()}


def test_setup_runs_once_in_each_worker():
    out = run_jobs([Work(i, i) for i in range(6)], _report_setup, workers=2,
                   setup=_remember_setup, setup_args=("loaded",))
    assert {tag for tag, _ in out.values()} == {"loaded"}


def test_a_failure_stops_the_run_with_the_jobs_own_error(tmp_path):
    never = str(tmp_path / "never-written")
    items = [Work("bad", ("bad", never)), Work("slow", ("slow", never)),
             Work("later", ("later", never), needs=("slow",))]
    ran = []
    with pytest.raises(SpeechlabError, match="broken on purpose"):
        run_jobs(items, _fail_on, workers=2, on_done=lambda k, v, s: ran.append(k))
    # Stopped at bad's failure: slow was terminated, not waited for, so later never started.
    assert ran == []
    with pytest.raises(SpeechlabError, match="broken on purpose"):
        run_jobs(items, _fail_on, workers=1)  # in order: bad first, nothing after it


def test_a_worker_that_dies_is_named():
    with pytest.raises(WorkerDied, match=r"exit code 9 while running dies"):
        run_jobs([Work("dies", "dies"), Work("ok", "ok")], _die, workers=2)


@pytest.mark.parametrize("items, message", [
    ([Work("a", 1), Work("a", 2)], "names these jobs twice: a"),
    ([Work("a", 1, needs=("ghost",))], r"needs \['ghost'\], which the plan never runs"),
    ([Work("a", 1, needs=("b",)), Work("b", 2, needs=("a",))], "cycle"),
])
def test_bad_plans_are_refused_before_anything_runs(items, message):
    with pytest.raises(ConfigError, match=message):
        check_dependencies(items)
    ran = []
    with pytest.raises(ConfigError):
        run_jobs(items, ran.append, workers=1)
    assert ran == []
    with pytest.raises(ConfigError, match="workers must be >= 1"):
        run_jobs([], ran.append, workers=0)


def _stopped(_payload):
    raise KeyboardInterrupt("stopped at a checkpoint")


@pytest.mark.parametrize("execute", [lambda payload: payload * 2, _stopped])
def test_a_worker_whose_run_has_gone_ends_without_a_traceback(execute, capsys):
    """The run's process is killed; its worker finishes (or stops) its item and finds the pipe
    closed: it ends quietly rather than printing a BrokenPipeError."""
    from multiprocessing import Pipe

    from speechlab.experiment.scheduler import _worker_main

    ours, theirs = Pipe()
    ours.send(21)
    ours.close()  # the run's end of the pipe is gone
    _worker_main(theirs, execute, None, (), os.getpid())  # returns; raises nothing
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.parametrize("workers", [1, 2])
def test_a_stopped_job_is_logged_as_stopped_and_a_broken_one_as_failed(tmp_path, caplog,
                                                                        workers):
    """A training stopped by a signal checkpoints and resumes: the log says "stopped", not
    "failed" (an ERROR that sends a reader looking for a bug)."""
    import logging

    caplog.set_level(logging.WARNING, logger="speechlab.experiment.scheduler")
    with pytest.raises(KeyboardInterrupt):
        run_jobs([Work("train", "x")], _stopped, workers=workers)
    stopped = [r for r in caplog.records if "train" in r.getMessage()]
    assert [r.levelname for r in stopped] == ["WARNING"]
    assert "stopped: stopped at a checkpoint" in stopped[0].getMessage()
    caplog.clear()
    never = str(tmp_path / "never-written")
    with pytest.raises(SpeechlabError):
        run_jobs([Work("bad", ("bad", never))], _fail_on, workers=workers)
    assert [(r.levelname, "failed" in r.getMessage()) for r in caplog.records] == [("ERROR", True)]
