//! Idempotency keys: UUIDv7 (RFC 9562) — 48-bit Unix milliseconds, version
//! 7, variant `10`, 74 random bits.
//!
//! **Make a key once per logical operation and store it** (with the order,
//! the job, the outbox row) **before the first attempt**; every retry of that
//! operation reuses the stored key. A new key for a retry is a new operation:
//! the effect would run again.
//!
//! Keys made in one process are strictly increasing: within one millisecond
//! the random part is incremented (RFC 9562 §6.2, method 2), so sorting keys
//! keeps the order they were made in.

use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use rand::Rng;

/// 74 random bits: 12 of `rand_a`, then 62 of `rand_b`.
const RAND_BITS: u32 = 74;
const RAND_MAX: u128 = (1u128 << RAND_BITS) - 1;

/// The last (milliseconds, random part) handed out, for monotonicity.
static LAST: Mutex<(u64, u128)> = Mutex::new((0, 0));

fn random_bits() -> u128 {
    // Clear the top bit so that increments within one millisecond have room.
    (rand::rng().random::<u128>() & RAND_MAX) >> 1
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A new UUIDv7 key, such as `01938a4e-7c2b-7d3e-9f10-2a3b4c5d6e7f`
/// (lowercase, 36 characters, valid as an idemkey key).
///
/// Call it once per logical operation and store the result before the first
/// attempt; never call it again for a retry.
pub fn new_key() -> String {
    let (ms, rand) = {
        // A poisoned lock only means another thread panicked mid-update of
        // two integers: the values are still usable.
        let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
        let mut ms = now_ms();
        let rand = if ms <= last.0 {
            ms = last.0;
            let next = last.1 + 1;
            if next > RAND_MAX {
                ms += 1;
                random_bits()
            } else {
                next
            }
        } else {
            random_bits()
        };
        *last = (ms, rand);
        (ms, rand)
    };
    let rand_a = (rand >> 62) & 0xfff;
    let rand_b = rand & ((1u128 << 62) - 1);
    let value: u128 = (u128::from(ms & 0xffff_ffff_ffff) << 80)
        | (0x7u128 << 76)
        | (rand_a << 64)
        | (0b10u128 << 62)
        | rand_b;
    let hex = format!("{value:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// True when `key` is a lowercase UUIDv7 string (version 7, variant `10`).
pub fn is_uuid_v7(key: &str) -> bool {
    let b = key.as_bytes();
    if b.len() != 36 {
        return false;
    }
    let hex = |c: u8| c.is_ascii_digit() || (b'a'..=b'f').contains(&c);
    b.iter().enumerate().all(|(i, &c)| match i {
        8 | 13 | 18 | 23 => c == b'-',
        14 => c == b'7',
        19 => matches!(c, b'8' | b'9' | b'a' | b'b'),
        _ => hex(c),
    })
}

/// The Unix milliseconds embedded in a UUIDv7 key, or `None` when `key` is
/// not one.
pub fn key_timestamp_ms(key: &str) -> Option<u64> {
    if !is_uuid_v7(key) {
        return None;
    }
    let digits: String = key.chars().filter(|c| *c != '-').take(12).collect();
    u64::from_str_radix(&digits, 16).ok()
}
