//! The project's Markdown documents as the docs tests read them
//! (`tests/tests/docs_examples.rs`): fenced code blocks, tables, and the
//! convention that decides which blocks run.
//!
//! Markdown is parsed with pulldown-cmark; nothing here reads Markdown by
//! hand beyond what that parser hands back.

pub mod expect;
pub mod logs;
pub mod metrics;
pub mod run;

use std::path::{Path, PathBuf};

use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};

/// The repository's root (the parent of the `tests` package).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// A document's text, by its path from the repository root.
pub fn read(relative: &str) -> String {
    let path = repo_root().join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The documents a newcomer reads, whose examples must hold: `README.md`
/// and every `docs/*.md`, by path from the repository root.
pub fn documents() -> Vec<String> {
    let mut docs: Vec<String> = std::fs::read_dir(repo_root().join("docs"))
        .expect("docs/")
        .map(|entry| entry.expect("docs/ entry").file_name())
        .filter_map(|name| name.to_str().map(str::to_owned))
        .filter(|name| name.ends_with(".md"))
        .map(|name| format!("docs/{name}"))
        .collect();
    docs.sort();
    docs.insert(0, "README.md".into());
    docs
}

/// One fenced code block.
#[derive(Debug, Clone)]
pub struct Block {
    /// The line of its opening fence (1-based).
    pub line: usize,
    /// The info string after the fence (`sh`, `sh no-run`, `text`, …).
    pub info: String,
    /// Its content, indentation of an enclosing list item removed.
    pub text: String,
    /// Whether only blank lines separate it from the block before it.
    pub follows_block: bool,
}

impl Block {
    /// The info string's first word (`sh` for `sh no-run`).
    pub fn language(&self) -> &str {
        self.info.split_whitespace().next().unwrap_or("")
    }

    /// Whether the info string carries `word` after the language.
    pub fn has_flag(&self, word: &str) -> bool {
        self.info.split_whitespace().skip(1).any(|w| w == word)
    }
}

/// Every fenced code block of `markdown`, in order.
pub fn fenced_blocks(markdown: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut open: Option<Block> = None;
    let mut previous_end: Option<usize> = None;
    for (event, range) in Parser::new(markdown).into_offset_iter() {
        match event {
            Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(info))) => {
                let follows_block =
                    previous_end.is_some_and(|end| markdown[end..range.start].trim().is_empty());
                open = Some(Block {
                    line: markdown[..range.start].lines().count() + 1,
                    info: info.trim().to_owned(),
                    text: String::new(),
                    follows_block,
                });
            }
            Event::Text(text) => {
                if let Some(block) = open.as_mut() {
                    block.text.push_str(&text);
                }
            }
            Event::End(TagEnd::CodeBlock) => {
                if let Some(block) = open.take() {
                    blocks.push(block);
                    previous_end = Some(range.end);
                }
            }
            _ => {}
        }
    }
    blocks
}

/// Every inline code span (`false`) and link target (`true`) of
/// `markdown`, in order (code in fenced blocks excluded).
pub fn code_spans_and_links(markdown: &str) -> Vec<(String, bool)> {
    Parser::new(markdown)
        .filter_map(|event| match event {
            Event::Code(code) => Some((code.to_string(), false)),
            Event::Start(Tag::Link { dest_url, .. }) => Some((dest_url.to_string(), true)),
            _ => None,
        })
        .collect()
}

/// The repository's top-level directories, the start of a path a
/// document names.
const TOP: [&str; 10] = [
    "api/",
    "web/",
    "tests/",
    "bench/",
    "scripts/",
    "migrations/",
    "deploy/",
    "templates/",
    "static/",
    "docs/",
];

