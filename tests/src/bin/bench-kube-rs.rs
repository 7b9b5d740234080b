//! The bench's reference: a bare controller written directly on kube-rs's
//! `kube::runtime::Controller`, doing what Kopf's example 01 does — `create_fn` stores
//! `{"message": "hello world"}` at `status.create_fn` once per object — and with `--delete`
//! a `delete_fn` behind a finalizer (`kube::runtime::finalizer`). Each call of `create_fn`
//! notes `NAME TIME_NS` in the file named by `BENCH_RECORD`, as the bench's other operators
//! do. It reads `KUBECONFIG`, watches all namespaces and changes none of kube-rs's defaults
//! (its reflector cache included): the floor a hand-written Rust controller sets.

use std::sync::Arc;
use std::time::Duration;

use bosun_tests::record::Recorder;
use futures::StreamExt;
use kube::ResourceExt;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::finalizer::{self, Event, finalizer};
use kube::runtime::watcher;
use serde_json::json;

const FINALIZER: &str = "bench.bosun.dev/kube-rs";

struct Ctx {
    client: kube::Client,
    resource: ApiResource,
    record: Recorder,
    with_delete: bool,
}

type Error = finalizer::Error<kube::Error>;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let with_delete = std::env::args().skip(1).any(|a| a == "--delete");
    let record = Recorder::from_env()?;
    let client = kube::Client::try_default().await?;
    let resource = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("kopf.dev", "v1", "KopfExample"), "kopfexamples");
    let api = Api::<DynamicObject>::all_with(client.clone(), &resource);
    let ctx = Arc::new(Ctx { client, resource: resource.clone(), record, with_delete });
    Controller::new_with(api, watcher::Config::default(), resource)
        .shutdown_on_signal()
        .run(reconcile, |_, _, _| Action::requeue(Duration::from_secs(1)), ctx)
        .for_each(|_| async {})
        .await;
    Ok(())
}

async fn reconcile(obj: Arc<DynamicObject>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let api = Api::<DynamicObject>::namespaced_with(ctx.client.clone(), &obj.namespace().unwrap_or_default(), &ctx.resource);
    if !ctx.with_delete {
        return create_fn(&api, &obj, &ctx).await.map_err(Error::ApplyFailed);
    }
    finalizer(&api, FINALIZER, obj, |event| async {
        match event {
            Event::Apply(obj) => create_fn(&api, &obj, &ctx).await,
            // delete_fn: nothing to clean up, as in the bench's other operators.
            Event::Cleanup(_) => Ok(Action::await_change()),
        }
    })
    .await
}

/// Stores the result unless it is there already (the echo of its own patch, a relist).
async fn create_fn(api: &Api<DynamicObject>, obj: &DynamicObject, ctx: &Ctx) -> Result<Action, kube::Error> {
    if obj.data.get("status").and_then(|s| s.get("create_fn")).is_some() {
        return Ok(Action::await_change());
    }
    let name = obj.name_any();
    ctx.record.note(&name);
    let patch = json!({"status": {"create_fn": {"message": "hello world"}}});
    api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
    Ok(Action::await_change())
}
