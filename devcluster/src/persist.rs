//! Optional persistence (`--data-dir`): an append-only log of JSON lines, one per committed
//! write, flushed with `fdatasync` before the write is acknowledged. At start the log is
//! replayed (a torn last line from a crash is ignored) and compacted into a fresh log holding
//! only the live objects, written to a temporary file and renamed into place, so a crash at
//! any moment leaves either the old or the new log, never an unreadable one.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use serde_json::{Value, json};

pub use bosun_https::private::{create_private_dir, private_file, write_private};

/// Errors of opening or compacting the data directory.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The directory or a file in it could not be read or written.
    #[error("data directory {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

const LOG: &str = "objects.log";
const TMP: &str = "objects.log.tmp";

/// Live objects by (table, namespace, name), as replayed from the log.
pub type Objects = BTreeMap<(String, String, String), Value>;

/// What a replay found: the live objects and the last resourceVersion handed out (deleted
/// objects' versions included, so versions never go back after a restart).
#[derive(Debug, Default)]
pub struct Loaded {
    /// Live objects.
    pub objects: Objects,
    /// The highest resourceVersion written.
    pub last_rv: u64,
}

/// The append-only log.
pub struct Log {
    file: Mutex<File>,
    /// Serializes flushes; holds the sequence number flushed so far.
    synced: Mutex<u64>,
    /// Sequence number of the last appended record.
    written: AtomicU64,
    path: PathBuf,
    /// Bytes appended since the last compaction, and the size the compaction left.
    appended: AtomicU64,
    compacted: AtomicU64,
}

/// Compact when the appended bytes exceed this and twice the compacted size.
const COMPACT_AFTER: u64 = 64 * 1024 * 1024;

/// Write `objects` (with `last_rv` in a header line) to a temporary file beside `path`,
/// flush it and rename it over `path`; returns the new file's size.
fn rewrite<'a>(path: &Path, last_rv: u64, objects: impl Iterator<Item = (&'a str, &'a str, &'a str, &'a [u8])>) -> std::io::Result<u64> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = dir.join(TMP);
    let mut buf = serde_json::to_vec(&json!({"rv": last_rv})).unwrap_or_default();
    buf.push(b'\n');
    for (t, ns, n, o) in objects {
        buf.extend_from_slice(b"{\"t\":");
        buf.extend_from_slice(&serde_json::to_vec(t).unwrap_or_default());
        buf.extend_from_slice(b",\"ns\":");
        buf.extend_from_slice(&serde_json::to_vec(ns).unwrap_or_default());
        buf.extend_from_slice(b",\"n\":");
        buf.extend_from_slice(&serde_json::to_vec(n).unwrap_or_default());
        buf.extend_from_slice(b",\"o\":");
        buf.extend_from_slice(o);
        buf.extend_from_slice(b"}\n");
    }
    let mut f = private_file(&tmp)?;
    f.write_all(&buf)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)?;
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(buf.len() as u64)
}

