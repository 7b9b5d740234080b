//! Operator settings from the handler servers: those a server holds when described (Kopf's
//! `kopf.operator(settings=…)`, `KopfRunner(settings=…)`), servers in order, then those its
//! startup handlers set (Kopf's `settings` kwarg of `on.startup`), in the order the handlers
//! ran, a later source's over an earlier one's: checked and applied over the controller's
//! [`Settings`] before it peers, serves admission or watches anything. A setting also given
//! explicitly (a flag or its `BOSUN_*` variable) wins, and the log says so; a bad value is an
//! error line naming it and is not applied; settings the controller has no use for are logged
//! as ignored. Each line names where the setting came from. Pure: the lines to log are
//! returned.
//!
//! Also where a resource's state is kept, as the flags and these settings say together.

use std::fmt::Display;
use std::time::Duration;

use bosun_proto::v1 as pb;

use super::checks::{self, Place};
use super::{Settings, StorageMode};
use crate::logs::{Level, Line};
use crate::state::delays::seconds;
use crate::state::storage::{Storage, StorageKind};

/// The most objects handled at once a setting may ask for.
pub const MAX_WORKERS: u32 = 10_000;

/// Takes the settings `later` sets over those of `into`: a later startup handler's over an
/// earlier one's. A storage is taken whole; the admission server field by field.
pub fn merge(into: &mut pb::OperatorSettings, later: &pb::OperatorSettings) {
    fn over<T: Clone>(into: &mut Option<T>, later: &Option<T>) {
        if later.is_some() {
            into.clone_from(later);
        }
    }
    fn over_text(into: &mut String, later: &str) {
        if !later.is_empty() {
            *into = later.to_string();
        }
    }
    let set = |s: &Option<pb::StateStorage>| s.as_ref().is_some_and(|s| s.kind != pb::state_storage::Kind::Unspecified as i32);
    over(&mut into.finalizer, &later.finalizer);
    if set(&later.progress_storage) {
        into.progress_storage.clone_from(&later.progress_storage);
    }
    if set(&later.diffbase_storage) {
        into.diffbase_storage.clone_from(&later.diffbase_storage);
    }
    over(&mut into.posting_enabled, &later.posting_enabled);
    over(&mut into.posting_loggers, &later.posting_loggers);
    over(&mut into.posting_level, &later.posting_level);
    over(&mut into.watching_server_timeout_seconds, &later.watching_server_timeout_seconds);
    over(&mut into.max_workers, &later.max_workers);
    over(&mut into.peering_name, &later.peering_name);
    over(&mut into.peering_priority, &later.peering_priority);
    over(&mut into.peering_standalone, &later.peering_standalone);
    over(&mut into.peering_mandatory, &later.peering_mandatory);
    over(&mut into.admission_managed, &later.admission_managed);
    if let Some(l) = &later.admission_server {
        let s = into.admission_server.get_or_insert_with(Default::default);
        over_text(&mut s.listen, &l.listen);
        over_text(&mut s.host, &l.host);
        over_text(&mut s.certfile, &l.certfile);
        over_text(&mut s.pkeyfile, &l.pkeyfile);
        over_text(&mut s.cafile, &l.cafile);
    }
    for entry in &later.ignored {
        if !into.ignored.contains(entry) {
            into.ignored.push(entry.clone());
        }
    }
}

/// Where the startup handlers' settings come from, as the log names it.
pub const STARTUP: &str = "the startup handlers";

/// Where a handler server's described settings come from, as the log names it.
pub fn from_server(addr: &str) -> String {
    format!("handler server {addr}")
}

