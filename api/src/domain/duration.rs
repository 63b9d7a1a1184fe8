//! Durations as users write them: `"1500ms"`, `"90s"`, `"15m"`, `"24h"`, `"7d"`.

use std::time::Duration;

/// Parse one number followed by one unit. Strict on purpose: a policy or a
/// token lifetime is no place for guessing.
pub fn parse_duration(s: &str) -> Option<Duration> {
    let split = s.find(|c: char| !c.is_ascii_digit())?;
    let (digits, unit) = s.split_at(split);
    if digits.is_empty() || digits.len() > 12 {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    let unit_ms: u64 = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return None,
    };
    // Twelve digits of days overflow a u64 of milliseconds: refuse, never wrap.
    n.checked_mul(unit_ms).map(Duration::from_millis)
}

/// The shortest exact spelling of a duration in the same units.
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis() as u64;
    for (unit, size) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1_000),
    ] {
        if ms > 0 && ms.is_multiple_of(size) {
            return format!("{}{unit}", ms / size);
        }
    }
    format!("{ms}ms")
}

/// A duration as the API spells it: a whole number and one unit, such as
/// `1500ms`, `90s`, `15m`, `24h`, `7d` (the schema of such strings).
#[derive(utoipa::ToSchema)]
#[schema(as = Duration, pattern = "^[0-9]{1,12}(ms|s|m|h|d)$", example = "24h")]
pub struct DurationText(#[allow(dead_code)] String);

#[cfg(test)]
mod proptests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_in_every_unit() {
        assert_eq!(parse_duration("1500ms"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_duration("90s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration("15m"), Some(Duration::from_secs(900)));
        assert_eq!(parse_duration("2h"), Some(Duration::from_secs(7200)));
        assert_eq!(parse_duration("7d"), Some(Duration::from_secs(604_800)));
    }

    #[test]
    fn malformed_durations_are_refused() {
        for bad in [
            "",
            "s",
            "10",
            "1.5h",
            "-1s",
            "10 s",
            "1w",
            "1h30m",
            "9999999999999s",
            "999999999999d",
        ] {
            assert_eq!(parse_duration(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn durations_format_back_to_their_shortest_unit() {
        assert_eq!(format_duration(Duration::from_secs(86_400)), "1d");
        assert_eq!(format_duration(Duration::from_secs(90)), "90s");
        assert_eq!(format_duration(Duration::from_millis(1500)), "1500ms");
        assert_eq!(format_duration(Duration::ZERO), "0ms");
    }
}
