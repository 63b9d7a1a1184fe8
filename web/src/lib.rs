//! The tenant dashboard (SPEC section 8) will live here. Until it does, this
//! crate carries the `idemkey` binary, which serves the JSON API, and mounts
//! no routes of its own.

use actix_web::web::ServiceConfig;

/// Mounts the dashboard's routes beside the API.
pub fn mount(_cfg: &mut ServiceConfig) {}
