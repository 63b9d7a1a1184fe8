//! The `idemkey` binary: glue only.

#[actix_web::main]
async fn main() -> anyhow::Result<()> {
    idemkey_api::cli::run(idemkey_web::mount).await
}
