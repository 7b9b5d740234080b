//! Optional persistence (`--data-dir`): an append-only log of JSON lines, one per committed
//! write, flushed with `fdatasync` before the write is acknowledged. At start the log is
//! replayed (a torn last line from a crash is ignored) and compacted into a fresh log holding
//! only the live objects, written to a temporary file and renamed into place, so a crash at
//! any moment leaves either the old or the new log, never an unreadable one.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use parking_lot::Mutex;
use serde_json::{Value, json};

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
    path: PathBuf,
}

impl Log {
    /// Replay and compact the log in `dir`, then open it for appending.
    pub fn open(dir: &Path) -> Result<(Log, Loaded), Error> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| Error::Io { path, source }
        };
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        let path = dir.join(LOG);
        let mut live = Objects::new();
        let mut last_rv = 0u64;
        if let Ok(f) = File::open(&path) {
            for line in BufReader::new(f).split(b'\n') {
                let Ok(line) = line else { break };
                let Ok(rec) = serde_json::from_slice::<Value>(&line) else {
                    break;
                };
                last_rv = last_rv.max(rec["rv"].as_u64().unwrap_or(0));
                if rec.get("t").is_none() {
                    continue;
                }
                let key = (
                    rec["t"].as_str().unwrap_or("").to_string(),
                    rec["ns"].as_str().unwrap_or("").to_string(),
                    rec["n"].as_str().unwrap_or("").to_string(),
                );
                match rec.get("o") {
                    Some(Value::Null) | None => {
                        live.remove(&key);
                    }
                    Some(o) => {
                        live.insert(key, o.clone());
                    }
                }
            }
        }
        let tmp = dir.join(TMP);
        {
            let mut f = File::create(&tmp).map_err(io(&tmp))?;
            let mut buf = serde_json::to_vec(&json!({"rv": last_rv})).unwrap_or_default();
            buf.push(b'\n');
            for ((t, ns, n), o) in &live {
                serde_json::to_writer(&mut buf, &json!({"t": t, "ns": ns, "n": n, "o": o}))
                    .unwrap_or_default();
                buf.push(b'\n');
            }
            f.write_all(&buf).map_err(io(&tmp))?;
            f.sync_all().map_err(io(&tmp))?;
        }
        std::fs::rename(&tmp, &path).map_err(io(&path))?;
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
        let file = OpenOptions::new()
            .append(true)
            .open(&path)
            .map_err(io(&path))?;
        Ok((
            Log {
                file: Mutex::new(file),
                path,
            },
            Loaded {
                objects: live,
                last_rv,
            },
        ))
    }

    /// Append one write at resourceVersion `rv` (`None`: deletion) and flush it to disk.
    pub fn append(&self, table: &str, ns: &str, name: &str, rv: u64, obj: Option<&[u8]>) {
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
        if let Err(e) = f.write_all(&line).and_then(|_| f.sync_data()) {
            tracing::error!("cannot append to {}: {e}", self.path.display());
        }
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
            log.append(
                "/configmaps",
                "ns",
                "a",
                1,
                Some(br#"{"metadata":{"name":"a"}}"#),
            );
            log.append(
                "/configmaps",
                "ns",
                "b",
                2,
                Some(br#"{"metadata":{"name":"b"}}"#),
            );
            log.append("/configmaps", "ns", "a", 3, None);
        }
        let mut f = OpenOptions::new()
            .append(true)
            .open(dir.path().join(LOG))
            .unwrap();
        f.write_all(br#"{"t":"/configmaps","ns":"ns","n":"c","o":{"meta"#)
            .unwrap();
        let (_, live) = Log::open(dir.path()).unwrap();
        let names: Vec<_> = live.objects.keys().map(|k| k.2.as_str()).collect();
        assert_eq!(names, vec!["b"]);
        assert_eq!(live.last_rv, 3, "the deletion's version is remembered");
        let (_, again) = Log::open(dir.path()).unwrap();
        assert_eq!(again.last_rv, 3, "compaction keeps it");
    }
}