/// Applies the settings of `sources` (each named as the log names it: [`STARTUP`],
/// [`from_server`]), a later source's over an earlier one's as [`merge`] takes them, to
/// `settings`; returns the lines to log, once each: what is applied, what an explicit flag
/// overrides, what is refused and why, what is kept otherwise than asked, and what is ignored,
/// each naming the source its value came from.
pub fn apply(settings: &mut Settings, sources: &[(&str, &pb::OperatorSettings)]) -> Vec<Line> {
    let mut given = pb::OperatorSettings::default();
    for (_, s) in sources {
        merge(&mut given, s);
    }
    let given = &given;
    let mut a = Applier { settings, lines: Vec::new(), sources, from: STARTUP };
    a.source(|s| s.finalizer.is_some());
    if let Some(f) = &given.finalizer {
        match checks::qualified_name(f) {
            Err(why) => a.refuse("persistence.finalizer", f, &why),
            Ok(()) => a.set("persistence.finalizer", f, &["--prefix"], |s| s.persistence.finalizer = Some(f.clone())),
        }
    }
    a.storages(given.progress_storage.as_ref(), given.diffbase_storage.as_ref());
    if let Some(v) = given.posting_enabled {
        a.source(|s| s.posting_enabled.is_some());
        a.set("posting.enabled", v, &["--no-posting"], |s| s.posting.enabled = v);
    }
    if let Some(v) = given.posting_loggers {
        a.source(|s| s.posting_loggers.is_some());
        a.set("posting.loggers", v, &["--posting-loggers"], |s| s.posting.loggers = v);
    }
    if let Some(v) = given.posting_level {
        a.source(|s| s.posting_level.is_some());
        match pb::log_line::Level::try_from(v) {
            Err(_) => a.refuse("posting.level", v, "it is none of DEBUG, INFO, WARNING and ERROR"),
            Ok(_) => {
                let level = Level::of_pb(v);
                a.set("posting.level", level_name(level), &["--posting-level"], |s| s.posting.level = level);
            }
        }
    }
    if let Some(v) = given.watching_server_timeout_seconds {
        a.source(|s| s.watching_server_timeout_seconds.is_some());
        match seconds(Some(v), "watching_server_timeout_seconds") {
            Ok(Some(d)) if d >= Duration::from_secs(1) => {
                a.set("watching.server_timeout", v, &["--inactivity-timeout"], |s| s.inactivity_timeout = d)
            }
            _ => a.refuse("watching.server_timeout", v, "it must be a number of seconds, at least 1"),
        }
    }
    if let Some(v) = given.max_workers {
        a.source(|s| s.max_workers.is_some());
        if (1..=MAX_WORKERS).contains(&v) {
            a.set("execution.max_workers", v, &["--max-workers"], |s| s.max_workers = v as usize);
        } else {
            a.refuse("execution.max_workers", v, &format!("it must be from 1 to {MAX_WORKERS}"));
        }
    }
    a.peering(given);
    a.admission(given);
    for entry in &given.ignored {
        a.source(|s| s.ignored.contains(entry));
        let from = a.from;
        let line = match entry.split_once(':') {
            Some((name, why)) => format!("Setting {} from {from} is ignored: {}.", name.trim(), why.trim().trim_end_matches('.')),
            None => format!("Setting {} from {from} is ignored.", entry.trim()),
        };
        a.lines.push(Line::new(Level::Info, line));
    }
    a.lines
}

/// Kopf's name of a level.
fn level_name(level: Level) -> &'static str {
    match level {
        Level::Debug => "DEBUG",
        Level::Info => "INFO",
        Level::Warn => "WARNING",
        Level::Error => "ERROR",
    }
}

/// Where state is kept on the objects of a resource: Bosun's naming under `--prefix`, or
/// Kopf's with `--kopf-compat`, with what the startup handlers chose over it; progress in
/// status unless `--storage annotations`, the diffbase in its annotation unless
/// `--diffbase-storage status`; in status only where the resource has a status subresource
/// that keeps unknown fields (`in_status`).
pub fn storage_for(settings: &Settings, in_status: bool) -> Storage {
    let mut base = if settings.kopf_compat {
        Storage::kopf()
    } else {
        let kind = if settings.storage == StorageMode::Annotations { StorageKind::Annotations } else { StorageKind::Status };
        Storage::bosun(&settings.prefix, kind)
    };
    if settings.diffbase_in_status {
        base.diffbase_kind = StorageKind::Status;
    }
    let mut storage = settings.persistence.over(base);
    if !in_status {
        storage.kind = StorageKind::Annotations;
        storage.diffbase_kind = StorageKind::Annotations;
    }
    storage
}

/// The settings being applied, and the lines said so far.
struct Applier<'a> {
    settings: &'a mut Settings,
    lines: Vec<Line>,
    /// Where the settings come from, in order.
    sources: &'a [(&'a str, &'a pb::OperatorSettings)],
    /// Where the setting at hand comes from.
    from: &'a str,
}

