from __future__ import annotations

import os

import pytest

from speechlab.files import atomic_path, atomic_write_text


def test_atomic_write_replaces_and_uses_normal_permissions(tmp_path):
    p = tmp_path / "out.txt"
    atomic_write_text(p, "one")
    atomic_write_text(p, "two")
    assert p.read_text() == "two"
    mask = os.umask(0)
    os.umask(mask)
    assert p.stat().st_mode & 0o777 == 0o666 & ~mask
    assert [x.name for x in tmp_path.iterdir()] == ["out.txt"]


def test_failed_write_leaves_old_file_and_no_temporary(tmp_path):
    p = tmp_path / "out.txt"
    atomic_write_text(p, "old")
    with pytest.raises(RuntimeError):
        with atomic_path(p) as tmp:
            tmp.write_text("half")
            raise RuntimeError("crash")
    assert p.read_text() == "old"
    assert [x.name for x in tmp_path.iterdir()] == ["out.txt"]


# ---------------------------------------------------------------------------------------------
# OS faults name the user's path, never a temporary one.

import errno  # noqa: E402

from speechlab import files  # noqa: E402
from speechlab.errors import DataError  # noqa: E402
from speechlab.files import check_output, read_json  # noqa: E402


def test_a_full_disk_inside_atomic_path_names_the_target_and_keeps_the_old_file(tmp_path):
    p = tmp_path / "out.json"
    atomic_write_text(p, "old")
    with pytest.raises(OSError) as e:
        with atomic_path(p) as tmp:
            tmp.write_text("half")
            raise OSError(errno.ENOSPC, "No space left on device")  # as write() on a full disk
    assert e.value.errno == errno.ENOSPC and e.value.filename == str(p)
    assert p.read_text() == "old" and [x.name for x in tmp_path.iterdir()] == ["out.json"]


@pytest.mark.parametrize("free_blocks, code", [(0, errno.ENOSPC), (10**9, errno.EIO)])
def test_torch_write_failures_become_the_os_error_they_stand_for(tmp_path, monkeypatch,
                                                                 free_blocks, code):
    class Stat:
        f_bavail = f_bfree = free_blocks
        f_frsize = 4096

    monkeypatch.setattr(files.os, "statvfs", lambda p: Stat())
    with pytest.raises(OSError) as e:
        with atomic_path(tmp_path / "ckpt.pt"):
            raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 704 "
                               "vs 598")
    assert e.value.errno == code and e.value.filename == str(tmp_path / "ckpt.pt")
    assert list(tmp_path.iterdir()) == []


def test_atomic_path_refuses_a_directory_as_target(tmp_path):
    with pytest.raises(IsADirectoryError) as e:
        with atomic_path(tmp_path):
            pass
    assert e.value.filename == str(tmp_path)


def test_check_output_finds_the_fault_before_any_work(tmp_path):
    (tmp_path / "file").write_text("x")
    (tmp_path / "dir").mkdir()
    check_output(tmp_path / "new" / "deeper" / "out.json")  # creatable: fine
    check_output(tmp_path / "dir", "dir")
    for path, kind, exc in [(tmp_path / "dir", "file", IsADirectoryError),
                            (tmp_path / "file", "dir", NotADirectoryError),
                            (tmp_path / "file" / "x.json", "file", NotADirectoryError),
                            (tmp_path / "file" / "sub", "dir", NotADirectoryError)]:
        with pytest.raises(exc) as e:
            check_output(path, kind)
        assert e.value.filename == str(path)
    assert not (tmp_path / "new").exists()  # checking creates nothing
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir", "file"]


def test_read_json_names_the_file_and_line(tmp_path):
    p = tmp_path / "side.json"
    p.write_text('{"a": 1,\n  oops}')
    with pytest.raises(DataError, match=r"side\.json:2: corrupt model description"):
        read_json(p, "model description")
    with pytest.raises(DataError, match="is a directory"):
        read_json(tmp_path)
    with pytest.raises(DataError, match="does not exist"):
        read_json(tmp_path / "none.json")
    p.write_bytes(b"\xff\xfe{}")
    with pytest.raises(DataError, match="not UTF-8"):
        read_json(p)


def test_atomic_path_writes_through_links_and_into_pipes(tmp_path):
    target = tmp_path / "real.json"
    atomic_write_text(target, "old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    atomic_write_text(link, "new")
    assert link.is_symlink() and target.read_text() == "new"
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    check_output(fifo)  # a pipe is written to directly, nothing replaces it
    import threading

    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()))
    reader.start()
    atomic_write_text(fifo, "streamed")
    reader.join(timeout=10)
    assert got == ["streamed"] and fifo.exists() and not fifo.is_file()


@pytest.mark.parametrize("mask", [0o022, 0o027, 0o077])
def test_a_package_is_written_with_the_users_umask(tmp_path, mask):
    """An exported package is shared on a lab disk: its directory and files get the modes a
    plain mkdir and open give under the user's umask, not the temporary directory's 0700."""
    import torch

    from speechlab.package import PackageCard, write_package

    card = PackageCard(family="toy", kind="asr", config={"threshold_db": -40.0}, languages=("en",),
                       files={"lm": "lm.arpa"})
    old = os.umask(mask)
    try:
        out = write_package(tmp_path / "pkg", card, {"gain": torch.ones(1)},
                            {"lm.arpa": b"\\data\\\n"})
    finally:
        os.umask(old)
    assert out.stat().st_mode & 0o777 == 0o777 & ~mask
    for f in out.iterdir():
        assert f.stat().st_mode & 0o777 == 0o666 & ~mask, f.name


def test_the_same_weights_give_the_same_package_bytes(tmp_path):
    """safetensors writes its metadata in no fixed order; a package's weights file is rewritten
    with a sorted header, so re-exporting unchanged weights changes no byte (and git keeps one
    blob), and the file still loads."""
    import torch
    from safetensors.torch import load_file

    from speechlab.package import WEIGHTS_NAME, PackageCard, write_package

    card = PackageCard(family="toy", kind="asr", config={}, languages=("en",), files={})
    weights = {"b.w": torch.arange(6.0).reshape(2, 3), "a": torch.ones(3, dtype=torch.float16)}
    blobs = {write_package(tmp_path / f"p{i}", card, weights).joinpath(WEIGHTS_NAME).read_bytes()
             for i in range(8)}
    assert len(blobs) == 1
    header = next(iter(blobs))[8:].split(b"}}")[0]
    assert header.index(b'"family"') < header.index(b'"format"')  # sorted
    loaded = load_file(str(tmp_path / "p0" / WEIGHTS_NAME))
    assert all(torch.equal(loaded[k], v) for k, v in weights.items())


def test_a_safetensors_header_in_another_form_is_refused(tmp_path):
    path = tmp_path / "w.safetensors"
    header = b'{ "a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]} }'
    path.write_bytes(len(header).to_bytes(8, "little") + header + b"\0\0\0\0")
    with pytest.raises(files.SpeechlabError, match="compact form"):
        files.canonical_safetensors(path)
    assert path.read_bytes()[8:8 + len(header)] == header  # left as it was
