//! Structured logs through `tracing`, and optional OpenTelemetry export of
//! the per-request spans.
//!
//! - Logs: `RUST_LOG` filters (default `info`); `IDEMKEY_LOG_FORMAT=json`
//!   switches to one JSON object per line. Colours only when standard error
//!   is a terminal, so piped logs stay parseable.
//! - Traces: **off unless configured** with the standard
//!   `OTEL_EXPORTER_OTLP_ENDPOINT` (the collector's base URL; spans go to
//!   its `/v1/traces`) or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the full
//!   URL). Then every span the log filter lets through is also exported
//!   over OTLP/HTTP with protobuf bodies, in batches from a background
//!   thread (the other standard `OTEL_*` variables tune it:
//!   `OTEL_SERVICE_NAME`, `OTEL_EXPORTER_OTLP_HEADERS`,
//!   `OTEL_BSP_SCHEDULE_DELAY`, …; `OTEL_SDK_DISABLED=true` turns it off).
//!   With neither endpoint set nothing is built: no exporter, no thread,
//!   no connection attempt.
//! - What a request span carries: its `request_id`, `http.request.method`,
//!   `http.route` (the matched pattern, never the concrete path: keys are
//!   the caller's data), `http.response.status_code` and the `tenant` from
//!   the verified token or session. Never a token, an owner token or a
//!   body: no span field holds one (see `routes::request_id`).
//! - [`Telemetry::shutdown`] exports what is still buffered; the server
//!   calls it after its graceful stop, so the last requests' spans are not
//!   lost.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig as _};
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::Resource;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{EnvFilter, Layer};

/// Whether spans are exported: the request middleware records the fields
/// only OpenTelemetry needs (route, status, tenant) only then, so logging
/// alone pays nothing for them.
static EXPORTING: AtomicBool = AtomicBool::new(false);

/// Whether this process exports spans.
pub fn exporting() -> bool {
    EXPORTING.load(Ordering::Relaxed)
}

/// Records the caller's tenant on the current request span, when spans
/// are exported.
pub fn record_tenant(tenant: &crate::domain::TenantId) {
    if exporting() {
        tracing::Span::current().record("tenant", tenant.as_str());
    }
}

/// Renames an exported span once its name is known (a request's, after
/// routing): OpenTelemetry fixes a span's name when it starts, before the
/// route matched, so the `otel.name` field would come too late.
pub fn rename(span: &tracing::Span, name: String) {
    use opentelemetry::trace::TraceContextExt as _;
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;
    span.context().span().update_name(name);
}

/// What `init` set up; keep it until the process ends.
#[must_use = "dropping it loses nothing, but shutdown() flushes the spans"]
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// Exports the spans still buffered and stops the exporter (no-op when
    /// export is off). Blocks until the batch is sent or times out.
    pub fn shutdown(self) {
        if let Some(provider) = self.provider {
            if let Err(e) = provider.shutdown() {
                tracing::warn!(error = %e, "OpenTelemetry export could not flush on shutdown");
            }
        }
    }
}

/// The OTLP endpoint configured by the standard variables, if any (an
/// empty value counts as unset).
fn endpoint(var: &impl Fn(&str) -> Option<String>) -> Option<String> {
    let set = |name: &str| var(name).filter(|v| !v.trim().is_empty());
    if set("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
        return None;
    }
    set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").or_else(|| set("OTEL_EXPORTER_OTLP_ENDPOINT"))
}

/// Starts logging, and span export when an endpoint is configured. A second
/// call (tests) keeps the first subscriber.
pub fn init() -> Telemetry {
    let filter = || EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let ansi = std::io::stderr().is_terminal();
    let fmt = if std::env::var("IDEMKEY_LOG_FORMAT").as_deref() == Ok("json") {
        tracing_subscriber::fmt::layer()
            .json()
            .with_ansi(ansi)
            .with_writer(std::io::stderr)
            .boxed()
    } else {
        tracing_subscriber::fmt::layer()
            .with_ansi(ansi)
            .with_writer(std::io::stderr)
            .boxed()
    };
    let endpoint = endpoint(&|name| std::env::var(name).ok());
    let (provider, failure) = match endpoint.as_deref().map(provider) {
        Some(Ok(p)) => (Some(p), None),
        Some(Err(e)) => (None, Some(e)),
        None => (None, None),
    };
    let otel = provider.as_ref().map(|p| {
        tracing_opentelemetry::layer()
            .with_tracer(p.tracer("idemkey"))
            .with_filter(filter())
    });
    let installed = tracing_subscriber::registry()
        .with(fmt.with_filter(filter()))
        .with(otel)
        .try_init()
        .is_ok();
    if let Some(e) = failure {
        tracing::error!(error = %e, "OpenTelemetry export is configured but could not start; spans are not exported");
    }
    let provider = provider.filter(|_| installed);
    match (&provider, &endpoint) {
        (Some(_), Some(url)) => {
            EXPORTING.store(true, Ordering::Relaxed);
            tracing::info!(endpoint = %redact_endpoint(url), "OpenTelemetry export on (OTLP/HTTP, protobuf)");
        }
        _ if installed => tracing::debug!("OpenTelemetry export off"),
        _ => {}
    }
    Telemetry { provider }
}

/// The tracer provider exporting to the configured endpoint in batches.
fn provider(_endpoint: &str) -> anyhow::Result<SdkTracerProvider> {
    // The exporter reads the endpoint (and headers, timeout) from the
    // standard variables itself, with the specification's rules for
    // appending `/v1/traces`.
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .build()?;
    let service = std::env::var("OTEL_SERVICE_NAME")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "idemkey".to_owned());
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(Resource::builder().with_service_name(service).build())
        .build())
}

/// The endpoint without credentials a URL may carry (`user:pass@`).
fn redact_endpoint(url: &str) -> String {
    crate::store::redact(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn export_is_on_only_when_an_endpoint_is_set() {
        let vars = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        assert_eq!(endpoint(&vars(&[])), None);
        assert_eq!(
            endpoint(&vars(&[("OTEL_EXPORTER_OTLP_ENDPOINT", " ")])),
            None
        );
        assert_eq!(
            endpoint(&vars(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318")])).as_deref(),
            Some("http://c:4318")
        );
        assert_eq!(
            endpoint(&vars(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
                (
                    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                    "http://t:4318/v1/traces"
                ),
            ]))
            .as_deref(),
            Some("http://t:4318/v1/traces")
        );
        assert_eq!(
            endpoint(&vars(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
                ("OTEL_SDK_DISABLED", "true"),
            ])),
            None
        );
    }
}
