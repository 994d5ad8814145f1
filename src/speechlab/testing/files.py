"""What a directory tree holds, for tests that a failed command left nothing behind."""

from __future__ import annotations

import hashlib
from pathlib import Path


def snapshot(root: str | Path) -> dict[str, str]:
    """Every file and directory under ``root`` (hidden ones included) -> its content digest
    (``"dir"`` for directories). Equal snapshots before and after a command mean it neither
    wrote, changed nor removed anything there."""
    root = Path(root)
    out: dict[str, str] = {}
    if not root.exists():
        return out
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        if p.is_symlink():
            out[rel] = "link:" + str(p.readlink())
        elif p.is_dir():
            out[rel] = "dir"
        else:
            out[rel] = hashlib.sha1(p.read_bytes()).hexdigest()
    return out
