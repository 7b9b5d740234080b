//! The log lines of `bosun`, in Kopf's formats (`--log-format plain|full|json`): a
//! `tracing-subscriber` layer that writes each event as one line to stderr, with the object
//! (`namespace`, `name` fields of the library's object lines) and what the spans around the
//! event say (`cause` of the cycle, `handler` of the call, `trace_id` when traced).
//!
//! - `plain`: Kopf's `%(message)s`, object lines prefixed `[namespace/name]`;
//! - `full` (the default, as Kopf's): `[2026-11-23 08:00:00,123] bosun.objects [INFO    ] …`;
//! - `json`: one object per line with Kopf's keys (`timestamp`, `severity`, `message`,
//!   `object`) and `cause`, `handler`, `trace_id` and any other field beside them.
//!
//! And Kopf's other logging flags: `-v`/`-d` (debug), `-q` (warnings and errors only),
//! `--log-prefix`/`--no-log-prefix` (the `[namespace/name]` prefix; on by default in the text
//! formats, off in JSON) and `--log-refkey` (the key of the object in JSON lines).

use std::fmt::Write as _;
use std::io::Write as _;

use bosun_controller::logs::ObjectRef;
use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber, span};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

/// Kopf's log formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// The message alone (object lines prefixed `[namespace/name]`).
    Plain,
    /// Time, logger and level before the message.
    #[default]
    Full,
    /// One JSON object per line.
    Json,
}

/// Kopf's logging flags, shared by `bosun run` and `bosun dev`.
#[derive(Debug, Clone, clap::Args)]
pub struct LogArgs {
    /// How log lines look, as Kopf's `--log-format`: `plain` (the message), `full` (time,
    /// logger, level and message) or `json` (one object per line with the object, cause,
    /// handler and trace id).
    #[arg(long, env = "BOSUN_LOG_FORMAT", value_enum, default_value_t)]
    pub log_format: LogFormat,
    /// Prefix object lines with `[namespace/name]`: the default in the plain and full formats;
    /// in JSON lines the message gets the prefix too.
    #[arg(long = "log-prefix", env = "BOSUN_LOG_PREFIX", overrides_with = "no_log_prefix")]
    pub log_prefix: bool,
    /// Object lines without the `[namespace/name]` prefix (the default in JSON lines).
    #[arg(long = "no-log-prefix", overrides_with = "log_prefix")]
    pub no_log_prefix: bool,
    /// The key of the object's reference in JSON lines.
    #[arg(long, env = "BOSUN_LOG_REFKEY", value_name = "KEY", default_value = "object")]
    pub log_refkey: String,
    /// Debug logging.
    #[arg(short, long, env = "BOSUN_VERBOSE")]
    pub verbose: bool,
    /// Debug logging (as -v; Kopf's `--debug`).
    #[arg(short, long, env = "BOSUN_DEBUG")]
    pub debug: bool,
    /// Warnings and errors only (-v and -d win).
    #[arg(short, long, env = "BOSUN_QUIET")]
    pub quiet: bool,
}

/// How much is logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verbosity {
    /// Warnings and errors (`-q`).
    Quiet,
    /// Info and above (the default).
    Normal,
    /// Debug lines too (`-v`, `-d`).
    Debug,
}

/// How lines are written: the format, whether object lines carry the `[namespace/name]`
/// prefix, and the key of the object in JSON lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Style {
    /// The format.
    pub format: LogFormat,
    /// Object lines prefixed `[namespace/name]`.
    pub prefix: bool,
    /// The key of the object in JSON lines.
    pub refkey: String,
}

impl LogArgs {
    /// How much these flags log: debug wins over quiet, as in Kopf.
    pub fn verbosity(&self) -> Verbosity {
        match (self.verbose || self.debug, self.quiet) {
            (true, _) => Verbosity::Debug,
            (false, true) => Verbosity::Quiet,
            (false, false) => Verbosity::Normal,
        }
    }

