"""Gradio's own front-end files, served from memory.

A first page load asks this server for about 90 of Gradio's script and style files (one for each
kind of component on the page, and their parts) while the browser is building the page on the
same cores. Gradio serves each through its FastAPI route and then compresses it again, level 9,
for every request: 3-4 ms a file, and 0.23 s each time for vis-network (measured here). This
answers those requests before any of that: each file is read and compressed once, kept in memory,
and sent with a year's cache (their names carry a hash of their content, so a new Gradio has new
names). Anything else, or a file not among them, goes on to Gradio untouched.
"""
from __future__ import annotations

import gzip
import mimetypes
from pathlib import Path
from typing import Callable, Optional

# Smaller than this, compressing saves less than it costs.
MIN_GZIP_BYTES = 1024
_COMPRESSIBLE = ("text/", "application/javascript", "application/json", "image/svg+xml")


class Entry:
    __slots__ = ("body", "gz", "ctype")

    def __init__(self, body: bytes, ctype: str):
        self.body, self.ctype = body, ctype
        self.gz = (gzip.compress(body, 6, mtime=0)
                   if len(body) >= MIN_GZIP_BYTES and ctype.startswith(_COMPRESSIBLE) else None)


class StaticCache:
    """ASGI middleware: GET and HEAD of `prefix + name` for each (prefix, folder, cache_control,
    names) in `mounts`, where name is a file of that folder (no subfolder, nothing outside it) and,
    when `names` is given, one of them."""

    def __init__(self, app, mounts: tuple = ()):
        self.app = app
        self.mounts = [(prefix, Path(folder), cache, names) for prefix, folder, cache, names in mounts]
        self.entries: dict[str, Entry] = {}

    def _lookup(self, path: str) -> Optional[tuple[Entry, str]]:
        for prefix, folder, cache, names in self.mounts:
            if not path.startswith(prefix):
                continue
            name = path[len(prefix):]
            if not name or "/" in name or "\\" in name or name.startswith(".") or (names and name not in names):
                return None
            # Only what exists is kept: names asked for in vain must not grow the server's memory.
            entry = self.entries.get(path) or _read(folder, name)
            if entry is None:
                return None
            self.entries[path] = entry
            return entry, cache
        return None

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope.get("method") in ("GET", "HEAD"):
            found = self._lookup(app_path(scope))
            if found is not None:
                return await _answer(scope, send, *found)
        return await self.app(scope, receive, send)


def app_path(scope) -> str:
    """A request's path within the app: behind a root path (a proxy's prefix) the server's path
    begins with it."""
    path, root = scope.get("path", ""), scope.get("root_path", "")
    return path[len(root):] or "/" if root and path.startswith(root) else path


def _read(folder: Path, name: str) -> Optional[Entry]:
    file = folder / name
    try:
        if not file.is_file():
            return None
    except (OSError, ValueError):   # a name the file system refuses (a NUL byte, too long): not ours
        return None
    ctype = mimetypes.guess_type(name)[0] or "application/octet-stream"
    if name.endswith((".js", ".mjs")):
        ctype = "application/javascript"
    if ctype.startswith(("text/", "application/javascript")):
        ctype += "; charset=utf-8"
    return Entry(file.read_bytes(), ctype)


async def _answer(scope, send: Callable, entry: Entry, cache: str) -> None:
    accepts = next((v for k, v in scope.get("headers", []) if k == b"accept-encoding"), b"")
    body, headers = entry.body, [(b"content-type", entry.ctype.encode()), (b"cache-control", cache.encode()),
                                 (b"vary", b"accept-encoding")]
    if entry.gz is not None and b"gzip" in accepts:
        body = entry.gz
        headers.append((b"content-encoding", b"gzip"))
    headers.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else body})
