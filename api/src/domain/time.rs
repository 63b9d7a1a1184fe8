//! How every timestamp leaves the service: RFC 3339, UTC, milliseconds, `Z`.

use chrono::{DateTime, SecondsFormat, Utc};

pub fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_utc_with_milliseconds() {
        let t = DateTime::from_timestamp_millis(1_800_000_000_123).unwrap();
        assert_eq!(rfc3339(t), "2027-01-15T08:00:00.123Z");
    }
}