    /// Whether debug lines are logged.
    pub fn debugging(&self) -> bool {
        self.verbosity() == Verbosity::Debug
    }

    /// How these flags write lines.
    pub fn style(&self) -> Style {
        let prefix = match (self.log_prefix, self.no_log_prefix) {
            (true, _) => true,
            (_, true) => false,
            _ => self.log_format != LogFormat::Json,
        };
        Style { format: self.log_format, prefix, refkey: self.log_refkey.clone() }
    }
}

/// Sets up the log output as `args` say; `RUST_LOG`, when set and not empty, overrides the
/// levels. With
/// `OTEL_EXPORTER_OTLP_ENDPOINT` set, spans are exported too; the returned guard flushes them
/// when dropped.
pub fn init_tracing(args: &LogArgs) -> anyhow::Result<Option<crate::telemetry::Telemetry>> {
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let default = match args.verbosity() {
        Verbosity::Debug => "bosun_controller=debug,bosun=debug,info",
        Verbosity::Normal => "info,kube=warn,tower=warn,hyper=warn,h2=warn",
        Verbosity::Quiet => "warn",
    };
    let given = std::env::var("RUST_LOG").ok().filter(|v| !v.trim().is_empty());
    let filter =
        given.and_then(|v| tracing_subscriber::EnvFilter::try_new(v).ok()).unwrap_or_else(|| tracing_subscriber::EnvFilter::new(default));
    let (otel, guard) = crate::telemetry::layer()?.unzip();
    // The spans are the controller's own: the libraries' (kube, hyper, tonic) stay out of traces.
    let otel = otel.map(|l| l.with_filter(tracing_subscriber::filter::filter_fn(|m| m.target().starts_with("bosun"))));
    let _ = tracing_subscriber::registry().with(otel).with(filter).with(Lines::new(args.style())).try_init();
    Ok(guard)
}

/// The fields of an event or span, in the order given; the event's message apart.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Fields {
    message: Option<String>,
    fields: Vec<(&'static str, String)>,
}

impl Fields {
    fn get(&self, name: &str) -> Option<&str> {
        self.fields.iter().rev().find(|(n, _)| *n == name).map(|(_, v)| v.as_str())
    }
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "message" => self.message = Some(value.to_string()),
            // The spans' names and kinds for OpenTelemetry are not the line's.
            name if name.starts_with("otel.") => {}
            name => self.fields.push((name, value.to_string())),
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "message" => self.message = Some(format!("{value:?}")),
            name if name.starts_with("otel.") => {}
            name => self.fields.push((name, format!("{value:?}"))),
        }
    }
}

/// One line to write: what the event and its spans said.
#[derive(Debug, Clone, PartialEq)]
pub struct Record<'a> {
    /// When.
    pub time: DateTime<Utc>,
    /// `DEBUG`, `INFO`, `WARN`, `ERROR`, `TRACE`.
    pub level: &'a str,
    /// The event's target (a module path).
    pub target: &'a str,
    /// The spans' fields (outermost first), then the event's.
    pub fields: Fields,
}

/// Kopf's level names.
fn level_name(level: &str) -> &'static str {
    match level {
        "ERROR" => "ERROR",
        "WARN" => "WARNING",
        "INFO" => "INFO",
        "DEBUG" => "DEBUG",
        _ => "TRACE",
    }
}

/// Fields that are not printed as `key=value` in the text formats: they are the prefix or
/// the context of the line already.
const CONTEXT: [&str; 5] = ["namespace", "name", "cause", "handler", "trace_id"];

