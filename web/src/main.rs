//! The `idemkey` binary: glue only.

// mimalloc: glibc's malloc and free were ~8 % of a cached replay's CPU.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[actix_web::main]
async fn main() -> anyhow::Result<()> {
    idemkey_api::cli::run(idemkey_web::mount).await
}
