//! `api/openapi.json` is the generated document, committed: a change to the
//! API shows in review as a change to that file. This test fails when the
//! file is not what the code generates; `IDEMKEY_UPDATE_OPENAPI=1` rewrites
//! it.

use std::path::Path;

use super::DOCUMENT;

#[test]
fn the_committed_document_is_the_generated_one() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("openapi.json");
    let generated = DOCUMENT.as_str();
    if std::env::var_os("IDEMKEY_UPDATE_OPENAPI").is_some_and(|v| v == "1") {
        std::fs::write(&path, generated).expect("write api/openapi.json");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed == generated {
        return;
    }
    let first_difference = committed
        .lines()
        .zip(generated.lines())
        .enumerate()
        .find(|(_, (a, b))| a != b)
        .map(|(n, (a, b))| format!("line {}:\n  committed: {a}\n  generated: {b}", n + 1))
        .unwrap_or_else(|| "one is a prefix of the other".into());
    panic!(
        "api/openapi.json is not the document the code generates ({first_difference}).\n\
         If the change is meant, rewrite the snapshot and commit it:\n\
         IDEMKEY_UPDATE_OPENAPI=1 IDEMKEY_TEST_SUITE=1 cargo test -p idemkey-api openapi"
    );
}