/// The line for `record` in `style`, without the newline.
pub fn render(style: &Style, record: &Record<'_>) -> String {
    let f = &record.fields;
    let mut message = f.message.clone().unwrap_or_default();
    // The library's object lines carry `namespace` and `name`.
    let object = f.get("name").map(|name| ObjectRef { namespace: f.get("namespace").unwrap_or_default().into(), name: name.into() });
    if let Some(o) = object.as_ref().filter(|_| style.prefix) {
        message = format!("{o} {message}");
    }
    let extras: Vec<&(&str, String)> = f.fields.iter().filter(|(n, _)| !CONTEXT.contains(n)).collect();
    let format = style.format;
    match format {
        LogFormat::Plain | LogFormat::Full => {
            let mut text = String::new();
            if format == LogFormat::Full {
                let logger = if object.is_some() {
                    "bosun.objects"
                } else if record.target.starts_with("bosun") {
                    "bosun"
                } else {
                    record.target
                };
                // Kopf's time format, parsed once rather than for every line.
                static TIME: std::sync::LazyLock<Vec<chrono::format::Item<'static>>> = std::sync::LazyLock::new(|| {
                    chrono::format::StrftimeItems::new("%Y-%m-%d %H:%M:%S,%3f").parse().expect("a valid strftime pattern")
                });
                let time = record.time.format_with_items(TIME.iter());
                let _ = write!(text, "[{time}] {logger:<20.20} [{:<8.8}] ", level_name(record.level));
            }
            text.push_str(&message);
            for (k, v) in extras {
                let _ = write!(text, " {k}={v}");
            }
            text
        }
        LogFormat::Json => {
            let mut line = Map::new();
            line.insert("timestamp".into(), json!(record.time.to_rfc3339_opts(chrono::SecondsFormat::Micros, false)));
            line.insert("severity".into(), json!(level_name(record.level).to_lowercase()));
            line.insert("message".into(), json!(message));
            if let Some(o) = object {
                let mut ref_ = Map::new();
                if !o.namespace.is_empty() {
                    ref_.insert("namespace".into(), json!(o.namespace));
                }
                ref_.insert("name".into(), json!(o.name));
                line.insert(style.refkey.clone(), Value::Object(ref_));
            }
            for key in ["cause", "handler", "trace_id"] {
                if let Some(v) = f.get(key) {
                    line.insert(key.into(), json!(v));
                }
            }
            for (k, v) in extras {
                line.entry(k.to_string()).or_insert_with(|| json!(v));
            }
            if !record.target.starts_with("bosun") {
                line.insert("logger".into(), json!(record.target));
            }
            Value::Object(line).to_string()
        }
    }
}

/// Writes every event as one line to stderr in its style.
pub struct Lines {
    style: Style,
}

impl Lines {
    /// A layer writing in `style`.
    pub fn new(style: Style) -> Lines {
        Lines { style }
    }
}

