//! Table tests of operator settings: merged in order, applied unless given explicitly, refused
//! when bad, and the storage they choose with the flags.

use super::*;
use crate::endpoints::webhooks::Certificate;
use crate::state::storage::{Convention, Persistence};

fn annotations(prefix: &str, v1: bool) -> Option<pb::StateStorage> {
    Some(pb::StateStorage { kind: pb::state_storage::Kind::Annotations as i32, prefix: prefix.into(), v1, ..Default::default() })
}

fn status(field: &str) -> Option<pb::StateStorage> {
    Some(pb::StateStorage { kind: pb::state_storage::Kind::Status as i32, field: field.into(), ..Default::default() })
}

#[test]
fn a_later_startup_handlers_settings_go_over_an_earlier_ones_field_by_field() {
    let mut merged = pb::OperatorSettings {
        finalizer: Some("a.op/f".into()),
        max_workers: Some(3),
        progress_storage: annotations("a.op", true),
        admission_server: Some(pb::AdmissionServer { listen: "0.0.0.0:9443".into(), host: "a.op".into(), ..Default::default() }),
        ignored: vec!["batching.batch_window: no batches".into()],
        ..Default::default()
    };
    let later = pb::OperatorSettings {
        finalizer: Some("b.op/f".into()),
        posting_loggers: Some(true),
        progress_storage: Some(pb::StateStorage::default()),
        admission_server: Some(pb::AdmissionServer { host: "b.op".into(), ..Default::default() }),
        ignored: vec!["batching.batch_window: no batches".into(), "networking.request_timeout: why".into()],
        ..Default::default()
    };
    merge(&mut merged, &later);
    assert_eq!(merged.finalizer.as_deref(), Some("b.op/f"), "set later: the later one");
    assert_eq!(merged.max_workers, Some(3), "not set later: the earlier one");
    assert_eq!(merged.posting_loggers, Some(true));
    assert_eq!(merged.progress_storage, annotations("a.op", true), "a storage of no kind is no storage");
    let server = merged.admission_server.unwrap();
    assert_eq!((server.listen.as_str(), server.host.as_str()), ("0.0.0.0:9443", "b.op"));
    assert_eq!(merged.ignored, ["batching.batch_window: no batches", "networking.request_timeout: why"]);
}

/// What the settings under test look like, in one line.
fn shown(s: &Settings) -> String {
    let a = &s.admission;
    format!(
        "{:?} posting={:?} timeout={:?} workers={} standalone={} peering={}/{}/{} admission={:?}/{}/{:?}/{:?}/{:?}",
        s.persistence,
        (s.posting.enabled, s.posting.loggers, s.posting.level),
        s.inactivity_timeout,
        s.max_workers,
        s.standalone,
        s.peering.name,
        s.peering.priority,
        s.peering.mandatory,
        a.configuration,
        a.manage,
        a.listen,
        a.host,
        a.certificate
    )
}

