//! Roles and the verified caller. `admin` implies `client` and `viewer`;
//! `client` and `viewer` imply nothing beyond themselves (SPEC §4: client —
//! claim, owner calls, lookup, list; viewer — lookup, list, dashboard;
//! admin — everything of its tenant).
//!
//! `metrics` stands apart: it allows scraping `/metrics`, whose counts span
//! every tenant, and nothing else, and no other role implies it — a
//! tenant's admin must not see other tenants' traffic (SPEC §5).

use std::fmt;
use std::str::FromStr;

use crate::domain::TenantId;

/// One role a token may grant. Serialised as its lower-case name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Client,
    Viewer,
    Admin,
    Metrics,
}

impl Role {
    /// Every role, in a fixed order (the order [`RoleSet::iter`] yields).
    pub const ALL: [Role; 4] = [Role::Client, Role::Viewer, Role::Admin, Role::Metrics];

    /// The role with this exact (lower-case) name.
    pub fn parse(s: &str) -> Option<Role> {
        Self::ALL.into_iter().find(|role| role.as_str() == s)
    }

    pub fn as_str(&self) -> &'static str {
        match self {
            Role::Client => "client",
            Role::Viewer => "viewer",
            Role::Admin => "admin",
            Role::Metrics => "metrics",
        }
    }

    /// Whether an `admin` token may act as this role: every role of the
    /// tenant, not the cross-tenant `metrics`.
    fn implied_by_admin(self) -> bool {
        self != Role::Metrics
    }

    fn bit(self) -> u8 {
        1 << self as u8
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A role name that is not `client`, `viewer`, `admin` or `metrics`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown role {0:?}; expected client, viewer, admin or metrics")]
pub struct UnknownRole(pub String);

impl FromStr for Role {
    type Err = UnknownRole;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Role::parse(s).ok_or_else(|| UnknownRole(s.to_owned()))
    }
}

/// A small set of roles (a bit set; copying it is free).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RoleSet(u8);

impl RoleSet {
    pub fn has(&self, role: Role) -> bool {
        self.0 & role.bit() != 0
    }

    pub fn insert(&mut self, role: Role) {
        self.0 |= role.bit();
    }

    pub fn is_empty(&self) -> bool {
        self.0 == 0
    }

    /// Whether the set holds at least one of `any_of`, `admin` holding every
    /// role of its tenant.
    pub fn can(&self, any_of: &[Role]) -> bool {
        let admin = self.has(Role::Admin);
        any_of
            .iter()
            .any(|role| self.has(*role) || (admin && role.implied_by_admin()))
    }

    /// The roles in the set, in [`Role::ALL`] order.
    pub fn iter(&self) -> impl Iterator<Item = Role> + '_ {
        Role::ALL.into_iter().filter(|role| self.has(*role))
    }
}

impl FromIterator<Role> for RoleSet {
    fn from_iter<I: IntoIterator<Item = Role>>(roles: I) -> Self {
        let mut set = RoleSet::default();
        roles.into_iter().for_each(|role| set.insert(role));
        set
    }
}

/// Parses a comma-separated list such as `client,viewer` (the `--roles`
/// argument of `idemkey token`). Blank items are skipped; an unknown name is
/// an error.
impl FromStr for RoleSet {
    type Err = UnknownRole;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        s.split(',')
            .map(str::trim)
            .filter(|item| !item.is_empty())
            .map(Role::from_str)
            .collect()
    }
}

/// Comma-separated, in [`Role::ALL`] order: the inverse of `from_str`.
impl fmt::Display for RoleSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, role) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            f.write_str(role.as_str())?;
        }
        Ok(())
    }
}

/// The caller, as established by a verified token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub tenant: TenantId,
    pub roles: RoleSet,
    /// The token's `sub`, if it has one: who to name in audit records.
    pub subject: Option<String>,
}

impl Principal {
    /// Whether the caller holds at least one of `any_of`. An admin holds
    /// every role of its tenant; `metrics` only when the token names it.
    pub fn can(&self, any_of: &[Role]) -> bool {
        self.roles.can(any_of)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn principal(roles: &str) -> Principal {
        Principal {
            tenant: TenantId::parse("acme").unwrap(),
            roles: roles.parse().unwrap(),
            subject: None,
        }
    }

    #[test]
    fn role_names_round_trip_and_are_case_sensitive() {
        for role in Role::ALL {
            assert_eq!(Role::parse(role.as_str()), Some(role));
            assert_eq!(serde_json::to_value(role).unwrap(), role.as_str());
        }
        assert_eq!(Role::parse("Admin"), None);
        assert_eq!(Role::parse("root"), None);
    }

    #[test]
    fn role_sets_parse_and_print_comma_separated_lists() {
        let set: RoleSet = " viewer,client,,client ".parse().unwrap();
        assert_eq!(set.iter().collect::<Vec<_>>(), [Role::Client, Role::Viewer]);
        assert_eq!(set.to_string(), "client,viewer");
        assert_eq!("".parse::<RoleSet>().unwrap(), RoleSet::default());
        assert_eq!(
            "client,root".parse::<RoleSet>(),
            Err(UnknownRole("root".into()))
        );
    }

    #[test]
    fn admin_implies_every_role_of_its_tenant_but_not_metrics() {
        let admin = principal("admin");
        assert!(admin.can(&[Role::Client]));
        assert!(admin.can(&[Role::Viewer]));
        assert!(admin.can(&[Role::Admin]));
        assert!(!admin.can(&[Role::Metrics]));
    }

    #[test]
    fn metrics_allows_metrics_and_nothing_else() {
        let scraper = principal("metrics");
        assert!(scraper.can(&[Role::Metrics]));
        assert!(!scraper.can(&[Role::Client, Role::Viewer, Role::Admin]));
        let both: RoleSet = "admin,metrics".parse().unwrap();
        assert_eq!(both.to_string(), "admin,metrics");
    }

    #[test]
    fn client_and_viewer_imply_only_themselves() {
        let viewer = principal("viewer");
        assert!(viewer.can(&[Role::Client, Role::Viewer]));
        assert!(!viewer.can(&[Role::Client]));
        assert!(!viewer.can(&[Role::Admin]));
        let client = principal("client");
        assert!(!client.can(&[Role::Viewer, Role::Admin]));
    }

    #[test]
    fn a_principal_without_roles_can_do_nothing() {
        let nobody = principal("");
        assert!(nobody.roles.is_empty());
        assert!(!nobody.can(&Role::ALL));
    }
}