impl Log {
    /// Replay and compact the log in `dir`, then open it for appending.
    pub fn open(dir: &Path) -> Result<(Log, Loaded), Error> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| Error::Io { path, source }
        };
        create_private_dir(dir).map_err(io(dir))?;
        let path = dir.join(LOG);
        // Per object, the record of the highest version wins: writers append after their
        // commit, so two writes of one object may reach the log in either order.
        let mut latest: BTreeMap<(String, String, String), (u64, Option<Value>)> = BTreeMap::new();
        let mut last_rv = 0u64;
        if let Ok(f) = File::open(&path) {
            for line in BufReader::new(f).split(b'\n') {
                let Ok(line) = line else { break };
                // As deep as stored objects go, in a record around them.
                let Ok(mut rec) = crate::depth::from_slice_within(&line, crate::depth::MAX_DEPTH + 1) else {
                    break;
                };
                let object = match rec.get_mut("o").map(Value::take) {
                    Some(Value::Null) | None => None,
                    Some(o) => Some(o),
                };
                // compacted records carry their version in the object only
                let rv = rec["rv"].as_u64().unwrap_or_else(|| object.as_ref().map_or(0, crate::meta::rv_of));
                last_rv = last_rv.max(rv);
                if rec.get("t").is_none() {
                    continue;
                }
                let key = (
                    rec["t"].as_str().unwrap_or("").to_string(),
                    rec["ns"].as_str().unwrap_or("").to_string(),
                    rec["n"].as_str().unwrap_or("").to_string(),
                );
                if latest.get(&key).is_none_or(|(seen, _)| *seen <= rv) {
                    latest.insert(key, (rv, object));
                }
            }
        }
        let live: Objects = latest.into_iter().filter_map(|(key, (_, object))| object.map(|o| (key, o))).collect();
        let encoded: Vec<(&str, &str, &str, Vec<u8>)> =
            live.iter().map(|((t, ns, n), o)| (t.as_str(), ns.as_str(), n.as_str(), serde_json::to_vec(o).unwrap_or_default())).collect();
        let size = rewrite(&path, last_rv, encoded.iter().map(|(t, ns, n, o)| (*t, *ns, *n, o.as_slice()))).map_err(io(&path))?;
        let file = OpenOptions::new().append(true).open(&path).map_err(io(&path))?;
        Ok((
            Log {
                file: Mutex::new(file),
                synced: Mutex::new(0),
                written: AtomicU64::new(0),
                path,
                appended: AtomicU64::new(0),
                compacted: AtomicU64::new(size),
            },
            Loaded { objects: live, last_rv },
        ))
    }

    /// Append one write at resourceVersion `rv` (`None`: deletion); returns the ticket to
    /// pass to [`Log::sync`] before the write is acknowledged.
    pub fn append(&self, table: &str, ns: &str, name: &str, rv: u64, obj: Option<&[u8]>) -> u64 {
        let mut line = Vec::with_capacity(obj.map_or(0, <[u8]>::len) + 64);
        line.extend_from_slice(b"{\"rv\":");
        line.extend_from_slice(rv.to_string().as_bytes());
        line.extend_from_slice(b",\"t\":");
        line.extend_from_slice(&serde_json::to_vec(table).unwrap_or_default());
        line.extend_from_slice(b",\"ns\":");
        line.extend_from_slice(&serde_json::to_vec(ns).unwrap_or_default());
        line.extend_from_slice(b",\"n\":");
        line.extend_from_slice(&serde_json::to_vec(name).unwrap_or_default());
        line.extend_from_slice(b",\"o\":");
        line.extend_from_slice(obj.unwrap_or(b"null"));
        line.extend_from_slice(b"}\n");
        let mut f = self.file.lock();
        if let Err(e) = f.write_all(&line) {
            tracing::error!("cannot append to {}: {e}", self.path.display());
        }
        self.appended.fetch_add(line.len() as u64, Ordering::Relaxed);
        self.written.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// Make sure the record with `ticket` is on disk (group commit: one `fdatasync` covers
    /// every record appended before it).
    pub fn sync(&self, ticket: u64) {
        let mut synced = self.synced.lock();
        if *synced >= ticket {
            return;
        }
        let upto = self.written.load(Ordering::SeqCst);
        let file = self.file.lock().try_clone();
        match file.and_then(|f| f.sync_data()) {
            Ok(()) => *synced = upto,
            Err(e) => tracing::error!("cannot flush {}: {e}", self.path.display()),
        }
    }

    /// Whether the log has grown enough to be worth compacting.
    pub fn wants_compaction(&self) -> bool {
        let appended = self.appended.load(Ordering::Relaxed);
        appended > COMPACT_AFTER && appended > 2 * self.compacted.load(Ordering::Relaxed)
    }

    /// Replace the log by one holding only `objects`. The caller must keep every writer out
    /// while this runs (the store holds all table locks), so no write falls between the
    /// snapshot and the new file.
    pub fn compact<'a>(&self, last_rv: u64, objects: impl Iterator<Item = (&'a str, &'a str, &'a str, &'a [u8])>) -> std::io::Result<()> {
        let mut synced = self.synced.lock();
        let mut f = self.file.lock();
        let size = rewrite(&self.path, last_rv, objects)?;
        *synced = self.written.load(Ordering::SeqCst);
        *f = OpenOptions::new().append(true).open(&self.path)?;
        self.appended.store(0, Ordering::Relaxed);
        self.compacted.store(size, Ordering::Relaxed);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_torn_last_line_is_ignored_and_deletions_replayed() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (log, live) = Log::open(dir.path()).unwrap();
            assert!(live.objects.is_empty());
            log.append("/configmaps", "ns", "a", 1, Some(br#"{"metadata":{"name":"a"}}"#));
            log.append("/configmaps", "ns", "b", 2, Some(br#"{"metadata":{"name":"b"}}"#));
            let t = log.append("/configmaps", "ns", "a", 3, None);
            log.sync(t);
        }
        let mut f = OpenOptions::new().append(true).open(dir.path().join(LOG)).unwrap();
        f.write_all(br#"{"t":"/configmaps","ns":"ns","n":"c","o":{"meta"#).unwrap();
        let (_, live) = Log::open(dir.path()).unwrap();
        let names: Vec<_> = live.objects.keys().map(|k| k.2.as_str()).collect();
        assert_eq!(names, vec!["b"]);
        assert_eq!(live.last_rv, 3, "the deletion's version is remembered");
        let (_, again) = Log::open(dir.path()).unwrap();
        assert_eq!(again.last_rv, 3, "compaction keeps it");
    }

    #[test]
    fn of_two_records_of_one_object_the_higher_version_wins_whatever_their_order() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (log, _) = Log::open(dir.path()).unwrap();
            log.append("/configmaps", "ns", "a", 5, Some(br#"{"metadata":{"name":"a","resourceVersion":"5"}}"#));
            log.append("/configmaps", "ns", "a", 4, Some(br#"{"metadata":{"name":"a","resourceVersion":"4"}}"#));
            log.append("/configmaps", "ns", "b", 7, None);
            let t = log.append("/configmaps", "ns", "b", 6, Some(br#"{"metadata":{"name":"b","resourceVersion":"6"}}"#));
            log.sync(t);
        }
        for _ in 0..2 {
            // the second time from the compacted log, whose records carry no version of their own
            let (_, live) = Log::open(dir.path()).unwrap();
            let objects: Vec<(&str, &Value)> =
                live.objects.iter().map(|(k, v)| (k.2.as_str(), &v["metadata"]["resourceVersion"])).collect();
            assert_eq!(objects, vec![("a", &json!("5"))]);
            assert_eq!(live.last_rv, 7);
        }
    }

    #[cfg(unix)]
    #[test]
    fn the_data_dir_the_log_and_the_kubeconfig_are_the_owners_alone() {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("data");
        let (log, _) = Log::open(&dir).unwrap();
        let t = log.append("/secrets", "ns", "s", 1, Some(br#"{"data":{"k":"c2VjcmV0"}}"#));
        log.sync(t);
        assert_eq!((mode(&dir), mode(&dir.join(LOG))), (0o700, 0o600));
        // A log written by an older version, world-readable, is made private when compacted.
        drop(log);
        std::fs::set_permissions(dir.join(LOG), std::fs::Permissions::from_mode(0o644)).unwrap();
        Log::open(&dir).unwrap();
        assert_eq!(mode(&dir.join(LOG)), 0o600);
        // An existing directory is the user's: its mode is left alone.
        let shared = root.path().join("shared");
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o755)).unwrap();
        Log::open(&shared).unwrap();
        assert_eq!(mode(&shared), 0o755);
        let kubeconfig = root.path().join("kubeconfig");
        std::fs::write(&kubeconfig, "old").unwrap();
        std::fs::set_permissions(&kubeconfig, std::fs::Permissions::from_mode(0o644)).unwrap();
        write_private(&kubeconfig, b"token: x").unwrap();
        assert_eq!((mode(&kubeconfig), std::fs::read_to_string(&kubeconfig).unwrap()), (0o600, "token: x".to_string()));
    }
}