#[test]
fn settings_are_applied_unless_a_flag_gave_them_and_bad_ones_are_refused_by_name() {
    let none = pb::OperatorSettings::default;
    // (given, flags given explicitly, how the settings change, the lines)
    type Row<'a> = (pb::OperatorSettings, &'a [&'a str], fn(&mut Settings), Vec<&'a str>);
    let rows: Vec<Row> = vec![
        (
            pb::OperatorSettings { finalizer: Some("my.op/finalizer".into()), ..none() },
            &[],
            |s| s.persistence.finalizer = Some("my.op/finalizer".into()),
            vec!["INFO Setting persistence.finalizer=my.op/finalizer from the startup handlers is applied."],
        ),
        (
            pb::OperatorSettings { finalizer: Some("my.op/finalizer".into()), ..none() },
            &["--prefix"],
            |_| {},
            vec!["INFO Setting persistence.finalizer=my.op/finalizer from the startup handlers is overridden by --prefix."],
        ),
        (
            pb::OperatorSettings { finalizer: Some(String::new()), ..none() },
            &[],
            |_| {},
            vec!["ERROR Setting persistence.finalizer= from the startup handlers is not applied: its name must have 1 to 63 characters."],
        ),
        (
            pb::OperatorSettings { progress_storage: annotations("my.op", true), diffbase_storage: annotations("my.op", true), ..none() },
            &[],
            |s| {
                s.persistence = Persistence {
                    prefix: Some("my.op".into()),
                    kopf_keys: Some(true),
                    kind: Some(StorageKind::Annotations),
                    diffbase_kind: Some(StorageKind::Annotations),
                    ..Default::default()
                }
            },
            vec![
                "INFO Setting persistence.progress_storage=annotations from the startup handlers is applied.",
                "INFO Setting persistence.progress_storage.prefix=my.op from the startup handlers is applied.",
                "INFO Setting persistence.progress_storage.v1=true from the startup handlers is applied.",
                "INFO Setting persistence.diffbase_storage=annotations from the startup handlers is applied.",
            ],
        ),
        // Kopf's `StatusDiffBaseStorage()` alone: the diffbase in status, progress where it was.
        (
            pb::OperatorSettings { diffbase_storage: status("status.kopf.last-handled-configuration"), ..none() },
            &[],
            |s| s.persistence = Persistence { stanza: Some("kopf".into()), diffbase_kind: Some(StorageKind::Status), ..Default::default() },
            vec![
                "INFO Setting persistence.diffbase_storage=status from the startup handlers is applied.",
                "INFO Setting persistence.diffbase_storage.field=status.kopf.last-handled-configuration from the startup handlers is applied.",
            ],
        ),
        (
            pb::OperatorSettings { diffbase_storage: status("status.kopf.last-handled-configuration"), ..none() },
            &["--diffbase-storage"],
            |s| s.persistence.stanza = Some("kopf".into()),
            vec![
                "INFO Setting persistence.diffbase_storage=status from the startup handlers is overridden by --diffbase-storage.",
                "INFO Setting persistence.diffbase_storage.field=status.kopf.last-handled-configuration from the startup handlers is applied.",
            ],
        ),
        // Two prefixes: the controller keeps one.
        (
            pb::OperatorSettings {
                progress_storage: annotations("my.op", true),
                diffbase_storage: annotations("other.op", true),
                ..none()
            },
            &[],
            |s| {
                s.persistence = Persistence {
                    prefix: Some("my.op".into()),
                    kopf_keys: Some(true),
                    kind: Some(StorageKind::Annotations),
                    diffbase_kind: Some(StorageKind::Annotations),
                    ..Default::default()
                }
            },
            vec![
                "INFO Setting persistence.progress_storage=annotations from the startup handlers is applied.",
                "INFO Setting persistence.progress_storage.prefix=my.op from the startup handlers is applied.",
                "INFO Setting persistence.progress_storage.v1=true from the startup handlers is applied.",
                "INFO Setting persistence.diffbase_storage=annotations from the startup handlers is applied.",
                "WARNING Settings persistence.progress_storage (annotations under my.op, v1=true) and persistence.diffbase_storage (annotations under other.op, v1=true) name their places differently; the controller keeps one prefix and one status stanza for all its state, so the progress storage's naming is used for both.",
            ],
        ),
        (
            pb::OperatorSettings { progress_storage: annotations("my.op", false), ..none() },
            &["--storage", "--prefix"],
            |s| s.persistence.kopf_keys = Some(false),
            vec![
                "INFO Setting persistence.progress_storage=annotations from the startup handlers is overridden by --storage.",
                "INFO Setting persistence.progress_storage.prefix=my.op from the startup handlers is overridden by --prefix.",
                "INFO Setting persistence.progress_storage.v1=false from the startup handlers is applied.",
            ],
        ),
        (
            pb::OperatorSettings {
                progress_storage: status("status.my-op.progress"),
                diffbase_storage: Some(pb::StateStorage { key: "state".into(), ..annotations("my.op", true).unwrap() }),
                ..none()
            },
            &[],
            |s| {
                s.persistence = Persistence {
                    stanza: Some("my-op".into()),
                    kind: Some(StorageKind::Status),
                    diffbase_kind: Some(StorageKind::Annotations),
                    prefix: Some("my.op".into()),
                    kopf_keys: Some(true),
                    ..Default::default()
                }
            },
            vec![
                "WARNING Setting persistence.diffbase_storage from the startup handlers: its key \"state\" is not one the controller keeps the last handled configuration under; `my.op/last-handled-configuration` is used instead.",
                "INFO Setting persistence.progress_storage=status from the startup handlers is applied.",
                "INFO Setting persistence.progress_storage.field=status.my-op.progress from the startup handlers is applied.",
                "INFO Setting persistence.diffbase_storage=annotations from the startup handlers is applied.",
                "INFO Setting persistence.diffbase_storage.prefix=my.op from the startup handlers is applied.",
                "INFO Setting persistence.diffbase_storage.v1=true from the startup handlers is applied.",
            ],
        ),
        (
            pb::OperatorSettings { diffbase_storage: status("status.x.y.last-handled-configuration"), ..none() },
            &[],
            |s| s.persistence.diffbase_kind = Some(StorageKind::Status),
            vec![
                "WARNING Setting persistence.diffbase_storage from the startup handlers: its field \"status.x.y.last-handled-configuration\" has a shape the controller does not keep state at (`status.<name>.last-handled-configuration`); the default `status.<name>` is used instead.",
                "INFO Setting persistence.diffbase_storage=status from the startup handlers is applied.",
            ],
        ),
        (
            pb::OperatorSettings { progress_storage: annotations("My Op", true), ..none() },
            &[],
            |_| {},
            vec![
                "ERROR Setting persistence.progress_storage=annotations(prefix=\"My Op\", v1=true) from the startup handlers is not applied: its prefix \"My Op\" is no DNS subdomain: 'M' is not allowed (use lowercase letters, digits, '-' and '.').",
            ],
        ),
        (
            pb::OperatorSettings {
                posting_enabled: Some(false),
                posting_loggers: Some(true),
                posting_level: Some(pb::log_line::Level::Warning as i32),
                ..none()
            },
            &["--posting-loggers"],
            |s| (s.posting.enabled, s.posting.level) = (false, Level::Warn),
            vec![
                "INFO Setting posting.enabled=false from the startup handlers is applied.",
                "INFO Setting posting.loggers=true from the startup handlers is overridden by --posting-loggers.",
                "INFO Setting posting.level=WARNING from the startup handlers is applied.",
            ],
        ),
        (
            pb::OperatorSettings {
                posting_level: Some(9),
                watching_server_timeout_seconds: Some(f64::NAN),
                max_workers: Some(0),
                ..none()
            },
            &[],
            |_| {},
            vec![
                "ERROR Setting posting.level=9 from the startup handlers is not applied: it is none of DEBUG, INFO, WARNING and ERROR.",
                "ERROR Setting watching.server_timeout=NaN from the startup handlers is not applied: it must be a number of seconds, at least 1.",
                "ERROR Setting execution.max_workers=0 from the startup handlers is not applied: it must be from 1 to 10000.",
            ],
        ),
        (
            pb::OperatorSettings { watching_server_timeout_seconds: Some(0.5), max_workers: Some(10_001), ..none() },
            &[],
            |_| {},
            vec![
                "ERROR Setting watching.server_timeout=0.5 from the startup handlers is not applied: it must be a number of seconds, at least 1.",
                "ERROR Setting execution.max_workers=10001 from the startup handlers is not applied: it must be from 1 to 10000.",
            ],
        ),
        (
            pb::OperatorSettings { watching_server_timeout_seconds: Some(60.0), max_workers: Some(10), ..none() },
            &["--max-workers"],
            |s| s.inactivity_timeout = Duration::from_secs(60),
            vec![
                "INFO Setting watching.server_timeout=60 from the startup handlers is applied.",
                "INFO Setting execution.max_workers=10 from the startup handlers is overridden by --max-workers.",
            ],
        ),
        (
            pb::OperatorSettings {
                peering_name: Some("my-peering".into()),
                peering_priority: Some(100),
                peering_standalone: Some(false),
                peering_mandatory: Some(true),
                ..none()
            },
            &["--dev"],
            |s| {
                s.peering.name = "my-peering".into();
                s.standalone = false;
                s.peering.mandatory = true;
            },
            vec![
                "INFO Setting peering.name=my-peering from the startup handlers is applied.",
                "INFO Setting peering.priority=100 from the startup handlers is overridden by --dev.",
                "INFO Setting peering.standalone=false from the startup handlers is applied.",
                "INFO Setting peering.mandatory=true from the startup handlers is applied.",
            ],
        ),
        (
            pb::OperatorSettings { peering_name: Some("My Peering".into()), admission_managed: Some(String::new()), ..none() },
            &[],
            |s| s.admission.manage = false,
            vec![
                "ERROR Setting peering.name=My Peering from the startup handlers is not applied: 'M' is not allowed (use lowercase letters, digits, '-' and '.').",
                "INFO Setting admission.managed=\"\" from the startup handlers is applied.",
            ],
        ),
        (
            pb::OperatorSettings {
                admission_managed: Some("hooks.my.op".into()),
                admission_server: Some(pb::AdmissionServer {
                    listen: "0.0.0.0:8443".into(),
                    host: "op.example".into(),
                    certfile: "/tls/tls.crt".into(),
                    pkeyfile: "/tls/tls.key".into(),
                    cafile: String::new(),
                }),
                ..none()
            },
            &["--admission-listen"],
            |s| {
                s.admission.configuration = "hooks.my.op".into();
                s.admission.host = Some("op.example".into());
                s.admission.certificate = Certificate::Files { cert: "/tls/tls.crt".into(), key: "/tls/tls.key".into(), ca: None };
            },
            vec![
                "INFO Setting admission.managed=hooks.my.op from the startup handlers is applied.",
                "INFO Setting admission.server.listen=0.0.0.0:8443 from the startup handlers is overridden by --admission-listen.",
                "INFO Setting admission.server.host=op.example from the startup handlers is applied.",
                "INFO Setting admission.server.certfile=/tls/tls.crt (pkeyfile /tls/tls.key) from the startup handlers is applied.",
            ],
        ),
        (
            pb::OperatorSettings {
                admission_server: Some(pb::AdmissionServer {
                    listen: "9443".into(),
                    host: "https://op".into(),
                    certfile: "/tls/tls.crt".into(),
                    ..Default::default()
                }),
                ..none()
            },
            &[],
            |_| {},
            vec![
                "ERROR Setting admission.server.listen=9443 from the startup handlers is not applied: give host:port.",
                "ERROR Setting admission.server.host=https://op from the startup handlers is not applied: ':' is not allowed in a host name.",
                "ERROR Setting admission.server.certfile=/tls/tls.crt from the startup handlers is not applied: it needs pkeyfile, the certificate's key.",
            ],
        ),
        (
            pb::OperatorSettings { ignored: vec!["batching.batch_window: the controller batches nothing".into(), "x.y".into()], ..none() },
            &[],
            |_| {},
            vec![
                "INFO Setting batching.batch_window from the startup handlers is ignored: the controller batches nothing.",
                "INFO Setting x.y from the startup handlers is ignored.",
            ],
        ),
    ];
    for (given, explicit, change, want) in rows {
        let mut settings = Settings { explicit: explicit.iter().map(|f| f.to_string()).collect(), ..Settings::default() };
        let mut expected = settings.clone();
        change(&mut expected);
        let lines = apply(&mut settings, &[(STARTUP, &given)]);
        let tag = |l: &Line| format!("{} {}", level_name(l.level), l.text);
        let got: Vec<String> = lines.iter().map(tag).collect();
        assert_eq!(got, want, "{given:?}");
        assert_eq!(shown(&settings), shown(&expected), "{given:?}");
    }
}

