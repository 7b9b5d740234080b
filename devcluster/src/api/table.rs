//! `Accept: application/json;as=Table;v=v1;g=meta.k8s.io`: the server-side printing kubectl
//! uses for `kubectl get` — columns per built-in kind (see `printers`),
//! `additionalPrinterColumns` for custom resources, each row with the object's metadata as
//! `PartialObjectMetadata`.

use std::sync::Arc;

use serde_json::{Value, json};

use super::printers::{self, AGE_DESC, NAME_DESC, age, col};
use crate::registry::ResourceInfo;
use crate::store::Obj;

/// Evaluate a simple JSONPath (`.a.b`, `.a[0].b`, `.a['x.y']`).
fn json_path(v: &Value, path: &str) -> Value {
    let mut cur = v;
    let mut rest = path.trim_start_matches('{').trim_end_matches('}').trim_start_matches('.');
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']').unwrap_or(r.len());
            let key = &r[..end];
            rest = r.get(end + 1..).unwrap_or("").trim_start_matches('.');
            cur = match key.parse::<usize>() {
                Ok(i) => match cur.get(i) {
                    Some(c) => c,
                    None => return Value::Null,
                },
                Err(_) => match cur.get(key.trim_matches('\'').trim_matches('"')) {
                    Some(c) => c,
                    None => return Value::Null,
                },
            };
            continue;
        }
        let end = rest.find(['.', '[']).unwrap_or(rest.len());
        let key = &rest[..end];
        rest = rest[end..].trim_start_matches('.');
        cur = match cur.get(key) {
            Some(c) => c,
            None => return Value::Null,
        };
    }
    cur.clone()
}

/// Render objects as a Table.
pub fn render(info: &ResourceInfo, objs: &[Arc<Obj>], rv: &str, include: Option<&str>, cont: Option<&str>) -> Value {
    let (columns, rows): (Vec<Value>, Vec<Value>) = if info.builtin {
        let (cols, row) = printers::columns(info);
        let rows = objs.iter().map(|o| json!({"cells": row(&o.value), "object": partial(&o.value, include)})).collect();
        (cols, rows)
    } else {
        let mut cols = vec![col("Name", "string", "name", NAME_DESC, 0)];
        let mut paths = Vec::new();
        for c in &info.columns {
            cols.push(col(&c.name, &c.type_, &c.format, &c.description, c.priority));
            paths.push((c.json_path.clone(), c.type_.clone()));
        }
        if info.columns.is_empty() {
            cols.push(col("Age", "date", "", AGE_DESC, 0));
            paths.push((".metadata.creationTimestamp".into(), "date".into()));
        }
        let rows = objs
            .iter()
            .map(|o| {
                let mut cells = vec![json!(crate::registry::name_of(&o.value))];
                for (p, t) in &paths {
                    let v = json_path(&o.value, p);
                    cells.push(match (t.as_str(), v) {
                        ("date", Value::String(_)) => age(&o.value),
                        (_, v) => v,
                    });
                }
                json!({"cells": cells, "object": partial(&o.value, include)})
            })
            .collect();
        (cols, rows)
    };
    let mut meta = json!({"resourceVersion": rv});
    if let Some(c) = cont {
        meta["continue"] = json!(c);
    }
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": meta, "columnDefinitions": columns, "rows": rows})
}

fn partial(v: &Value, include: Option<&str>) -> Value {
    match include {
        Some("None") => Value::Null,
        Some("Object") => v.clone(),
        _ => {
            json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": v.get("metadata").cloned().unwrap_or(json!({}))})
        }
    }
}
