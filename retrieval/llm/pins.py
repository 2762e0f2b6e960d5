"""Which of the embedded server's slots a request goes to: each kind of request keeps its own.

A method's steps alternate between prompts that share nothing but their instructions (HippoRAG 2:
the recognition-memory filter, then the answer; SAG: entities, rerank, answer). With one slot each
step found the other's prompt in the KV cache and read its instructions again; llama-server's RAM
prompt cache does not give them back, as it skips a cached prompt that shares under a quarter of
itself with the new one (`server_prompt_cache::load`), and a step's own question and passages are
most of it. So the server runs several slots, each keeping its KV while idle (`-kvu
--no-cache-idle-slots`), and each request names its slot (`id_slot`, a request field
llama-server documents): the slot its purpose used last, so it resumes after the shared
instructions, or else the least recently used free one. A purpose is a call site's name
("rerank", "answer"): one prompt template each.
"""
from __future__ import annotations

import threading
from collections import OrderedDict


class SlotPins:
    """Purpose → slot, least recently used first; a slot busy with another request is not given."""

    def __init__(self, n_slots: int):
        self.n_slots = n_slots
        self._pins: OrderedDict[str, int] = OrderedDict()
        self._busy: set[int] = set()
        self._lock = threading.Lock()

    def take(self, purpose: str) -> int:
        """The slot for this request, marked busy until `give_back`; -1 when every slot is busy
        (more requests at once than slots: the server then picks)."""
        with self._lock:
            slot = self._pins.get(purpose)
            if slot is None or slot in self._busy:
                slot = self._free_slot()
                if slot < 0:
                    return -1
                for p in [p for p, s in self._pins.items() if s == slot]:
                    del self._pins[p]
            self._pins[purpose] = slot
            self._pins.move_to_end(purpose)
            self._busy.add(slot)
            return slot

    def give_back(self, slot: int) -> None:
        with self._lock:
            self._busy.discard(slot)

    def _free_slot(self) -> int:
        """A free slot no purpose holds, else the free one whose purpose was used longest ago."""
        held = set(self._pins.values())
        for s in range(self.n_slots):
            if s not in self._busy and s not in held:
                return s
        for s in self._pins.values():   # oldest first
            if s not in self._busy:
                return s
        return -1
