//! The controller's log lines: through `tracing`, object lines prefixed `[namespace/name]`
//! as in Kopf, and copied to an optional sink (tests and embedding read them there).

/// Which object a line is about.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ObjectRef {
    /// Namespace; empty for cluster-scoped objects.
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl ObjectRef {
    /// `namespace/name`, or `name` for a cluster-scoped object.
    pub fn path(&self) -> String {
        if self.namespace.is_empty() { self.name.clone() } else { format!("{}/{}", self.namespace, self.name) }
    }
}

/// Kopf's prefix of object lines: `[namespace/name]`, `[name]`.
impl std::fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.namespace.is_empty() { write!(f, "[{}]", self.name) } else { write!(f, "[{}/{}]", self.namespace, self.name) }
    }
}

/// Writes log lines.
#[derive(Debug, Clone, Default)]
pub struct Logger {
    sink: Option<LogSink>,
}

/// How important a line is, least first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Shown with `-v`.
    Debug,
    /// Normal progress.
    Info,
    /// Something to look at.
    Warn,
    /// Something failed.
    Error,
}

/// A line decided by pure code and written by the runtime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// Its level.
    pub level: Level,
    /// Its text, without the object prefix.
    pub text: String,
}

impl Level {
    /// The level of a `bosun.v1.LogLine` (unknown values count as info, the zero value).
    pub fn of_pb(level: i32) -> Level {
        use bosun_proto::v1::log_line::Level as Pb;
        match Pb::try_from(level).unwrap_or_default() {
            Pb::Debug => Level::Debug,
            Pb::Info => Level::Info,
            Pb::Warning => Level::Warn,
            Pb::Error => Level::Error,
        }
    }
}

impl Line {
    /// A line of `level`.
    pub fn new(level: Level, text: impl Into<String>) -> Line {
        Line { level, text: text.into() }
    }
}

impl Logger {
    /// A logger that also copies lines to `sink`.
    pub fn new(sink: Option<LogSink>) -> Logger {
        Logger { sink }
    }

    /// Whether a line of `level` is written anywhere (to `tracing`, whose filter says, or to
    /// the sink, which takes every line): lines that cost to build are built only then.
    pub fn enabled(&self, level: Level) -> bool {
        self.sink.is_some()
            || match level {
                Level::Debug => tracing::enabled!(tracing::Level::DEBUG),
                Level::Info => tracing::enabled!(tracing::Level::INFO),
                Level::Warn => tracing::enabled!(tracing::Level::WARN),
                Level::Error => tracing::enabled!(tracing::Level::ERROR),
            }
    }

    /// Writes lines decided elsewhere.
    pub fn lines(&self, obj: Option<&ObjectRef>, lines: &[Line]) {
        for l in lines {
            self.line(l.level, obj, &l.text);
        }
    }

    /// Writes one line of `level`.
    ///
    /// Object lines go to `tracing` with the fields `namespace` and `name` beside the message
    /// (the formatter of the `bosun` binary prefixes them, Kopf's way, or puts them in JSON).
    pub fn line(&self, level: Level, obj: Option<&ObjectRef>, msg: &str) {
        match (level, obj) {
            (Level::Debug, Some(o)) => tracing::debug!(namespace = %o.namespace, name = %o.name, "{msg}"),
            (Level::Info, Some(o)) => tracing::info!(namespace = %o.namespace, name = %o.name, "{msg}"),
            (Level::Warn, Some(o)) => tracing::warn!(namespace = %o.namespace, name = %o.name, "{msg}"),
            (Level::Error, Some(o)) => tracing::error!(namespace = %o.namespace, name = %o.name, "{msg}"),
            (Level::Debug, None) => tracing::debug!("{msg}"),
            (Level::Info, None) => tracing::info!("{msg}"),
            (Level::Warn, None) => tracing::warn!("{msg}"),
            (Level::Error, None) => tracing::error!("{msg}"),
        }
        if let Some(sink) = &self.sink {
            let text = match obj {
                Some(o) => format!("{o} {msg}"),
                None => msg.to_string(),
            };
            let tag = match level {
                Level::Debug => "DEBUG",
                Level::Info => "INFO",
                Level::Warn => "WARNING",
                Level::Error => "ERROR",
            };
            let _ = sink.0.send(format!("{tag} {text}"));
        }
    }

    /// A debug line (shown with `-v`).
    pub fn debug(&self, obj: Option<&ObjectRef>, msg: &str) {
        self.line(Level::Debug, obj, msg)
    }
    /// An info line.
    pub fn info(&self, obj: Option<&ObjectRef>, msg: &str) {
        self.line(Level::Info, obj, msg)
    }
    /// A warning.
    pub fn warn(&self, obj: Option<&ObjectRef>, msg: &str) {
        self.line(Level::Warn, obj, msg)
    }
    /// An error.
    pub fn error(&self, obj: Option<&ObjectRef>, msg: &str) {
        self.line(Level::Error, obj, msg)
    }
}

/// A duration as people write it: `3s`, `1.5s`, `250ms`, `2m`.
pub fn human(d: std::time::Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms.is_multiple_of(60_000) {
        format!("{}m", ms / 60_000)
    } else if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

/// A place that receives every log line the controller writes, as plain text
/// (`INFO [ns/name] Handler 'x' succeeded.`): for tests and embedding.
#[derive(Debug, Clone)]
pub struct LogSink(pub tokio::sync::mpsc::UnboundedSender<String>);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_prefixes_follow_kopf() {
        let cases = [("default", "kopf-example-1", "[default/kopf-example-1]"), ("", "cluster-thing", "[cluster-thing]")];
        for (ns, name, want) in cases {
            assert_eq!(ObjectRef { namespace: ns.into(), name: name.into() }.to_string(), want);
        }
    }

    #[test]
    fn lines_reach_the_sink_with_level_and_prefix() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let log = Logger::new(Some(LogSink(tx)));
        let obj = ObjectRef { namespace: "ns".into(), name: "n".into() };
        log.info(Some(&obj), "Handler 'x' succeeded.");
        log.warn(None, "careful");
        assert_eq!(rx.try_recv().unwrap(), "INFO [ns/n] Handler 'x' succeeded.");
        assert_eq!(rx.try_recv().unwrap(), "WARNING careful");
    }

    #[test]
    fn a_level_is_enabled_when_tracing_shows_it_or_a_sink_takes_every_line() {
        let quiet = tracing_subscriber::fmt().with_max_level(tracing::Level::INFO).finish();
        tracing::subscriber::with_default(quiet, || {
            let plain = Logger::new(None);
            assert!(!plain.enabled(Level::Debug));
            assert!(plain.enabled(Level::Info));
            let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
            assert!(Logger::new(Some(LogSink(tx))).enabled(Level::Debug), "the sink takes every line");
        });
        let verbose = tracing_subscriber::fmt().with_max_level(tracing::Level::DEBUG).finish();
        tracing::subscriber::with_default(verbose, || assert!(Logger::new(None).enabled(Level::Debug)));
    }

    #[test]
    fn durations_read_as_people_write_them() {
        let cases = [(250, "250ms"), (3000, "3s"), (1500, "1.5s"), (120_000, "2m"), (90_000, "90s")];
        for (ms, want) in cases {
            assert_eq!(human(std::time::Duration::from_millis(ms)), want);
        }
    }
}
