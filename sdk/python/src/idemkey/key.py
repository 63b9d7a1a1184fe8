"""UUIDv7 idempotency keys (RFC 9562).

48-bit Unix milliseconds, version 7, 74 random bits. Keys made in one process
are strictly increasing: within one millisecond the random part is
incremented (RFC 9562 section 6.2, method 2).

Make a key ONCE per logical operation and store it (with the order, the job,
the outbox row) BEFORE the first attempt; every retry reuses it. A key made
anew for a retry defeats idempotency: the retry becomes a second operation.
"""

from __future__ import annotations

import re
import secrets
import threading
import time

__all__ = ["new_key", "key_timestamp", "is_uuid_v7"]

_RAND_BITS = 74
_RAND_MAX = (1 << _RAND_BITS) - 1
_lock = threading.Lock()
_last_ms = -1
_last_rand = 0


def _random_bits() -> int:
    # 74 random bits with the top one cleared, so increments have room.
    return secrets.randbits(_RAND_BITS) >> 1


def new_key() -> str:
    """A new UUIDv7 string, such as ``01938a4e-7c2b-7d3e-9f10-2a3b4c5d6e7f``.

    Call it once per logical operation and store the key before the first
    attempt; reuse it for every retry of that operation.
    """
    global _last_ms, _last_rand
    with _lock:
        ms = time.time_ns() // 1_000_000
        if ms <= _last_ms:
            ms = _last_ms
            rand = _last_rand + 1
            if rand > _RAND_MAX:
                ms += 1
                rand = _random_bits()
        else:
            rand = _random_bits()
        _last_ms, _last_rand = ms, rand
    rand_a = (rand >> 62) & 0xFFF
    rand_b = rand & ((1 << 62) - 1)
    value = (ms << 80) | (0x7 << 76) | (rand_a << 64) | (0b10 << 62) | rand_b
    h = f"{value:032x}"
    return f"{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def key_timestamp(key: str) -> int:
    """The Unix milliseconds embedded in a UUIDv7 key."""
    return int(key.replace("-", "")[:12], 16)


_UUIDV7 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


def is_uuid_v7(key: str) -> bool:
    """True when ``key`` is a lowercase UUIDv7 string."""
    return _UUIDV7.match(key) is not None