#[test]
fn the_storage_follows_the_flags_with_the_startup_handlers_choice_over_them_and_status_only_where_kept() {
    use StorageKind::{Annotations, Status};
    let chosen_status = Persistence { kind: Some(Status), stanza: Some("my-op".into()), ..Default::default() };
    let chosen_annotations =
        Persistence { kind: Some(Annotations), prefix: Some("my.op".into()), kopf_keys: Some(true), ..Default::default() };
    let chosen_status_diffbase = Persistence { diffbase_kind: Some(Status), ..Default::default() };
    let chosen_annotations_diffbase = Persistence { diffbase_kind: Some(Annotations), ..Default::default() };
    // (kopf_compat, --storage, --diffbase-storage status, chosen, the status keeps unknown fields)
    // → (prefix, progress kind, diffbase kind, convention, stanza)
    type Row<'a> = (bool, StorageMode, bool, Persistence, bool, (&'a str, StorageKind, StorageKind, Convention, &'a str));
    let rows: Vec<Row> = vec![
        // The diffbase in its annotation by default, whatever the progress storage.
        (false, StorageMode::Auto, false, Persistence::default(), true, ("bosun.dev", Status, Annotations, Convention::Bosun, "bosun.dev")),
        (
            false,
            StorageMode::Auto,
            false,
            Persistence::default(),
            false,
            ("bosun.dev", Annotations, Annotations, Convention::Bosun, "bosun.dev"),
        ),
        (
            false,
            StorageMode::Annotations,
            false,
            Persistence::default(),
            true,
            ("bosun.dev", Annotations, Annotations, Convention::Bosun, "bosun.dev"),
        ),
        (
            false,
            StorageMode::Annotations,
            false,
            chosen_status.clone(),
            true,
            ("bosun.dev", Status, Annotations, Convention::Bosun, "my-op"),
        ),
        (false, StorageMode::Auto, false, chosen_annotations.clone(), true, ("my.op", Annotations, Annotations, Convention::Kopf, "kopf")),
        // In status only when asked, and only where the status keeps it.
        (false, StorageMode::Auto, true, Persistence::default(), true, ("bosun.dev", Status, Status, Convention::Bosun, "bosun.dev")),
        (
            false,
            StorageMode::Auto,
            true,
            Persistence::default(),
            false,
            ("bosun.dev", Annotations, Annotations, Convention::Bosun, "bosun.dev"),
        ),
        (
            false,
            StorageMode::Annotations,
            false,
            chosen_status_diffbase.clone(),
            true,
            ("bosun.dev", Annotations, Status, Convention::Bosun, "bosun.dev"),
        ),
        (
            false,
            StorageMode::Auto,
            true,
            chosen_annotations_diffbase,
            true,
            ("bosun.dev", Status, Annotations, Convention::Bosun, "bosun.dev"),
        ),
        // Kopf's: annotations for both, unless chosen otherwise.
        (
            true,
            StorageMode::Auto,
            false,
            Persistence::default(),
            true,
            ("kopf.zalando.org", Annotations, Annotations, Convention::Kopf, "kopf"),
        ),
        (true, StorageMode::Auto, false, chosen_status.clone(), true, ("kopf.zalando.org", Status, Annotations, Convention::Kopf, "my-op")),
        (true, StorageMode::Auto, false, chosen_status, false, ("kopf.zalando.org", Annotations, Annotations, Convention::Kopf, "my-op")),
        (true, StorageMode::Auto, false, chosen_annotations, true, ("my.op", Annotations, Annotations, Convention::Kopf, "kopf")),
        (true, StorageMode::Auto, false, chosen_status_diffbase, true, ("kopf.zalando.org", Annotations, Status, Convention::Kopf, "kopf")),
    ];
    for (kopf_compat, storage, diffbase_in_status, persistence, in_status, (prefix, kind, diffbase_kind, convention, stanza)) in rows {
        let settings = Settings { kopf_compat, storage, diffbase_in_status, persistence: persistence.clone(), ..Settings::default() };
        let s = storage_for(&settings, in_status);
        assert_eq!(
            (s.prefix.as_str(), s.kind, s.diffbase_kind, s.convention, s.stanza.as_str()),
            (prefix, kind, diffbase_kind, convention, stanza),
            "kopf_compat {kopf_compat}, {storage:?}, diffbase in status {diffbase_in_status}, {persistence:?}, in status {in_status}"
        );
    }
}

