//! The bench's record of handler calls: each operator under test appends `NAME TIME_NS` per
//! call of its creation handler to the file `BENCH_RECORD` names, and the bench reads it back
//! for latencies and call counts. The Rust operators write it with [`Recorder`]; the Python
//! ones with the same two fields (`time.time_ns()`).

use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};

/// Nanoseconds since the epoch: the one clock the bench and every operator's handler
/// (`SystemTime` in Rust, `time.time_ns()` in Python) read.
pub fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
}

/// Appends calls to the record.
pub struct Recorder(Mutex<File>);

impl Recorder {
    /// The record named by `BENCH_RECORD`, opened for appending.
    pub fn from_env() -> Result<Recorder> {
        Recorder::open(Path::new(&std::env::var_os("BENCH_RECORD").context("BENCH_RECORD is not set")?))
    }

    /// The record at `path`, opened for appending.
    pub fn open(path: &Path) -> Result<Recorder> {
        let file = std::fs::OpenOptions::new().append(true).create(true).open(path);
        Ok(Recorder(Mutex::new(file.with_context(|| format!("cannot open {}", path.display()))?)))
    }

    /// Notes a call for the object `name`, now.
    pub fn note(&self, name: &str) {
        let now = now_ns();
        // A failed note only loses a latency sample; the bench then waits for it and says so.
        let _ = writeln!(self.0.lock().unwrap_or_else(|e| e.into_inner()), "{name} {now}");
    }
}

/// Reads a record: the first call per name, and the number of calls.
pub fn read(path: &Path) -> Result<(HashMap<String, u64>, u64)> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut first = HashMap::new();
    let mut calls = 0;
    for line in text.lines() {
        // A line being written may be incomplete: only whole lines count.
        let Some((name, t)) = line.split_once(' ') else { continue };
        let Ok(t) = t.trim().parse::<u64>() else { continue };
        calls += 1;
        first.entry(name.to_string()).or_insert(t);
    }
    Ok((first, calls))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_written_is_read_back_with_first_calls_and_count() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("record");
        let recorder = Recorder::open(&path).unwrap();
        let before = now_ns();
        recorder.note("a");
        recorder.note("b");
        recorder.note("a");
        let after = now_ns();
        // A line being written (the bench reads while operators write) is not a call yet.
        std::fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(b"c").unwrap();
        let (first, calls) = read(&path).unwrap();
        assert_eq!((calls, first.len()), (3, 2), "{first:?}");
        assert!((before..=after).contains(&first["a"]) && first["a"] <= first["b"], "{first:?}");
    }
}