impl Applier<'_> {
    /// Notes where the setting at hand comes from: the last source that sets it (`sets`).
    fn source(&mut self, sets: impl Fn(&pb::OperatorSettings) -> bool) {
        if let Some((from, _)) = self.sources.iter().rev().find(|(_, s)| sets(s)) {
            self.from = from;
        }
    }

    /// Applies setting `name` (shown as `value`) unless one of `flags` was given explicitly.
    fn set(&mut self, name: &str, value: impl Display, flags: &[&str], apply: impl FnOnce(&mut Settings)) {
        let from = self.from;
        let text = match flags.iter().find(|f| self.settings.explicit.contains(**f)) {
            Some(flag) => format!("Setting {name}={value} from {from} is overridden by {flag}."),
            None => {
                apply(self.settings);
                format!("Setting {name}={value} from {from} is applied.")
            }
        };
        self.lines.push(Line::new(Level::Info, text));
    }

    fn refuse(&mut self, name: &str, value: impl Display, why: &str) {
        self.lines.push(Line::new(Level::Error, format!("Setting {name}={value} from {} is not applied: {why}.", self.from)));
    }

    fn warn(&mut self, text: String) {
        self.lines.push(Line::new(Level::Warn, text));
    }

    /// Reads one storage setting: its place, or `None` when unset or refused.
    fn storage(&mut self, name: &str, s: Option<&pb::StateStorage>, last: &str) -> Option<Place> {
        match checks::storage(s?, last) {
            Err(why) => {
                self.refuse(name, storage_shown(s?), &why);
                None
            }
            Ok(None) => None,
            Ok(Some((place, warnings))) => {
                for w in warnings {
                    self.warn(format!("Setting {name} from {}: {w}.", self.from));
                }
                Some(place)
            }
        }
    }

    /// The progress and diffbase storages: each its own place (annotations or status), and the
    /// naming of both (the prefix and Kopf's keys in annotations, the stanza in status), of
    /// which the controller keeps one each: the progress storage's where the two disagree.
    fn storages(&mut self, progress: Option<&pb::StateStorage>, diffbase: Option<&pb::StateStorage>) {
        const PROGRESS: &str = "persistence.progress_storage";
        const DIFFBASE: &str = "persistence.diffbase_storage";
        const LAST: &str = "last-handled-configuration";
        let set = |s: &Option<pb::StateStorage>| s.as_ref().is_some_and(|s| s.kind != pb::state_storage::Kind::Unspecified as i32);
        self.source(|s| set(&s.progress_storage));
        let p = self.storage(PROGRESS, progress, "progress");
        self.source(|s| set(&s.diffbase_storage));
        let d = self.storage(DIFFBASE, diffbase, LAST);
        if let Some(p) = &p {
            self.source(|s| set(&s.progress_storage));
            let kind = p.kind();
            self.set(PROGRESS, kind_name(kind), &["--storage"], |s| s.persistence.kind = Some(kind));
            self.naming(PROGRESS, p.clone(), "progress");
        }
        let Some(d) = d else { return };
        self.source(|s| set(&s.diffbase_storage));
        let kind = d.kind();
        self.set(DIFFBASE, kind_name(kind), &["--diffbase-storage"], |s| s.persistence.diffbase_kind = Some(kind));
        let clashing = p.as_ref().filter(|p| match (p, &d) {
            (Place::Annotations { .. }, Place::Annotations { .. }) => **p != d,
            (Place::Status(Some(a)), Place::Status(Some(b))) => a != b,
            _ => false,
        });
        if let Some(p) = clashing {
            self.warn(format!(
                "Settings {PROGRESS} ({}) and {DIFFBASE} ({}) name their places differently; the controller keeps one prefix and one status stanza for all its state, so the progress storage's naming is used for both.",
                place_shown(p, "progress"),
                place_shown(&d, LAST)
            ));
        } else if p.as_ref() != Some(&d) {
            self.naming(DIFFBASE, d, LAST);
        }
    }

    /// Applies the naming a storage setting gives: the prefix and Kopf's keys of annotations,
    /// or the stanza of a status field.
    fn naming(&mut self, name: &str, place: Place, last: &str) {
        match place {
            Place::Annotations { prefix, v1 } => {
                self.set(&format!("{name}.prefix"), &prefix, &["--prefix"], |s| s.persistence.prefix = Some(prefix.clone()));
                self.set(&format!("{name}.v1"), v1, &[], |s| s.persistence.kopf_keys = Some(v1));
            }
            Place::Status(Some(stanza)) => {
                let field = format!("status.{stanza}.{last}");
                self.set(&format!("{name}.field"), field, &["--prefix"], |s| s.persistence.stanza = Some(stanza));
            }
            Place::Status(None) => {}
        }
    }

    fn peering(&mut self, given: &pb::OperatorSettings) {
        if let Some(v) = &given.peering_name {
            self.source(|s| s.peering_name.is_some());
            match checks::dns_subdomain(v) {
                Err(why) => self.refuse("peering.name", v, &why),
                Ok(()) => self.set("peering.name", v, &["--peering"], |s| s.peering.name = v.clone()),
            }
        }
        if let Some(v) = given.peering_priority {
            self.source(|s| s.peering_priority.is_some());
            self.set("peering.priority", v, &["--priority", "--dev"], |s| s.peering.priority = i64::from(v));
        }
        if let Some(v) = given.peering_standalone {
            self.source(|s| s.peering_standalone.is_some());
            self.set("peering.standalone", v, &["--standalone", "--peering"], |s| s.standalone = v);
        }
        if let Some(v) = given.peering_mandatory {
            self.source(|s| s.peering_mandatory.is_some());
            self.set("peering.mandatory", v, &["--peering"], |s| s.peering.mandatory = v);
        }
    }

    fn admission(&mut self, given: &pb::OperatorSettings) {
        const MANAGED_BY: [&str; 2] = ["--admission-configuration", "--admission-unmanaged"];
        self.source(|s| s.admission_managed.is_some());
        match given.admission_managed.as_deref() {
            None => {}
            Some("") => self.set("admission.managed", "\"\"", &MANAGED_BY, |s| s.admission.manage = false),
            Some(v) => match checks::dns_subdomain(v) {
                Err(why) => self.refuse("admission.managed", v, &why),
                Ok(()) => self.set("admission.managed", v, &MANAGED_BY, |s| {
                    s.admission.configuration = v.to_string();
                    s.admission.manage = true;
                }),
            },
        }
        let Some(server) = &given.admission_server else { return };
        if !server.listen.is_empty() {
            self.source(|s| server_sets(s, |a| &a.listen));
            let v = &server.listen;
            match checks::listen_address(v) {
                Err(why) => self.refuse("admission.server.listen", v, &why),
                Ok(()) => self.set("admission.server.listen", v, &["--admission-listen"], |s| s.admission.listen = Some(v.clone())),
            }
        }
        if !server.host.is_empty() {
            self.source(|s| server_sets(s, |a| &a.host));
            let v = &server.host;
            match checks::host_name(v) {
                Err(why) => self.refuse("admission.server.host", v, &why),
                Ok(()) => self
                    .set("admission.server.host", v, &["--admission-url", "--admission-service"], |s| s.admission.host = Some(v.clone())),
            }
        }
        self.source(|s| server_sets(s, |a| &a.certfile) || server_sets(s, |a| &a.pkeyfile) || server_sets(s, |a| &a.cafile));
        let (cert, key, ca) = (&server.certfile, &server.pkeyfile, &server.cafile);
        match (cert.is_empty(), key.is_empty()) {
            (true, true) if !ca.is_empty() => self.refuse("admission.server.cafile", ca, "it needs certfile and pkeyfile too"),
            (true, true) => {}
            (false, true) => self.refuse("admission.server.certfile", cert, "it needs pkeyfile, the certificate's key"),
            (true, false) => self.refuse("admission.server.pkeyfile", key, "it needs certfile, the key's certificate"),
            (false, false) => {
                let shown =
                    if ca.is_empty() { format!("{cert} (pkeyfile {key})") } else { format!("{cert} (pkeyfile {key}, cafile {ca})") };
                let files = crate::endpoints::webhooks::Certificate::Files {
                    cert: cert.into(),
                    key: key.into(),
                    ca: Some(ca).filter(|c| !c.is_empty()).map(Into::into),
                };
                self.set("admission.server.certfile", shown, &["--admission-cert", "--admission-key", "--admission-ca"], |s| {
                    s.admission.certificate = files
                });
            }
        }
    }
}

/// Whether `s` sets the field of the admission server that `field` reads.
fn server_sets(s: &pb::OperatorSettings, field: fn(&pb::AdmissionServer) -> &String) -> bool {
    s.admission_server.as_ref().is_some_and(|a| !field(a).is_empty())
}

/// A storage kind as the log shows it.
fn kind_name(kind: StorageKind) -> &'static str {
    match kind {
        StorageKind::Annotations => "annotations",
        StorageKind::Status => "status",
    }
}

/// A storage setting as the log shows it.
fn storage_shown(s: &pb::StateStorage) -> String {
    match pb::state_storage::Kind::try_from(s.kind) {
        Ok(pb::state_storage::Kind::Annotations) => format!("annotations(prefix={:?}, v1={})", s.prefix, s.v1),
        Ok(pb::state_storage::Kind::Status) => format!("status(field={:?})", s.field),
        _ => format!("kind {}", s.kind),
    }
}

/// A place as the log shows it.
fn place_shown(p: &Place, last: &str) -> String {
    match p {
        Place::Annotations { prefix, v1 } => format!("annotations under {prefix}, v1={v1}"),
        Place::Status(Some(stanza)) => format!("status.{stanza}.{last}"),
        Place::Status(None) => "status".into(),
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
