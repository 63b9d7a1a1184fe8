//! `sqlx::migrate!` embeds the SQL files at compile time; tell Cargo to
//! rebuild when a migration is added or changed.

fn main() {
    println!("cargo:rerun-if-changed=../migrations");
}
