//! Durations under random input: the parser accepts exactly one to twelve
//! ASCII digits and one unit, refuses what overflows, and its output reads
//! back through the formatter unchanged.

use proptest::prelude::*;
use proptest::sample::select;

use super::*;
use crate::proptest_config::config;

const UNITS: [(&str, u128); 5] = [
    ("ms", 1),
    ("s", 1_000),
    ("m", 60_000),
    ("h", 3_600_000),
    ("d", 86_400_000),
];

/// The milliseconds `s` means under the documented grammar
/// `[0-9]{1,12}(ms|s|m|h|d)`, in u128 so that overflow is visible.
fn meaning(s: &str) -> Option<u128> {
    let digits: String = s.chars().take_while(|c| c.is_ascii_digit()).collect();
    let unit = &s[digits.len()..];
    let size = UNITS.iter().find(|(name, _)| *name == unit)?.1;
    if digits.is_empty() || digits.len() > 12 {
        return None;
    }
    Some(digits.parse::<u128>().ok()? * size)
}

fn spelled() -> impl Strategy<Value = String> {
    let unit = select(
        &[
            "ms", "s", "m", "h", "d", "", "w", "S", "MS", "sec", " s", "s ", "µs",
        ][..],
    );
    let digits = prop_oneof![
        "[0-9]{0,14}",
        Just("999999999999".to_owned()),
        "[+-][0-9]{1,3}"
    ];
    prop_oneof![
        4 => (digits, unit).prop_map(|(d, u)| format!("{d}{u}")),
        1 => any::<String>(),
        1 => "[0-9.smhd ]{0,6}",
    ]
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn a_duration_is_accepted_exactly_when_it_fits_the_grammar(s in spelled()) {
        let expected = meaning(&s)
            .and_then(|ms| u64::try_from(ms).ok())
            .map(Duration::from_millis);
        prop_assert_eq!(parse_duration(&s), expected, "{:?}", s);
    }

    #[test]
    fn a_parsed_duration_formats_to_its_shortest_spelling_and_back(s in spelled()) {
        let Some(d) = parse_duration(&s) else { return Ok(()) };
        let formatted = format_duration(d);
        prop_assert_eq!(parse_duration(&formatted), Some(d), "{} -> {}", s, formatted);
        if !d.is_zero() {
            prop_assert!(formatted.len() <= s.len(), "{} -> {}", s, formatted);
        }
    }

    #[test]
    fn every_whole_millisecond_count_round_trips_in_its_largest_unit(ms in prop_oneof![
        0u64..1_000_000_000_000,
        (0u64..1_000_000, select(&UNITS[..])).prop_map(|(n, (_, size))| n * size as u64),
    ]) {
        let d = Duration::from_millis(ms);
        let formatted = format_duration(d);
        prop_assert_eq!(parse_duration(&formatted), Some(d), "{}", formatted);
        let largest = UNITS.iter().rev().find(|(_, size)| ms > 0 && (ms as u128).is_multiple_of(*size));
        let unit = largest.map_or("ms", |(name, _)| name);
        let count = formatted.strip_suffix(unit);
        prop_assert!(count.is_some_and(|c| c.chars().all(|c| c.is_ascii_digit())), "{}", formatted);
    }
}
