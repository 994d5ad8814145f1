from __future__ import annotations

import os

import pytest

from speechlab.utils import atomic_path, atomic_write_text


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
