//! Tokens for tests, signed with the secret every test server is given.

use std::time::Duration;

use idemkey_api::auth::{mint, Role, RoleSet};
use idemkey_api::domain::TenantId;

pub const TEST_KID: &str = "test-1";
pub const TEST_SECRET: &str = "test-secret-0123456789abcdef-0123456789";
pub const TEST_ISSUER: &str = "idemkey";
pub const TEST_AUDIENCE: &str = "idemkey";

pub fn token(tenant: &str, roles: &[Role]) -> String {
    let tenant = TenantId::parse(tenant).expect("valid tenant");
    let roles: RoleSet = roles.iter().copied().collect();
    mint(
        TEST_KID,
        TEST_SECRET.as_bytes(),
        TEST_ISSUER,
        TEST_AUDIENCE,
        &tenant,
        roles,
        Duration::from_secs(600),
    )
    .expect("mint")
}

/// A tenant name no other test uses.
pub fn fresh_tenant() -> String {
    format!("t{:012x}", rand::random::<u64>() & 0xffff_ffff_ffff)
}