#[test]
fn settings_held_when_described_go_under_the_startup_handlers_servers_in_order_and_lines_name_their_source() {
    let first = pb::OperatorSettings {
        finalizer: Some("first.op/finalizer".into()),
        posting_level: Some(pb::log_line::Level::Debug as i32),
        max_workers: Some(3),
        peering_name: Some("first".into()),
        ignored: vec!["batching.batch_window: no batches".into()],
        ..Default::default()
    };
    let second = pb::OperatorSettings {
        finalizer: Some("second.op/finalizer".into()),
        max_workers: Some(0),
        admission_server: Some(pb::AdmissionServer { host: "op.example".into(), ..Default::default() }),
        ..Default::default()
    };
    let startup = pb::OperatorSettings {
        finalizer: Some("startup.op/finalizer".into()),
        peering_name: Some("chosen".into()),
        ignored: vec!["batching.batch_window: no batches".into()],
        ..Default::default()
    };
    let (a, b) = (from_server("http://127.0.0.1:1"), from_server("unix:///run/b.sock"));
    let mut settings = Settings { explicit: ["--posting-level".to_string()].into(), ..Settings::default() };
    let lines = apply(&mut settings, &[(&a, &first), (&b, &second), (STARTUP, &startup)]);
    let got: Vec<String> = lines.iter().map(|l| format!("{} {}", level_name(l.level), l.text)).collect();
    assert_eq!(
        got,
        [
            "INFO Setting persistence.finalizer=startup.op/finalizer from the startup handlers is applied.",
            "INFO Setting posting.level=DEBUG from handler server http://127.0.0.1:1 is overridden by --posting-level.",
            "ERROR Setting execution.max_workers=0 from handler server unix:///run/b.sock is not applied: it must be from 1 to 10000.",
            "INFO Setting peering.name=chosen from the startup handlers is applied.",
            "INFO Setting admission.server.host=op.example from handler server unix:///run/b.sock is applied.",
            "INFO Setting batching.batch_window from the startup handlers is ignored: no batches.",
        ]
    );
    assert_eq!(settings.persistence.finalizer.as_deref(), Some("startup.op/finalizer"), "the startup handlers' win");
    assert_eq!(settings.max_workers, 64, "a later server's bad value is refused, not replaced by an earlier one's");
    assert_eq!(settings.peering.name, "chosen");
    assert_eq!(settings.admission.host.as_deref(), Some("op.example"));
    assert_eq!(settings.posting.level, Level::Info, "the explicit flag wins over a server's settings too");
}
