//! Structured logs through `tracing`. `RUST_LOG` filters (default `info`);
//! `IDEMKEY_LOG_FORMAT=json` switches to one JSON object per line. Colours
//! only when standard error is a terminal, so piped logs stay parseable.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

pub fn init() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    let result = if std::env::var("IDEMKEY_LOG_FORMAT").as_deref() == Ok("json") {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
    // A second init (tests) keeps the first subscriber.
    let _ = result;
}
