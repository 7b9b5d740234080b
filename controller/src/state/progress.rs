//! Progress records: what the controller remembers of each handler's attempts for a cause,
//! stored on the object (annotations or status), in Kopf's format.

use chrono::{DateTime, NaiveDateTime, Utc};
use serde::{Deserialize, Serialize};

/// One handler's progress for the current cause. Field names and meaning as in Kopf.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgressRecord {
    /// When the first attempt started.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub started: Option<String>,
    /// When the handler finished (succeeded or failed for good).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub stopped: Option<String>,
    /// Not to be retried before this time.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub delayed: Option<String>,
    /// The cause the record belongs to (`create`, `update`, `delete`, `resume`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub purpose: Option<String>,
    /// How many attempts failed.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub retries: Option<u32>,
    /// The handler succeeded.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub success: Option<bool>,
    /// The handler failed for good.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub failure: Option<bool>,
    /// The last error message.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub message: Option<String>,
    /// Ids of the sub-handlers this handler registered.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub subrefs: Option<Vec<String>>,
    /// For sub-handlers: the parameter their parent gave (Bosun's addition; Kopf ignores it).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub param: Option<serde_json::Value>,
}

impl ProgressRecord {
    /// Whether the handler needs no more attempts for this cause.
    pub fn finished(&self) -> bool {
        self.success == Some(true) || self.failure == Some(true)
    }

    /// When the handler may be attempted again (`None`: now).
    pub fn delayed_until(&self) -> Option<DateTime<Utc>> {
        self.delayed.as_deref().and_then(parse_time)
    }

    /// When the first attempt started.
    pub fn started_at(&self) -> Option<DateTime<Utc>> {
        self.started.as_deref().and_then(parse_time)
    }

    /// Encodes the record as compact JSON (non-null fields only).
    pub fn encode(&self) -> String {
        serde_json::to_string(self).expect("records always serialize")
    }

    /// Decodes a record; `None` for garbage (the handler then counts as not started).
    pub fn decode(text: &str) -> Option<ProgressRecord> {
        // As deep as objects go: a sub-handler's parameter may be as deep as the object.
        serde_json::from_value(crate::json::from_str(text).ok()?).ok()
    }
}

/// Formats a time as Kopf does: ISO-8601 UTC with microseconds.
pub fn format_time(t: DateTime<Utc>) -> String {
    // `2026-11-23T17:00:00.123456+00:00`, without parsing a strftime pattern each time.
    t.to_rfc3339_opts(chrono::SecondsFormat::Micros, false)
}

/// Parses a time written by Bosun or any Kopf version (with or without a zone), and any
/// time [`format_time`] writes (years past 9999 have a sign, which RFC 3339 does not allow).
pub fn parse_time(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .or_else(|_| DateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.f%:z"))
        .map(|t| t.with_timezone(&Utc))
        .ok()
        .or_else(|| NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.f").ok().map(|n| n.and_utc()))
}

/// Kopf's V1 annotation key for a handler id (`/` → `.`, the whole key cut to 63 characters
/// with a hash suffix); see [`super::keys`] for V2 and for the keys Kopf actually writes.
pub fn annotation_key(prefix: &str, id: &str) -> String {
    super::keys::annotation_key_v1(prefix, id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn records_encode_only_set_fields_and_decode_back() {
        let r = ProgressRecord {
            started: Some("2026-01-01T00:00:00.000000+00:00".into()),
            purpose: Some("create".into()),
            retries: Some(1),
            ..Default::default()
        };
        let text = r.encode();
        assert_eq!(text, r#"{"started":"2026-01-01T00:00:00.000000+00:00","purpose":"create","retries":1}"#);
        assert_eq!(ProgressRecord::decode(&text), Some(r));
        assert_eq!(ProgressRecord::decode("garbage"), None);
    }

    #[test]
    fn times_of_every_kopf_version_parse() {
        let want = Utc.with_ymd_and_hms(2026, 3, 4, 5, 6, 7).unwrap() + chrono::Duration::microseconds(123456);
        for s in ["2026-03-04T05:06:07.123456+00:00", "2026-03-04T05:06:07.123456Z", "2026-03-04T05:06:07.123456"] {
            assert_eq!(parse_time(s), Some(want), "{s}");
        }
        assert_eq!(format_time(want), "2026-03-04T05:06:07.123456+00:00");
        assert_eq!(parse_time("yesterday"), None);
    }

    #[test]
    fn annotation_keys_follow_kopf_naming() {
        let cases = [
            ("kopf.zalando.org", "create_fn", "kopf.zalando.org/create_fn"),
            ("bosun.dev", "parent/child", "bosun.dev/parent.child"),
            ("bosun.dev", "update_fn/spec.field", "bosun.dev/update_fn.spec.field"),
        ];
        for (prefix, id, want) in cases {
            assert_eq!(annotation_key(prefix, id), want);
        }
        let long = annotation_key("kopf.zalando.org", &"x".repeat(80));
        assert_eq!(long.len(), 63, "{long}");
        assert!(long.starts_with("kopf.zalando.org/xxxx"));
        assert_ne!(long, annotation_key("kopf.zalando.org", &"x".repeat(81)), "hash tells long ids apart");
    }
}
