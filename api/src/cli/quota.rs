//! `idemkey quota`: the operator's per-tenant overrides of the default
//! quotas. Quotas are the operator's, not the tenant's: there is no API
//! call for them, so a tenant's own admins cannot raise their limit. The
//! command writes the database directly (the same `IDEMKEY_DATABASE_URL`
//! as the servers), and every node picks a change up on its next quota
//! pass (`IDEMKEY_WORKER_INTERVAL`).

use anyhow::Context;
use clap::Subcommand;

use crate::config::Config;
use crate::domain::quota::{Limit, Limits};
use crate::domain::TenantId;
use crate::startup::open_store;
use crate::store::{Store, TenantQuota};

#[derive(Debug, Subcommand)]
pub enum QuotaCommand {
    /// Set a tenant's limits; a limit not given keeps its current setting.
    Set {
        #[arg(long)]
        tenant: String,
        /// Live keys: a whole number, `unlimited`, or `default` (follow
        /// IDEMKEY_QUOTA_MAX_KEYS).
        #[arg(long, value_parser = limit)]
        max_keys: Option<Limit>,
        /// Outcome bytes (database and archive together): a whole number
        /// (may end in KiB, MiB, GiB), `unlimited`, or `default`.
        #[arg(long, value_parser = limit)]
        max_outcome_bytes: Option<Limit>,
    },
    /// Remove a tenant's override: it follows the defaults again.
    Clear {
        #[arg(long)]
        tenant: String,
    },
    /// Print the defaults and every override, with what each tenant stores
    /// as last measured (tab-separated).
    Show,
}

fn limit(s: &str) -> Result<Limit, String> {
    Limit::parse(s).ok_or_else(|| {
        format!("expected a whole number (bytes may end in KiB, MiB or GiB), unlimited or default, got {s:?}")
    })
}

/// Runs the command; what it prints goes to standard output.
pub async fn run(config: &Config, command: QuotaCommand) -> anyhow::Result<String> {
    let store = open_store(config).await?;
    match command {
        QuotaCommand::Set {
            tenant,
            max_keys,
            max_outcome_bytes,
        } => {
            let tenant = TenantId::parse(&tenant).context("--tenant")?;
            let now = store.quota_of(&tenant).await?;
            let quota = TenantQuota {
                max_keys: max_keys
                    .or(now.as_ref().map(|q| q.max_keys))
                    .unwrap_or(Limit::Default),
                max_outcome_bytes: max_outcome_bytes
                    .or(now.as_ref().map(|q| q.max_outcome_bytes))
                    .unwrap_or(Limit::Default),
                tenant,
            };
            store.set_quota(&quota).await?;
            Ok(format!(
                "{}\tmax_keys={}\tmax_outcome_bytes={}\n",
                quota.tenant, quota.max_keys, quota.max_outcome_bytes
            ))
        }
        QuotaCommand::Clear { tenant } => {
            let tenant = TenantId::parse(&tenant).context("--tenant")?;
            let had = store.clear_quota(&tenant).await?;
            Ok(format!(
                "{tenant}\t{}\n",
                if had { "cleared" } else { "had no override" }
            ))
        }
        QuotaCommand::Show => show(&store, config.quota_defaults).await,
    }
}

async fn show(store: &Store, defaults: Limits) -> anyhow::Result<String> {
    let word = |l: Option<u64>| l.map_or_else(|| "unlimited".to_owned(), |n| n.to_string());
    let mut out = format!(
        "defaults\tmax_keys={}\tmax_outcome_bytes={}\n",
        word(defaults.max_keys),
        word(defaults.max_outcome_bytes)
    );
    let storage = store.all_storage().await?;
    for q in store.all_quotas().await? {
        let l = Limits::resolve(defaults, q.max_keys, q.max_outcome_bytes);
        let stored = storage.iter().find(|s| s.tenant == q.tenant).map_or_else(
            || "not measured".to_owned(),
            |s| {
                format!(
                    "keys={}\toutcome_bytes={}",
                    s.stored.keys,
                    s.stored.total_bytes()
                )
            },
        );
        out.push_str(&format!(
            "{}\tmax_keys={} ({})\tmax_outcome_bytes={} ({})\t{stored}\n",
            q.tenant,
            word(l.max_keys),
            q.max_keys,
            word(l.max_outcome_bytes),
            q.max_outcome_bytes,
        ));
    }
    Ok(out)
}
