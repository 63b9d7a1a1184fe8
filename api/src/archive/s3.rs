//! The S3-compatible archive (aws-sdk-s3).
//!
//! Configured for any S3-compatible server, not only AWS:
//! - request checksums are calculated and response checksums validated only
//!   "when required" (recent SDKs add CRC checksums to every request by
//!   default, which some servers reject; we verify by read-back instead);
//! - with a custom endpoint (`AWS_ENDPOINT_URL`) the bucket goes in the path,
//!   not the host name (`http://host:3900/bucket/key`), which is what Garage,
//!   MinIO and most self-hosted stores expect;
//! - every attempt is bounded by a timeout and retried by the SDK's standard
//!   policy, so a dead store costs seconds, then an `ArchiveUnavailable`.
//!
//! Only `NoSuchKey` on a GET means `Missing`; every other failure of a read,
//! a missing bucket included, is `Unavailable`. `exists` uses HEAD, whose
//! 404 has no body and so cannot tell a missing key from a missing bucket:
//! it answers `false` for both, which is why start-up checks the bucket and
//! why reads (the path that could make a key look new) never rely on it.

use std::time::Duration;

use aws_sdk_s3::config::timeout::TimeoutConfig;
use aws_sdk_s3::config::{
    BehaviorVersion, Credentials, Region, RequestChecksumCalculation, ResponseChecksumValidation,
};
use aws_sdk_s3::error::{DisplayErrorContext, SdkError};
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::Client;
use bytes::Bytes;

use super::{ArchiveError, ArchiveUnavailable, S3Settings, SegmentName};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// One attempt at one request (segments are a few MiB at most).
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(20);
/// A whole operation, retries included.
const OPERATION_TIMEOUT: Duration = Duration::from_secs(45);
/// Used when neither the settings nor the SDK's chain name a region (common
/// with self-hosted stores, which often ignore it).
const FALLBACK_REGION: &str = "us-east-1";

#[derive(Clone)]
pub struct S3Archive {
    client: Client,
    bucket: String,
    prefix: String,
    endpoint: Option<String>,
}

impl S3Archive {
    /// A client for `bucket`; nothing is contacted here.
    pub async fn connect(bucket: &str, prefix: &str, settings: &S3Settings) -> Self {
        let mut loader = aws_config::defaults(BehaviorVersion::latest()).timeout_config(
            TimeoutConfig::builder()
                .connect_timeout(CONNECT_TIMEOUT)
                .operation_attempt_timeout(ATTEMPT_TIMEOUT)
                .operation_timeout(OPERATION_TIMEOUT)
                .build(),
        );
        if let Some(region) = &settings.region {
            loader = loader.region(Region::new(region.clone()));
        }
        if let Some(endpoint) = &settings.endpoint {
            loader = loader.endpoint_url(endpoint);
        }
        if let (Some(id), Some(secret)) = (&settings.access_key_id, &settings.secret_access_key) {
            loader = loader.credentials_provider(Credentials::new(
                id,
                secret,
                settings.session_token.clone(),
                None,
                "idemkey-environment",
            ));
        }
        let shared = loader.load().await;
        let mut config = aws_sdk_s3::config::Builder::from(&shared)
            .request_checksum_calculation(RequestChecksumCalculation::WhenRequired)
            .response_checksum_validation(ResponseChecksumValidation::WhenRequired)
            .force_path_style(settings.endpoint.is_some());
        if shared.region().is_none() {
            config = config.region(Region::new(FALLBACK_REGION));
        }
        Self {
            client: Client::from_conf(config.build()),
            bucket: bucket.to_owned(),
            prefix: prefix.to_owned(),
            endpoint: settings.endpoint.clone(),
        }
    }

    pub fn describe(&self) -> String {
        let at = self.endpoint.as_deref().unwrap_or("AWS");
        match self.prefix.as_str() {
            "" => format!("s3://{} at {at}", self.bucket),
            p => format!("s3://{}/{p} at {at}", self.bucket),
        }
    }

    /// The object key of segment `name`.
    fn key(&self, name: &SegmentName) -> String {
        match self.prefix.as_str() {
            "" => name.as_str().to_owned(),
            p => format!("{p}/{name}"),
        }
    }

    pub async fn check(&self) -> Result<(), ArchiveUnavailable> {
        self.client
            .head_bucket()
            .bucket(&self.bucket)
            .send()
            .await
            .map(|_| ())
            .map_err(|e| unavailable(&format!("bucket {} cannot be reached", self.bucket), e))
    }

    pub async fn put(&self, name: &SegmentName, bytes: Bytes) -> Result<(), ArchiveUnavailable> {
        self.client
            .put_object()
            .bucket(&self.bucket)
            .key(self.key(name))
            .content_length(bytes.len() as i64)
            .body(ByteStream::from(bytes))
            .send()
            .await
            .map(|_| ())
            .map_err(|e| unavailable(&format!("cannot write segment {name}"), e))
    }

    pub async fn read_all(&self, name: &SegmentName) -> Result<Bytes, ArchiveError> {
        self.get(name, None).await
    }

    pub async fn read_range(
        &self,
        name: &SegmentName,
        offset: u64,
        len: u64,
    ) -> Result<Bytes, ArchiveError> {
        if len == 0 {
            // No byte range can ask for nothing; still say whether it exists.
            return match self.exists(name).await? {
                true => Ok(Bytes::new()),
                false => Err(ArchiveError::Missing(name.clone())),
            };
        }
        let range = format!("bytes={offset}-{}", offset + len - 1);
        self.get(name, Some(range)).await
    }

    async fn get(&self, name: &SegmentName, range: Option<String>) -> Result<Bytes, ArchiveError> {
        let answer = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(self.key(name))
            .set_range(range)
            .send()
            .await;
        let object = match answer {
            Ok(object) => object,
            Err(e) if e.as_service_error().is_some_and(|s| s.is_no_such_key()) => {
                return Err(ArchiveError::Missing(name.clone()))
            }
            Err(e) => return Err(unavailable(&format!("cannot read segment {name}"), e).into()),
        };
        let body =
            object.body.collect().await.map_err(|e| {
                ArchiveUnavailable(format!("reading segment {name} broke off: {e}"))
            })?;
        Ok(body.into_bytes())
    }

    pub async fn delete(&self, name: &SegmentName) -> Result<(), ArchiveUnavailable> {
        // S3 answers a delete of an absent key with success.
        self.client
            .delete_object()
            .bucket(&self.bucket)
            .key(self.key(name))
            .send()
            .await
            .map(|_| ())
            .map_err(|e| unavailable(&format!("cannot delete segment {name}"), e))
    }

    pub async fn exists(&self, name: &SegmentName) -> Result<bool, ArchiveUnavailable> {
        match self
            .client
            .head_object()
            .bucket(&self.bucket)
            .key(self.key(name))
            .send()
            .await
        {
            Ok(_) => Ok(true),
            Err(e) if e.as_service_error().is_some_and(|s| s.is_not_found()) => Ok(false),
            Err(e) => Err(unavailable(&format!("cannot look up segment {name}"), e)),
        }
    }
}

fn unavailable<E, R>(what: &str, e: SdkError<E, R>) -> ArchiveUnavailable
where
    E: std::error::Error + 'static,
    R: std::fmt::Debug,
{
    ArchiveUnavailable(format!("{what}: {}", DisplayErrorContext(&e)))
}
