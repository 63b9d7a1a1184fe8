//! The archive's contract, one set of bodies run against both
//! implementations: a local directory, and a real S3-compatible store
//! (Garage, started by `scripts/garage.sh`). Each test gets a fresh
//! directory or a fresh prefix in the shared bucket.
//!
//! Then what only one side can show: S3 with the store stopped answers
//! `Unavailable`, never `Missing`; a local write is never visible half-done.

use bytes::Bytes;
use idemkey_api::archive::{
    Archive, ArchiveError, ArchiveLocation, LocalDir, S3Settings, SegmentInfo, SegmentName,
};
use idemkey_tests::garage::{shared_garage, GarageServer};

async fn local_dir() -> Archive {
    let dir = std::env::temp_dir().join(format!("archive-{:016x}", rand::random::<u64>()));
    let archive = Archive::open(&ArchiveLocation::LocalDir(dir))
        .await
        .unwrap();
    archive.check().await.expect("a writable directory");
    archive
}

fn fresh_prefix() -> String {
    format!("contract/{:016x}", rand::random::<u64>())
}

async fn s3_at(bucket: &str, prefix: &str, settings: S3Settings) -> Archive {
    let location = ArchiveLocation::S3 {
        bucket: bucket.to_owned(),
        prefix: prefix.to_owned(),
        settings,
    };
    Archive::open(&location).await.unwrap()
}

async fn s3() -> Archive {
    let garage = shared_garage();
    let archive = s3_at(&garage.bucket, &fresh_prefix(), garage.settings).await;
    archive
        .check()
        .await
        .expect("Garage must answer (run scripts/garage.sh)");
    archive
}

/// Bytes that differ at every offset, so a misplaced range shows.
fn payload(len: usize) -> Bytes {
    let seed = rand::random::<u8>();
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add((i >> 8) as u8) ^ seed)
        .collect::<Vec<u8>>()
        .into()
}

async fn a_segment_reads_back_byte_for_byte_by_range(archive: Archive) {
    // Arrange
    let name = SegmentName::generate();
    let bytes = payload(10_000);

    // Act
    let info = archive.put_segment(&name, bytes.clone()).await.unwrap();

    // Assert
    assert_eq!(info, SegmentInfo::of(name.clone(), &bytes));
    assert_eq!(info.len, 10_000);
    assert!(archive.exists(&name).await.unwrap());
    for (offset, len) in [
        (0, 100),
        (4321, 1000),
        (9_900, 100),
        (0, 10_000),
        (9_999, 1),
    ] {
        let read = archive.read_range(&name, offset, len).await.unwrap();
        let want = &bytes[offset as usize..(offset + len) as usize];
        assert_eq!(&read[..], want, "range {offset}+{len}");
    }
    archive.verify(&info).await.unwrap();
}

async fn the_same_bytes_under_two_names_are_two_segments(archive: Archive) {
    // Arrange
    let (first, second) = (SegmentName::generate(), SegmentName::generate());
    let bytes = payload(2_048);

    // Act
    let a = archive.put_segment(&first, bytes.clone()).await.unwrap();
    let b = archive.put_segment(&second, bytes.clone()).await.unwrap();
    archive.delete(&first).await.unwrap();

    // Assert: one deleted, the other intact.
    assert_eq!(a.sha256, b.sha256);
    assert!(!archive.exists(&first).await.unwrap());
    assert!(matches!(
        archive.read_range(&first, 0, 10).await,
        Err(ArchiveError::Missing(n)) if n == first
    ));
    assert!(archive.exists(&second).await.unwrap());
    let read = archive.read_range(&second, 0, 2_048).await.unwrap();
    assert_eq!(read, bytes);
}

async fn a_missing_segment_is_reported_missing(archive: Archive) {
    // Arrange
    let name = SegmentName::generate();

    // Act
    let read = archive.read_range(&name, 0, 16).await;
    let verified = archive.verify(&SegmentInfo::of(name.clone(), b"x")).await;

    // Assert
    assert!(
        matches!(&read, Err(ArchiveError::Missing(n)) if *n == name),
        "{read:?}"
    );
    assert!(
        matches!(verified, Err(ArchiveError::Missing(_))),
        "{verified:?}"
    );
    assert!(!archive.exists(&name).await.unwrap());
    // Deleting what is not there succeeds: cleanup may run twice.
    archive.delete(&name).await.unwrap();
}

async fn a_wrong_length_or_checksum_is_caught(archive: Archive) {
    // Arrange
    let name = SegmentName::generate();
    let bytes = payload(1_000);
    let info = archive.put_segment(&name, bytes).await.unwrap();
    let longer = SegmentInfo {
        len: info.len + 1,
        ..info.clone()
    };
    let mut other_sum = info.clone();
    other_sum.sha256[0] ^= 1;

    // Act
    let wrong_len = archive.verify(&longer).await;
    let wrong_sum = archive.verify(&other_sum).await;
    let past_the_end = archive.read_range(&name, 990, 20).await;
    let beyond = archive.read_range(&name, 2_000, 10).await;

    // Assert: failures, never "missing", never a short answer.
    for (what, result) in [("length", wrong_len), ("sha256", wrong_sum)] {
        match result {
            Err(ArchiveError::Unavailable(e)) => assert!(e.0.contains(what), "{e}"),
            other => panic!("{what}: expected Unavailable, got {other:?}"),
        }
    }
    for result in [past_the_end, beyond] {
        assert!(
            matches!(result, Err(ArchiveError::Unavailable(_))),
            "{result:?}"
        );
    }
}

