//! Building and running the server. Start-up takes a bound listener so tests
//! can bind port 0 and learn the port.

use std::net::TcpListener;
use std::sync::Arc;

use actix_web::dev::Server;
use actix_web::{web, App, HttpServer};
use anyhow::Context;
use secrecy::ExposeSecret;
use utoipa_actix_web::AppExt;

use crate::archive::Archive;
use crate::auth::Verifier;
use crate::cache::OutcomeCache;
use crate::config::Config;
use crate::domain::EffectSecret;
use crate::engine::Engine;
use crate::metrics::Metrics;
use crate::ratelimit::TenantLimiter;
use crate::routes::{self, AppState};
use crate::store::{redact, Store};
use crate::usage::Usage;
use crate::workers::Workers;

/// Extra routes mounted beside the API (the dashboard), given the
/// configuration (the dashboard takes its session keys from it).
pub type Mount = fn(&mut web::ServiceConfig, &Config);

pub struct Application {
    port: u16,
    server: Server,
    /// The private `/metrics` listener (`IDEMKEY_METRICS_LISTEN`), if any.
    metrics_server: Option<(u16, Server)>,
    usage: Usage,
    workers: Workers,
    engine: Engine,
}

impl Application {
    pub async fn build(
        config: &Config,
        listener: TcpListener,
        mount: Mount,
    ) -> anyhow::Result<Self> {
        let store = open_store(config).await?;
        let archive = open_archive(config).await?;
        let verifier = Arc::new(Verifier::new(&config.auth_settings())?);
        let secret = EffectSecret::new(config.effect_secret.expose_secret().to_vec());
        let metrics = Arc::new(Metrics::new());
        let cache = open_cache(config, &secret, metrics.clone()).await?;
        let engine = Engine::new(store.clone(), secret, cache, archive, metrics)
            .with_quota_defaults(config.quota_defaults);
        engine.listen_for_key_events();
        let usage = Usage::new(store);
        let workers = Workers::start(&engine, &usage, config);
        let quota_engine = engine.clone();
        let limiter = config.tenant_rate_limit.map(|calls| {
            let limiter = TenantLimiter::per_second(calls);
            limiter.spawn_forgetting();
            tracing::info!(calls_per_second = calls, "per-tenant rate limit on");
            limiter
        });
        let state = web::Data::new(AppState {
            engine,
            verifier,
            usage: usage.clone(),
            limiter,
        });
        let metrics_server = match &config.metrics_listen {
            Some(wanted) => {
                let listener = TcpListener::bind(wanted).with_context(|| {
                    format!("IDEMKEY_METRICS_LISTEN: cannot listen on {wanted}")
                })?;
                let addr = listener.local_addr()?;
                let server = routes::metrics::private_server(state.clone(), listener)?;
                // Logged before "idemkey listening", which tests wait for.
                tracing::info!(%addr, "idemkey metrics listening");
                Some((addr.port(), server))
            }
            None => None,
        };
        let addr = listener.local_addr()?;
        let port = addr.port();
        let mount_config = Arc::new(config.clone());
        let server = HttpServer::new(move || {
            App::new()
                // Outermost: every answer, the dashboard's and 404s included.
                .wrap(actix_web::middleware::from_fn(
                    routes::request_id::middleware,
                ))
                .app_data(state.clone())
                .into_utoipa_app()
                .configure(routes::configure)
                .into_app()
                .configure(|cfg| mount(cfg, &mount_config))
                .default_service(web::to(routes::not_found))
        })
        .listen(listener)?
        .run();
        // Tests and scripts wait for this line to learn the bound port.
        tracing::info!(%addr, "idemkey listening");
        Ok(Self {
            port,
            server,
            metrics_server,
            usage,
            workers,
            engine: quota_engine,
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The port of the private `/metrics` listener, when one was configured.
    pub fn metrics_port(&self) -> Option<u16> {
        self.metrics_server.as_ref().map(|(port, _)| *port)
    }

    /// This node's usage counts (tests flush them explicitly).
    pub fn usage(&self) -> Usage {
        self.usage.clone()
    }

    /// This node's engine (tests run a quota pass explicitly).
    pub fn engine(&self) -> Engine {
        self.engine.clone()
    }

    /// Serves until a signal: SIGTERM stops accepting connections and lets
    /// in-flight requests finish (up to 30 s); SIGINT and SIGQUIT stop at once.
    /// The workers stop after the server, and pending usage counts are
    /// flushed once more.
    /// The metrics listener stops with the API listener.
    pub async fn run_until_stopped(self) -> std::io::Result<()> {
        let metrics = self.metrics_server.map(|(_, server)| {
            let handle = server.handle();
            (handle, tokio::spawn(server))
        });
        let served = self.server.await;
        if let Some((handle, task)) = metrics {
            handle.stop(false).await;
            let _ = task.await;
        }
        self.workers.stop().await;
        served
    }
}

/// The outcome cache: in-process, with Redis behind it when configured.
/// Redis being down at start-up is logged, not fatal: it is only a cache.
async fn open_cache(
    config: &Config,
    secret: &EffectSecret,
    metrics: Arc<Metrics>,
) -> anyhow::Result<OutcomeCache> {
    let cache = match (&config.redis_url, config.cache) {
        (_, false) => OutcomeCache::off(metrics),
        (None, true) => OutcomeCache::in_process(metrics),
        (Some(url), true) => {
            OutcomeCache::redis(url.expose_secret(), &secret.deployment_tag(), metrics)?
        }
    };
    match (&cache, &config.redis_url.as_ref().filter(|_| config.cache)) {
        (OutcomeCache::Redis { shared, .. }, Some(url)) => {
            let reachable = shared.start().await;
            tracing::info!(cache = cache.describe(), redis = %redact(url.expose_secret()), reachable, "cache ready");
        }
        _ => tracing::info!(cache = cache.describe(), "cache ready"),
    }
    Ok(cache)
}

/// The archive of tiered outcomes. An object store that cannot be reached
/// at start-up is logged, not fatal: only reads of tiered keys need it, and
/// they answer 503 until it is back.
async fn open_archive(config: &Config) -> anyhow::Result<Archive> {
    let archive = Archive::open(&config.archive).await?;
    match archive.check().await {
        Ok(()) => tracing::info!(archive = %archive.describe(), "archive ready"),
        Err(e) => tracing::warn!(
            archive = %archive.describe(),
            error = %e,
            "archive not reachable; reads of tiered keys will answer 503 until it is"
        ),
    }
    Ok(archive)
}

/// Connects to the configured database and brings its schema up to date.
pub async fn open_store(config: &Config) -> anyhow::Result<Store> {
    let url = config.database_url.expose_secret();
    let store = Store::connect_tuned(url, config.database_pool, config.batch_max).await?;
    store
        .migrate()
        .await
        .with_context(|| format!("preparing the database at {}", redact(url)))?;
    tracing::info!(backend = store.backend_name(), url = %redact(url), "store ready");
    Ok(store)
}
