"""Opening KB files: pragmas, meta access, the version and model checks, and reading a layer's vectors."""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np

from ..core.errors import KBError
from .schema import DDL, SCHEMA_VERSION


def connect(path: str | Path, readonly: bool = False) -> sqlite3.Connection:
    if readonly:
        con = sqlite3.connect(f"file:{Path(path)}?mode=ro", uri=True, check_same_thread=False)
    else:
        con = sqlite3.connect(str(path), check_same_thread=False)
        con.execute("PRAGMA journal_mode=DELETE")
        con.execute("PRAGMA synchronous=NORMAL")
    con.execute("PRAGMA foreign_keys=OFF")
    return con


def create(con: sqlite3.Connection, embed_model: str, embed_dim: int) -> None:
    con.executescript(DDL)
    with con:
        set_meta(con, "schema_version", SCHEMA_VERSION)
        set_meta(con, "embed_model", embed_model)
        set_meta(con, "embed_dim", embed_dim)


def get_meta(con: sqlite3.Connection, key: str, default: Any = None) -> Any:
    row = con.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
    return json.loads(row[0]) if row else default


def set_meta(con: sqlite3.Connection, key: str, value: Any) -> None:
    con.execute("INSERT OR REPLACE INTO meta(key, value) VALUES(?, ?)", (key, json.dumps(value)))


def check(con: sqlite3.Connection, path: Path, embed_model: str | None = None) -> dict:
    """Raise KBError unless `con` is a finished KB of this schema version (and model, if given)."""
    try:
        has_meta = con.execute("SELECT 1 FROM sqlite_master WHERE name='meta'").fetchone()
    except sqlite3.DatabaseError as e:
        raise KBError(f"{path}: not a HopTrace KB ({e})") from None
    if not has_meta:
        raise KBError(f"{path}: not a HopTrace KB (no meta table)")
    version = get_meta(con, "schema_version")
    if version != SCHEMA_VERSION:
        raise KBError(f"{path}: built with KB schema version {version}; this HopTrace reads version "
                      f"{SCHEMA_VERSION}. Rebuild it with `hoptrace build`.")
    model = get_meta(con, "embed_model")
    if embed_model and model != embed_model:
        raise KBError(f"{path}: its vectors were made with {model!r}, not {embed_model!r}; "
                      f"use --embed-model {model} or rebuild the KB")
    return {"schema_version": version, "embed_model": model, "embed_dim": get_meta(con, "embed_dim")}


def building_path(path: Path) -> Path:
    """Where a build of `path` works until it is done (renamed over `path` at the end)."""
    return path.with_name(path.name + ".building")


def open_kb(path: str | Path, embed_model: str | None = None) -> sqlite3.Connection:
    path = Path(path)
    if not path.exists():
        building = building_path(path)
        hint = f" (an unfinished build is at {building}: run the same `hoptrace build` again to finish it)" \
            if building.exists() else " (build it with `hoptrace build`)"
        raise KBError(f"{path}: no such KB{hint}")
    con = connect(path, readonly=True)
    check(con, path, embed_model)
    # A running build publishes snapshots whose whole units serve some methods (kb/publish.py).
    if not get_meta(con, "complete", False) and not get_meta(con, "published"):
        raise KBError(f"{path}: the KB build did not finish; run `hoptrace build` again")
    return con


def problem(path: Path) -> str | None:
    """Why a KB file cannot be served — not a database, SQLite's quick check fails, not a finished
    HopTrace KB of this schema — or None. Messages name the file, never its folder (public mode
    shows them)."""
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    except sqlite3.Error as e:
        return f"cannot be opened ({e})"
    try:
        rows = [r[0] for r in con.execute("PRAGMA quick_check").fetchall()]
        if rows != ["ok"]:
            return "damaged: SQLite's integrity check failed (" + "; ".join(rows[:2]) + ")"
        check(con, path)
    except sqlite3.DatabaseError as e:
        return f"not a database ({e})"
    except KBError as e:
        return str(e).replace(str(path), path.name)
    finally:
        con.close()
    return None


def load_vectors(con: sqlite3.Connection, layer: str, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """(item rowids, float32 matrix) of a layer, rowid order."""
    rows = con.execute("SELECT item_rowid, vec FROM vectors WHERE layer=? ORDER BY item_rowid", (layer,)).fetchall()
    ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    if not rows:
        return ids, np.zeros((0, dim), dtype=np.float32)
    mat = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float16).reshape(len(rows), dim)
    return ids, mat.astype(np.float32)

