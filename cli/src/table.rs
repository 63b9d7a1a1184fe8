//! Plain-text tables for people: columns padded to their widest cell, two
//! spaces apart, a header in capitals; and field/value lists for one record.
//! Values are shown as the API sent them (times in RFC 3339 UTC); `-` marks
//! a member the answer does not have.

use std::fmt::Write;

use chrono::{DateTime, SecondsFormat, Utc};

/// A table with a header row.
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column names.
    pub fn new(header: &[&str]) -> Self {
        Self {
            header: header.iter().map(|h| h.to_uppercase()).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row (one cell per column).
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// The table as lines, each ending in a newline.
    pub fn render(&self) -> String {
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate() {
                if let Some(w) = widths.get_mut(i) {
                    *w = (*w).max(cell.chars().count());
                }
            }
        }
        let mut out = String::new();
        for row in std::iter::once(&self.header).chain(&self.rows) {
            let mut line = String::new();
            for (i, cell) in row.iter().enumerate() {
                if i + 1 == row.len() {
                    line.push_str(cell);
                } else {
                    let _ = write!(line, "{cell:<w$}  ", w = widths[i]);
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// `field  value` lines for one record, fields padded to the widest name.
pub fn fields(pairs: &[(&str, String)]) -> String {
    let width = pairs.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    let mut out = String::new();
    for (k, v) in pairs {
        let _ = writeln!(out, "{k:<width$}  {v}");
    }
    out
}

/// A time as the API writes it: RFC 3339, milliseconds, `Z`.
pub fn time(t: &DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// An optional time, `-` when absent.
pub fn opt_time(t: Option<&DateTime<Utc>>) -> String {
    t.map_or_else(|| "-".to_owned(), time)
}

/// How long ago `t` was, in the largest two units (`3d4h`, `12m5s`, `40s`).
pub fn age(t: &DateTime<Utc>, now: &DateTime<Utc>) -> String {
    let s = (*now - *t).num_seconds().max(0);
    let (d, h, m, sec) = (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
    match (d, h, m) {
        (0, 0, 0) => format!("{sec}s"),
        (0, 0, _) => format!("{m}m{sec}s"),
        (0, _, _) => format!("{h}h{m}m"),
        _ => format!("{d}d{h}h"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_padded_to_the_widest_cell_and_the_last_is_not() {
        let mut t = Table::new(&["key", "state"]);
        t.row(vec!["order-1".into(), "completed".into()]);
        t.row(vec!["o".into(), "in_progress".into()]);
        assert_eq!(
            t.render(),
            "KEY      STATE\norder-1  completed\no        in_progress\n"
        );
    }

    #[test]
    fn ages_show_the_two_largest_units() {
        let now = Utc::now();
        let ago = |s: i64| age(&(now - chrono::Duration::seconds(s)), &now);
        assert_eq!(
            [ago(5), ago(125), ago(7_260), ago(90_000)],
            ["5s", "2m5s", "2h1m", "1d1h"]
        );
    }
}