impl<S> Layer<S> for Lines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &span::Attributes<'_>, id: &span::Id, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(fields);
        }
    }

    fn on_record(&self, id: &span::Id, values: &span::Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id)
            && let Some(fields) = span.extensions_mut().get_mut::<Fields>()
        {
            values.record(fields);
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        if let Some(scope) = ctx.event_scope(event) {
            for span in scope.from_root() {
                if let Some(f) = span.extensions().get::<Fields>() {
                    fields.fields.extend(f.fields.iter().cloned());
                }
            }
        }
        event.record(&mut fields);
        let meta = event.metadata();
        let record = Record { time: Utc::now(), level: meta.level().as_str(), target: meta.target(), fields };
        let mut line = render(&self.style, &record);
        line.push('\n');
        // One write per line, so that lines of several threads never interleave.
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(level: &'static str, fields: &[(&'static str, &str)], message: &str) -> Record<'static> {
        Record {
            time: DateTime::parse_from_rfc3339("2026-11-23T08:00:00.123456Z").unwrap().with_timezone(&Utc),
            level,
            target: "bosun_controller::logs",
            fields: Fields { message: Some(message.into()), fields: fields.iter().map(|(k, v)| (*k, v.to_string())).collect() },
        }
    }

    /// Kopf's default style of `format`: prefixed object lines in text, none in JSON.
    fn kopfs(format: LogFormat) -> Style {
        Style { format, prefix: format != LogFormat::Json, refkey: "object".into() }
    }

    #[test]
    fn the_object_prefix_and_the_json_refkey_follow_kopfs_flags() {
        let handled = record("INFO", &[("namespace", "default"), ("name", "kopf-example-1")], "Handler 'create_fn' succeeded.");
        let style = |format, prefix, refkey: &str| Style { format, prefix, refkey: refkey.into() };
        let cases = [
            (style(LogFormat::Plain, false, "object"), "Handler 'create_fn' succeeded."),
            (
                style(LogFormat::Full, false, "object"),
                "[2026-11-23 08:00:00,123] bosun.objects        [INFO    ] Handler 'create_fn' succeeded.",
            ),
            (
                style(LogFormat::Json, true, "object"),
                r#"{"timestamp":"2026-11-23T08:00:00.123456+00:00","severity":"info","message":"[default/kopf-example-1] Handler 'create_fn' succeeded.","object":{"namespace":"default","name":"kopf-example-1"}}"#,
            ),
            (
                style(LogFormat::Json, false, "k8s"),
                r#"{"timestamp":"2026-11-23T08:00:00.123456+00:00","severity":"info","message":"Handler 'create_fn' succeeded.","k8s":{"namespace":"default","name":"kopf-example-1"}}"#,
            ),
        ];
        for (style, want) in cases {
            assert_eq!(render(&style, &handled), want, "{style:?}");
        }
    }

    #[test]
    fn lines_in_kopfs_three_formats() {
        let handled = record(
            "INFO",
            &[("cause", "create"), ("handler", "create_fn"), ("namespace", "default"), ("name", "kopf-example-1")],
            "Handler 'create_fn' succeeded.",
        );
        let plain = record("WARN", &[], "Default peering object is not found, falling back to the standalone mode.");
        let cluster_scoped = record("ERROR", &[("namespace", ""), ("name", "thing"), ("code", "409")], "Cannot write.");
        let cases = [
            (LogFormat::Plain, &handled, "[default/kopf-example-1] Handler 'create_fn' succeeded."),
            (LogFormat::Plain, &plain, "Default peering object is not found, falling back to the standalone mode."),
            (LogFormat::Plain, &cluster_scoped, "[thing] Cannot write. code=409"),
            (
                LogFormat::Full,
                &handled,
                "[2026-11-23 08:00:00,123] bosun.objects        [INFO    ] [default/kopf-example-1] Handler 'create_fn' succeeded.",
            ),
            (
                LogFormat::Full,
                &plain,
                "[2026-11-23 08:00:00,123] bosun                [WARNING ] Default peering object is not found, falling back to the standalone mode.",
            ),
            (
                LogFormat::Json,
                &handled,
                r#"{"timestamp":"2026-11-23T08:00:00.123456+00:00","severity":"info","message":"Handler 'create_fn' succeeded.","object":{"namespace":"default","name":"kopf-example-1"},"cause":"create","handler":"create_fn"}"#,
            ),
            (
                LogFormat::Json,
                &cluster_scoped,
                r#"{"timestamp":"2026-11-23T08:00:00.123456+00:00","severity":"error","message":"Cannot write.","object":{"name":"thing"},"code":"409"}"#,
            ),
        ];
        for (format, record, want) in cases {
            assert_eq!(render(&kopfs(format), record), want, "{format:?}");
        }
    }

    #[test]
    fn other_libraries_lines_name_their_logger() {
        let mut r = record("WARN", &[], "connection reset");
        r.target = "kube_client::client";
        assert_eq!(render(&kopfs(LogFormat::Full), &r), "[2026-11-23 08:00:00,123] kube_client::client  [WARNING ] connection reset");
        let json: Value = serde_json::from_str(&render(&kopfs(LogFormat::Json), &r)).unwrap();
        assert_eq!(json["logger"], "kube_client::client");
        assert_eq!(json["severity"], "warning");
    }
}
