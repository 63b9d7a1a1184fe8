//! How a command fails: a message on standard error that starts with the
//! problem's `code`, and an exit code by kind, so a script can tell "there
//! is no such key" from "the call was refused" from "no server answered".
//!
//! | exit | meaning |
//! |---|---|
//! | 0 | done |
//! | 1 | the server refused the call (any problem other than `not_found`), or answered something unexpected |
//! | 2 | usage: bad arguments, no token, an unreadable or invalid file |
//! | 3 | `not_found`: no such key for this tenant (another tenant's key included) |
//! | 4 | no answer: the server could not be reached within the retry budget |

use std::fmt;

use idemkey_client::Error;

/// Done.
pub const OK: u8 = 0;
/// The server refused the call, or answered something unexpected.
pub const REFUSED: u8 = 1;
/// Bad arguments, no token, an unreadable or invalid input file.
pub const USAGE: u8 = 2;
/// No such key (or class) for this tenant.
pub const NOT_FOUND: u8 = 3;
/// No server answered.
pub const NO_ANSWER: u8 = 4;

/// Why a command failed.
#[derive(Debug)]
pub enum Failure {
    /// The arguments or an input file (exit 2).
    Usage(String),
    /// The API call failed.
    Api(Error),
}

impl Failure {
    /// A usage failure.
    pub fn usage(message: impl Into<String>) -> Self {
        Self::Usage(message.into())
    }

    /// The process's exit code for this failure.
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Usage(_) | Self::Api(Error::Config(_)) => USAGE,
            Self::Api(Error::NotFound(_)) => NOT_FOUND,
            Self::Api(Error::Transport { .. }) => NO_ANSWER,
            Self::Api(_) => REFUSED,
        }
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Self::Api(e)
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Usage(m) => write!(f, "error: {m}"),
            Self::Api(e) => match e.problem() {
                // `code (status) title: detail (request id)`.
                Some(p) => write!(f, "error: {p}"),
                None => write!(f, "error: {}: {e}", e.code()),
            },
        }
    }
}