macro_rules! on_every_archive {
    ($($name:ident),* $(,)?) => {
        mod local_dir {
            $(
                #[tokio::test]
                async fn $name() {
                    super::$name(super::local_dir().await).await
                }
            )*
        }
        mod s3 {
            $(
                #[tokio::test]
                async fn $name() {
                    super::$name(super::s3().await).await
                }
            )*
        }
    };
}

on_every_archive!(
    a_segment_reads_back_byte_for_byte_by_range,
    the_same_bytes_under_two_names_are_two_segments,
    a_missing_segment_is_reported_missing,
    a_wrong_length_or_checksum_is_caught,
);

fn assert_unavailable<T: std::fmt::Debug>(what: &str, result: Result<T, ArchiveError>) {
    assert!(
        matches!(result, Err(ArchiveError::Unavailable(_))),
        "{what}: expected Unavailable, got {result:?}"
    );
}

#[tokio::test]
async fn s3_with_the_store_stopped_is_unavailable_never_missing() {
    // Arrange: a private node holding one segment, then killed.
    let garage = GarageServer::start();
    let target = garage.target.clone();
    let archive = s3_at(&target.bucket, "stop-test", target.settings).await;
    let written = SegmentName::generate();
    archive.put_segment(&written, payload(512)).await.unwrap();
    garage.stop();

    // Act / Assert: neither the written segment nor a never-written one is
    // ever reported missing.
    let never_written = SegmentName::generate();
    assert_unavailable("read", archive.read_range(&written, 0, 10).await);
    assert_unavailable(
        "read absent",
        archive.read_range(&never_written, 0, 10).await,
    );
    assert_unavailable(
        "verify",
        archive
            .verify(&SegmentInfo::of(written.clone(), b"x"))
            .await,
    );
    let put = archive.put_segment(&never_written, payload(8)).await;
    assert!(put.is_err(), "{put:?}");
    assert!(archive.exists(&written).await.is_err());
    assert!(archive.delete(&written).await.is_err());
    assert!(archive.check().await.is_err());
}

#[tokio::test]
async fn s3_at_a_closed_port_is_unavailable() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut settings = shared_garage().settings;
    settings.endpoint = Some(format!("http://127.0.0.1:{port}"));
    let archive = s3_at("idemkey-test", "closed", settings).await;

    assert_unavailable(
        "read",
        archive.read_range(&SegmentName::generate(), 0, 1).await,
    );
}

#[tokio::test]
async fn s3_with_an_unknown_bucket_is_unavailable_not_missing() {
    let garage = shared_garage();
    let archive = s3_at("idemkey-no-such-bucket", "p", garage.settings).await;

    assert!(archive.check().await.is_err());
    assert_unavailable(
        "read",
        archive.read_range(&SegmentName::generate(), 0, 1).await,
    );
}

#[tokio::test]
async fn s3_objects_live_under_the_configured_prefix() {
    // Arrange
    let garage = shared_garage();
    let prefix = fresh_prefix();
    let archive = s3_at(&garage.bucket, &prefix, garage.settings.clone()).await;
    let whole_bucket = s3_at(&garage.bucket, "", garage.settings).await;
    let name = SegmentName::generate();

    // Act
    archive.put_segment(&name, payload(64)).await.unwrap();

    // Assert
    let full = SegmentName::parse(&format!("{prefix}/{name}")).unwrap();
    assert!(whole_bucket.exists(&full).await.unwrap());
    assert!(!whole_bucket.exists(&name).await.unwrap());
}

#[tokio::test]
async fn a_local_write_is_never_visible_half_done() {
    // Arrange: a segment large enough that writing it takes a while.
    let archive = local_dir().await;
    let Archive::LocalDir(dir) = &archive else {
        unreachable!()
    };
    let dir: LocalDir = dir.clone();
    let name = SegmentName::generate();
    let path = dir.path_of(&name);
    let bytes = payload(32 << 20);
    let len = bytes.len() as u64;

    // Act: write while watching the final name.
    let writer = {
        let (archive, name) = (archive.clone(), name.clone());
        tokio::spawn(async move { archive.put_segment(&name, bytes).await })
    };
    let (mut looks, mut partial) = (0u64, None);
    while !writer.is_finished() {
        if let Ok(meta) = std::fs::metadata(&path) {
            looks += 1;
            if meta.len() != len {
                partial.get_or_insert(meta.len());
            }
        }
        tokio::task::yield_now().await;
    }
    writer.await.unwrap().unwrap();

    // Assert: the final name only ever held the whole segment, and no
    // temporary file is left beside it.
    assert_eq!(
        partial, None,
        "a partial file at the final name ({looks} looks)"
    );
    let entries: Vec<_> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(
        entries,
        vec![path.file_name().unwrap().to_str().unwrap().to_owned()]
    );
}

#[tokio::test]
async fn a_leftover_temporary_file_is_not_a_segment() {
    // Arrange: what a crash between write and rename leaves behind.
    let archive = local_dir().await;
    let Archive::LocalDir(dir) = &archive else {
        unreachable!()
    };
    let name = SegmentName::generate();
    let path = dir.path_of(&name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let leftover = path.with_file_name(format!(
        ".{}.0123456789abcdef.tmp",
        path.file_name().unwrap().to_str().unwrap()
    ));
    std::fs::write(&leftover, b"half").unwrap();

    // Act / Assert: the segment itself is absent, and the temporary file
    // cannot be named as one.
    assert!(!archive.exists(&name).await.unwrap());
    assert!(matches!(
        archive.read_range(&name, 0, 4).await,
        Err(ArchiveError::Missing(_))
    ));
    let relative = leftover.strip_prefix(dir.root()).unwrap().to_str().unwrap();
    assert!(SegmentName::parse(relative).is_err());
}