/// The paths `doc` names (as inline code from the root, or as a link from
/// the document) that do not exist in the repository.
pub fn dangling_paths(doc: &str) -> Vec<String> {
    let root = repo_root();
    let base = Path::new(doc).parent().expect("a directory");
    let mut missing = Vec::new();
    for (named, is_link) in code_spans_and_links(&read(doc)) {
        let path = named.split('#').next().unwrap_or("");
        let path = path.trim_end_matches([',', '.', ':', ';']);
        let relative = if is_link {
            base.join(path)
        } else {
            PathBuf::from(path)
        };
        let relative = relative.to_string_lossy().replace("docs/../", "");
        let placeholder = ['…', '<', '*', '{', ' ']
            .iter()
            .any(|c| relative.contains(*c))
            || named.contains("://");
        if TOP.iter().any(|top| relative.starts_with(top))
            && !placeholder
            && !root.join(&relative).exists()
        {
            missing.push(format!("{doc}: `{named}`"));
        }
    }
    missing
}

/// A piece of a table cell: inline code or plain text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    Code(String),
    Text(String),
}

/// A table cell as its pieces.
pub type Cell = Vec<Piece>;

/// Every table of `markdown`: its rows (the header row first), each a list
/// of cells.
pub fn tables(markdown: &str) -> Vec<Vec<Vec<Cell>>> {
    let mut tables = Vec::new();
    let mut rows: Vec<Vec<Cell>> = Vec::new();
    let mut row: Vec<Cell> = Vec::new();
    let mut cell: Option<Cell> = None;
    for event in Parser::new_ext(markdown, Options::ENABLE_TABLES) {
        match event {
            Event::Start(Tag::TableCell) => cell = Some(Vec::new()),
            Event::End(TagEnd::TableCell) => row.extend(cell.take()),
            Event::End(TagEnd::TableHead | TagEnd::TableRow) => rows.push(std::mem::take(&mut row)),
            Event::End(TagEnd::Table) => tables.push(std::mem::take(&mut rows)),
            Event::Code(code) => {
                if let Some(cell) = cell.as_mut() {
                    cell.push(Piece::Code(code.to_string()));
                }
            }
            Event::Text(text) => {
                if let Some(cell) = cell.as_mut() {
                    cell.push(Piece::Text(text.to_string()));
                }
            }
            _ => {}
        }
    }
    tables
}

/// The inline code pieces of a cell, in order.
pub fn codes(cell: &Cell) -> Vec<String> {
    cell.iter()
        .filter_map(|piece| match piece {
            Piece::Code(code) => Some(code.clone()),
            Piece::Text(_) => None,
        })
        .collect()
}

/// The plain text of a cell, inline code included.
pub fn plain(cell: &Cell) -> String {
    cell.iter()
        .map(|piece| match piece {
            Piece::Code(s) | Piece::Text(s) => s.as_str(),
        })
        .collect()
}

/// The text of the section of `markdown` under the heading `title` (any
/// level), up to the next heading of the same or a higher level.
pub fn section(markdown: &str, title: &str) -> String {
    let mut headings = Vec::new();
    let mut open: Option<(HeadingLevel, usize, String)> = None;
    for (event, range) in Parser::new(markdown).into_offset_iter() {
        match event {
            Event::Start(Tag::Heading { level, .. }) => {
                open = Some((level, range.end, String::new()))
            }
            Event::Text(text) | Event::Code(text) => {
                if let Some((_, _, name)) = open.as_mut() {
                    name.push_str(&text);
                }
            }
            Event::End(TagEnd::Heading(_)) => {
                if let Some((level, end, name)) = open.take() {
                    headings.push((level, range.start, end, name));
                }
            }
            _ => {}
        }
    }
    let at = headings
        .iter()
        .position(|(_, _, _, name)| name == title)
        .unwrap_or_else(|| panic!("no section titled {title:?}"));
    let (level, _, body_start, _) = headings[at];
    let body_end = headings[at + 1..]
        .iter()
        .find(|(l, ..)| *l <= level)
        .map_or(markdown.len(), |(_, start, ..)| *start);
    markdown[body_start..body_end].to_owned()
}
