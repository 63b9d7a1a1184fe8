//! The metrics table of docs/operations.md against what `/metrics` serves.

use std::collections::{BTreeMap, BTreeSet};

use super::{codes, plain, tables, Cell, Piece};

/// One documented label: its name and the values the table lists for it
/// (empty: the table does not list them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Label {
    pub name: String,
    pub values: BTreeSet<String>,
}

/// One row of the table, for each metric name in its first cell.
#[derive(Debug, Clone)]
pub struct Documented {
    /// As scraped: counters with `_total`, histograms by family name.
    pub name: String,
    pub kind: String,
    pub labels: Vec<Label>,
}

/// The rows of the table whose header starts `metric | type | labels`.
pub fn documented(markdown: &str) -> Vec<Documented> {
    let table = tables(markdown)
        .into_iter()
        .find(|rows| {
            rows.first()
                .is_some_and(|head| head.len() >= 3 && plain(&head[0]) == "metric")
        })
        .expect("a table headed `metric | type | labels | meaning`");
    let mut out = Vec::new();
    for row in &table[1..] {
        let kind = plain(&row[1]).trim().to_owned();
        let labels = labels(&row[2]);
        for name in codes(&row[0]) {
            out.push(Documented {
                name,
                kind: kind.clone(),
                labels: labels.clone(),
            });
        }
    }
    out
}

/// Labels as the table writes them: `` `layer` (`local`, `redis`), `result` ``:
/// code outside brackets names a label, code inside lists its values.
fn labels(cell: &Cell) -> Vec<Label> {
    let mut labels: Vec<Label> = Vec::new();
    let mut depth = 0i32;
    for piece in cell {
        match piece {
            Piece::Text(text) => {
                depth += text.matches('(').count() as i32 - text.matches(')').count() as i32
            }
            Piece::Code(code) if depth == 0 => labels.push(Label {
                name: code.clone(),
                values: BTreeSet::new(),
            }),
            Piece::Code(code) => {
                if let Some(label) = labels.last_mut() {
                    label.values.insert(code.clone());
                }
            }
        }
    }
    labels
}

/// One family of a scrape: its type and every series' labels.
#[derive(Debug, Clone, Default)]
pub struct Family {
    pub kind: String,
    pub series: Vec<BTreeMap<String, String>>,
}

/// The families of an OpenMetrics text, by the name the table uses
/// (counters with `_total`).
pub fn scraped(text: &str) -> BTreeMap<String, Family> {
    let mut kinds: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("# TYPE name kind");
            kinds.push((name.to_owned(), kind.to_owned()));
        }
    }
    let mut families: BTreeMap<String, Family> = BTreeMap::new();
    for (name, kind) in &kinds {
        let shown = if kind == "counter" {
            format!("{name}_total")
        } else {
            name.clone()
        };
        families.entry(shown).or_default().kind = kind.clone();
    }
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let series = line.rsplit_once(' ').expect("series value").0;
        let (sample, labels) = match series.split_once('{') {
            Some((sample, rest)) => (sample, parse_labels(rest.trim_end_matches('}'))),
            None => (series, BTreeMap::new()),
        };
        // The family whose name is the longest prefix of the sample's.
        let (name, kind) = kinds
            .iter()
            .filter(|(name, _)| sample.starts_with(name.as_str()))
            .max_by_key(|(name, _)| name.len())
            .unwrap_or_else(|| panic!("{sample} belongs to no # TYPE"));
        let shown = if kind == "counter" {
            format!("{name}_total")
        } else {
            name.clone()
        };
        let mut labels = labels;
        labels.remove("le");
        families.entry(shown).or_default().series.push(labels);
    }
    families
}

fn parse_labels(text: &str) -> BTreeMap<String, String> {
    text.split(',')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (name, value) = pair.split_once('=').expect("label=value");
            (name.to_owned(), value.trim_matches('"').to_owned())
        })
        .collect()
}

/// The metric families the server registers (`registry.register("…"` in
/// `api/src/metrics/`), with their `idemkey_` prefix: a family with no
/// series yet (no Redis failure, no archive read) is registered but not
/// served, so the table is held against the source for names.
pub fn registered() -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for entry in std::fs::read_dir(super::repo_root().join("api/src/metrics")).expect("metrics") {
        let text = std::fs::read_to_string(entry.expect("entry").path()).expect("source");
        for piece in text.split("registry.register(").skip(1) {
            let name = piece.split('"').nth(1).expect("a registered name");
            names.insert(format!("idemkey_{name}"));
        }
    }
    names
}

/// A documented name as registered: counters without their `_total`.
fn family_name(doc: &Documented) -> &str {
    match doc.kind.as_str() {
        "counter" => doc.name.strip_suffix("_total").unwrap_or(&doc.name),
        _ => &doc.name,
    }
}

/// Where the documented table disagrees with the registered families and
/// with a scrape (empty: nowhere).
pub fn disagreements(
    documented: &[Documented],
    registered: &BTreeSet<String>,
    scraped: &BTreeMap<String, Family>,
) -> Vec<String> {
    let mut out = Vec::new();
    for name in registered {
        if !documented.iter().any(|doc| family_name(doc) == name) {
            out.push(format!("`{name}` is registered but not documented"));
        }
    }
    for doc in documented {
        if !registered.contains(family_name(doc)) {
            out.push(format!(
                "`{}` ({}) is documented but not registered",
                doc.name, doc.kind
            ));
        }
        let Some(family) = scraped.get(&doc.name) else {
            continue;
        };
        if family.kind != doc.kind {
            out.push(format!(
                "`{}` is documented as a {} but served as a {}",
                doc.name, doc.kind, family.kind
            ));
        }
        for series in &family.series {
            for (name, value) in series {
                match doc.labels.iter().find(|label| &label.name == name) {
                    None => out.push(format!("`{}` has an undocumented label `{name}`", doc.name)),
                    Some(label) if !label.values.is_empty() && !label.values.contains(value) => out
                        .push(format!(
                            "`{}{{{name}=\"{value}\"}}` is served but `{value}` is not documented",
                            doc.name
                        )),
                    Some(_) => {}
                }
            }
        }
    }
    for name in scraped.keys() {
        if !documented.iter().any(|doc| &doc.name == name) {
            out.push(format!("`{name}` is served but not documented"));
        }
    }
    out
}

/// The statement names the engine counts (`counted("…")` in
/// `api/src/engine/`), so that the table lists every one, not only those a
/// test happened to send.
pub fn counted_statements() -> BTreeSet<String> {
    let dir = super::repo_root().join("api/src/engine");
    let mut names = BTreeSet::new();
    let mut stack = vec![dir];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("api/src/engine") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).expect("engine source");
                for piece in text.split("counted(\"").skip(1) {
                    names.insert(piece.split('"').next().expect("a name").to_owned());
                }
            }
        }
    }
    names
}
