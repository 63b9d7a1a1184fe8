//! Matching what an example printed against the output its document shows.
//!
//! The rules, which `tests/tests/docs_examples.rs` states for writers:
//!
//! - `…` in a shown line matches any run of characters (an owner token, a
//!   timestamp); a shown line that is only `…` matches any number of lines.
//! - Every other character must be as printed; lines are compared without
//!   trailing whitespace (curl's `\r`).
//! - Printed HTTP header lines (`name: value`) and blank lines may be left
//!   out. A shown header line must be among the header lines right where it
//!   stands (after its status line), in any order: servers do not promise
//!   an order.
//! - Every other printed line must be shown, in order.

/// Whether `line` matches `pattern`, where `…` stands for any run of
/// characters.
pub fn line_matches(pattern: &str, line: &str) -> bool {
    let mut parts = pattern.split('…');
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = line.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

fn is_header(line: &str) -> bool {
    line.split_once(": ").is_some_and(|(name, _)| {
        !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    })
}

fn skippable(line: &str) -> bool {
    line.is_empty() || is_header(line)
}

fn matches_from(shown: &[&str], printed: &[&str]) -> bool {
    let Some((first, rest)) = shown.split_first() else {
        return printed.iter().all(|line| skippable(line));
    };
    if *first == "…" {
        return (0..=printed.len()).any(|skip| matches_from(rest, &printed[skip..]));
    }
    if is_header(first) {
        let headers = printed.iter().take_while(|line| is_header(line));
        return headers.clone().any(|line| line_matches(first, line))
            && matches_from(rest, printed);
    }
    let mut at = 0;
    while at < printed.len() {
        if line_matches(first, printed[at]) && matches_from(rest, &printed[at + 1..]) {
            return true;
        }
        if !skippable(printed[at]) {
            return false;
        }
        at += 1;
    }
    false
}

/// Whether `printed` (what an example wrote) is what `shown` says.
pub fn output_matches(shown: &str, printed: &str) -> bool {
    let shown: Vec<&str> = shown.lines().map(str::trim_end).collect();
    let printed: Vec<&str> = printed.lines().map(str::trim_end).collect();
    matches_from(&shown, &printed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ellipsis_stands_for_any_run_of_characters() {
        assert!(line_matches("a…c", "abbbc"));
        assert!(line_matches("a…c", "ac"));
        assert!(line_matches(
            "{\"t\":\"…\",\"n\":1}",
            "{\"t\":\"x\",\"n\":1}"
        ));
        assert!(!line_matches(
            "{\"t\":\"…\",\"n\":1}",
            "{\"t\":\"x\",\"n\":2}"
        ));
        assert!(!line_matches("abc", "abcd"));
        assert!(!line_matches("a…b…b", "ab"));
        assert!(line_matches("…", ""));
    }

    #[test]
    fn headers_and_blank_lines_may_be_left_out_but_nothing_else() {
        let printed = "HTTP/1.1 201 Created\r\ncontent-type: application/json\r\nx-request-id: 1\r\n\r\n{\"a\":1}\n";
        assert!(output_matches("HTTP/1.1 201 Created\n{\"a\":1}", printed));
        assert!(output_matches(
            "HTTP/1.1 201 Created\nx-request-id: …\ncontent-type: application/json\n{\"a\":…}",
            printed
        ));
        assert!(
            !output_matches("{\"a\":1}", printed),
            "the status line is missing"
        );
        assert!(!output_matches("HTTP/1.1 200 OK\n{\"a\":1}", printed));
        assert!(!output_matches(
            "HTTP/1.1 201 Created\nretry-after: 1\n{\"a\":1}",
            printed
        ));
        assert!(
            !output_matches("HTTP/1.1 201 Created", printed),
            "the body is missing"
        );
        assert!(output_matches("HTTP/1.1 201 Created\n…", printed));
        assert!(output_matches("", ""));
        assert!(!output_matches("", "something\n"));
    }
}
