/**
 * UUIDv7 keys (RFC 9562): 48-bit Unix milliseconds, version 7, 74 random bits.
 * Keys made in one process are strictly increasing: within one millisecond
 * the random part is incremented (RFC 9562 §6.2, method 2).
 *
 * Make a key ONCE per logical operation and store it (with the order, the job,
 * the outbox row) BEFORE the first attempt; every retry reuses it.
 */

let lastMs = -1;
let lastRand = 0n; // 74 bits: 12 bits rand_a, then 62 bits rand_b

const RAND_BITS = 74n;
const RAND_MAX = (1n << RAND_BITS) - 1n;

function randomBits(): bigint {
  const bytes = new Uint8Array(10);
  globalThis.crypto.getRandomValues(bytes);
  let v = 0n;
  for (const b of bytes) v = (v << 8n) | BigInt(b);
  // 80 random bits; keep 74, and clear the top one so increments have room.
  return (v & RAND_MAX) >> 1n;
}

/** A new UUIDv7 string, such as `01938a4e-7c2b-7d3e-9f10-2a3b4c5d6e7f`. */
export function newKey(): string {
  let ms = Date.now();
  let rand: bigint;
  if (ms <= lastMs) {
    ms = lastMs;
    rand = lastRand + 1n;
    if (rand > RAND_MAX) {
      ms += 1;
      rand = randomBits();
    }
  } else {
    rand = randomBits();
  }
  lastMs = ms;
  lastRand = rand;

  const randA = Number(rand >> 62n) & 0xfff;
  const randB = rand & ((1n << 62n) - 1n);
  const hex = (v: bigint | number, len: number) => v.toString(16).padStart(len, "0");
  const timeHex = hex(ms, 12);
  const verA = hex(0x7000 | randA, 4);
  const varB = (2n << 62n) | randB; // variant 10
  const tail = hex(varB, 16);
  return `${timeHex.slice(0, 8)}-${timeHex.slice(8, 12)}-${verA}-${tail.slice(0, 4)}-${tail.slice(4)}`;
}

/** The Unix milliseconds embedded in a UUIDv7 key. */
export function keyTimestamp(key: string): number {
  const hex = key.replace(/-/g, "").slice(0, 12);
  return parseInt(hex, 16);
}

const UUIDV7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** True when `key` is a lowercase UUIDv7 string. */
export function isUuidV7(key: string): boolean {
  return UUIDV7.test(key);
}
