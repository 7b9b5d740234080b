//! Tests of `store.rs`.

use super::*;
use crate::meta::set_rv;
use bytes::BytesMut;
use serde_json::json;

#[test]
fn list_items_of_builtins_leave_out_kind_and_api_version() {
    let obj = Obj::new(json!({"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "a"}}), 1, true);
    let mut out = BytesMut::new();
    obj.write_item(&mut out);
    assert_eq!(&out[..], br#"{"metadata":{"name":"a"}}"#);
}

#[test]
fn writes_take_increasing_resource_versions_and_fill_the_history() {
    let store = Store::new(10, 2, None);
    let t = store.table("/configmaps", true);
    for i in 0..3 {
        t.write("ns", &format!("c{i}"), |_| Ok((Write::Put(json!({"metadata": {}})), ()))).unwrap();
    }
    assert_eq!(store.current_rv(), 13);
    assert!(t.events_after(10, u64::MAX).is_err(), "history keeps only 2 events");
    let evs = t.events_after(11, u64::MAX).unwrap();
    assert_eq!(evs.iter().map(|e| e.rv).collect::<Vec<_>>(), vec![12, 13]);
    // a budget of one line gives one event, of none still one
    let sizes: Vec<u64> = evs.iter().map(|e| line_len(e.kind, &e.obj)).collect();
    assert_eq!(sizes, evs.iter().map(|e| e.line().len() as u64).collect::<Vec<_>>());
    let one = sizes[0];
    assert_eq!(t.events_after(11, one).unwrap().len(), 1);
    assert_eq!(t.events_after(11, 0).unwrap().len(), 1);
    assert_eq!(t.events_after(11, one + 1).unwrap().len(), 2);
    assert_eq!((t.behind(11), t.behind(12), t.behind(13)), (sizes[0] + sizes[1], sizes[1], 0));
}

#[test]
fn an_object_serialized_before_its_version_is_known_reads_as_one_serialized_after() {
    let cases = [
        json!({"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "a", "resourceVersion": "3", "uid": "u"}, "data": {"k": "\"v\""}}),
        json!({"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "b"}, "spec": {"x": [1, 2.5, null, true]}}),
        json!({"metadata": {}}),
        json!({"no": "metadata"}),
        json!({"metadata": "not an object"}),
    ];
    for value in cases {
        let (kept, encoded) = Encoded::new(value.clone());
        let obj = encoded.into_obj(kept, 42, true);
        let mut want = value.clone();
        set_rv(&mut want, 42);
        assert_eq!(obj.bytes, Bytes::from(serde_json::to_vec(&want).unwrap()), "{value}");
        assert_eq!(obj.value, want);
        assert_eq!(obj.type_prefix, Obj::new(want, 42, true).type_prefix);
    }
}

#[test]
fn a_slow_write_holds_no_lock_readers_and_other_writers_need() {
    let store = Store::new(0, 10, None);
    let t = store.table("/configmaps", true);
    t.write("ns", "other", |_| Ok((Write::Put(json!({"metadata": {"name": "other"}})), ()))).unwrap();
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let slow = {
        let t = t.clone();
        std::thread::spawn(move || {
            t.write("ns", "slow", |_| {
                let _ = started_tx.send(());
                let _ = release_rx.recv_timeout(std::time::Duration::from_secs(10));
                Ok((Write::Put(json!({"metadata": {"name": "slow"}})), ()))
            })
        })
    };
    started_rx.recv().unwrap();
    // while the slow write computes, another object is read and written
    assert!(t.get("ns", "other").is_some());
    t.write("ns", "other", |_| Ok((Write::Put(json!({"metadata": {"name": "other", "labels": {"a": "b"}}})), ()))).unwrap();
    release_tx.send(()).unwrap();
    slow.join().unwrap().unwrap();
    assert_eq!(t.get("ns", "slow").map(|o| o.rv), Some(3));
}

#[test]
fn a_keep_decision_changes_nothing() {
    let store = Store::new(0, 10, None);
    let t = store.table("/configmaps", true);
    t.write("ns", "a", |_| Ok((Write::Put(json!({"metadata": {}})), ()))).unwrap();
    let (w, _) = t.write("ns", "a", |_| Ok((Write::Keep, ()))).unwrap();
    let Some(Written::Stored(obj)) = w else { panic!("kept object") };
    assert_eq!(obj.rv, 1);
    assert_eq!(store.current_rv(), 1);
}
