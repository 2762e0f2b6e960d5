"""A response cache in SQLite: same model + messages + parameters → the stored answer.

Repeated runs, benchmarks and tests are then fast and deterministic. Token counts of the
original call are kept, so a cached run reports what the call costs (flagged `cached`).
"""
from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional


@dataclass
class CachedReply:
    text: str
    tokens_in: int
    tokens_out: int
    latency_ms: float


def cache_key(model: str, messages: list[dict], params: dict, endpoint: str = "") -> str:
    """Two endpoints serving one model name (two servers, two quantisations) keep apart:
    `endpoint` is the URL asked, or the backend's name for the embedded model."""
    blob = json.dumps({"endpoint": endpoint, "model": model, "messages": messages, "params": params},
                      sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class ResponseCache:
    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._con = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
        self._con.execute("PRAGMA journal_mode=WAL")
        self._con.execute(
            "CREATE TABLE IF NOT EXISTS responses(key TEXT PRIMARY KEY, model TEXT, request TEXT, text TEXT, "
            "tokens_in INTEGER, tokens_out INTEGER, latency_ms REAL, created_at REAL)")
        self._con.commit()

    def get(self, key: str) -> Optional[CachedReply]:
        with self._lock:
            row = self._con.execute(
                "SELECT text, tokens_in, tokens_out, latency_ms FROM responses WHERE key=?", (key,)).fetchone()
        return CachedReply(*row) if row else None

    def put(self, key: str, model: str, request: dict, reply: CachedReply) -> None:
        with self._lock:
            self._con.execute(
                "INSERT OR REPLACE INTO responses VALUES (?,?,?,?,?,?,?,?)",
                (key, model, json.dumps(request, ensure_ascii=False), reply.text, reply.tokens_in,
                 reply.tokens_out, reply.latency_ms, time.time()))
            self._con.commit()

    def __len__(self) -> int:
        with self._lock:
            return self._con.execute("SELECT count(*) FROM responses").fetchone()[0]
