"""The Python SDK's conformance server: exactly the handler set of tests/conformance/README.md,
registered with Kopf's decorators (`import bosun`). Serve it with

    BOSUN_LISTEN=127.0.0.1:50051 python -m bosun tests/conformance/python/server.py

The scenarios in tests/tests/conformance.rs run the real controller against it, and against
the Rust SDK's server (tests/conformance/rust/server.rs), and expect the same outcomes.

Every handler's behaviour is driven by the handled object's spec, so that one server serves
every scenario; handlers whose spec key is absent do nothing and return nothing.
"""

import copy
import os
import threading
import time

import bosun

KEX = ('kopf.dev', 'v1', 'kopfexamples')
TIMER_LABEL = 'conformance.bosun.dev/timer'
DAEMON_LABEL = 'conformance.bosun.dev/daemon'
SILENT_LABEL = 'conformance.bosun.dev/silent'
PATCHER_LABEL = 'conformance.bosun.dev/patcher'
BEAT = 0.1  # the patching daemon's beat, in seconds
RETRY_DELAY = 0.5  # the errors handler's temporary delay and backoff, in seconds

# The `retry` at which the startup activity succeeded in this process; None before.
STATE = {'startup': None}
# The timer's calls so far, per object uid (sync handlers run in threads).
TICKS = {}
TICKS_LOCK = threading.Lock()


@bosun.on.startup(id='startup')
def startup(retry, logger, **_):
    if retry == 0:
        raise bosun.TemporaryError("conformance: startup not ready at retry 0", delay=0.2)
    STATE['startup'] = retry
    logger.info("conformance: startup ran")


@bosun.on.probe(id='probe')
def probe(**_):
    return {'alive': True}


@bosun.on.cleanup(id='cleanup')
def cleanup(logger, **_):
    logger.info("conformance: cleanup ran")


@bosun.on.create(*KEX, id='create')
def create(spec, **_):
    return {'message': 'created', 'field': spec.get('field'), 'startup': STATE['startup']}


@bosun.on.update(*KEX, id='update')
def update(spec, **_):
    return {'message': 'updated', 'field': spec.get('field')}


@bosun.on.field(*KEX, field='spec.field', id='field')
def field(old, new, **_):
    return {'old': old, 'new': new}


@bosun.on.resume(*KEX, id='resume')
def resume(**_):
    return {'message': 'resumed'}


@bosun.on.delete(*KEX, id='delete')
def delete(body, name, **_):
    bosun.info(body, reason='Deleting', message=f"conformance: deleting {name}")


@bosun.on.create(*KEX, id='errors', backoff=RETRY_DELAY)
def errors(spec, retry, patch, **_):
    """Fails as `spec.fail` says until `spec.retriesBeforeSuccess` attempts failed."""
    fail = spec.get('fail')
    if fail is None:
        return None
    patch.status['attempts'] = retry + 1
    failing = retry < spec.get('retriesBeforeSuccess', 2)
    if fail == 'permanent':
        raise bosun.PermanentError("conformance: permanent failure")
    if fail == 'temporary' and failing:
        raise bosun.TemporaryError(f"conformance: temporary failure at retry {retry}", delay=RETRY_DELAY)
    if fail == 'unexpected' and failing:
        raise RuntimeError(f"conformance: unexpected failure at retry {retry}")
    if fail in ('temporary', 'unexpected'):
        return {'retry': retry}
    raise bosun.PermanentError(f"conformance: unknown spec.fail {fail!r}")


@bosun.on.create(*KEX, id='patch')
def patch_(spec, patch, **_):
    """Applies `spec.patch` as its merge patch, with a None (null) for each label of
    `spec.removeLabels` (the API server keeps no nulls in a spec, so they cannot come from
    `spec.patch`)."""
    if isinstance(spec.get('patch'), dict):
        patch.update(copy.deepcopy(spec['patch']))
    for key in spec.get('removeLabels') or []:
        patch.meta.labels[key] = None


@bosun.on.create(*KEX, id='events')
def events(spec, body, **_):
    """Posts every event of `spec.events` about the object."""
    for event in spec.get('events') or []:
        bosun.event(body, type=event.get('type', ''), reason=event.get('reason', ''), message=event.get('message', ''))


@bosun.on.create(*KEX, id='children')
def children(spec, **_):
    """Has the controller create and adopt a ConfigMap with `spec.child` as its data."""
    if 'child' not in spec:
        return None
    bosun.own({'apiVersion': 'v1', 'kind': 'ConfigMap', 'data': spec['child']}, copy_labels=True)
    return {'message': 'child requested'}


@bosun.on.create(*KEX, id='subhandlers')
def subhandlers(spec, **_):
    """Declares one sub-handler per item of `spec.items`."""
    for item in spec.get('items') or []:

        @bosun.subhandler(id=item)
        def subhandler(item=item, **_):
            return {'item': item}


@bosun.timer(*KEX, id='timer', interval=0.5, labels={TIMER_LABEL: 'yes'})
def timer(uid, patch, **_):
    """Counts its calls per object (in the process: the object a timer gets may be older than
    the controller's last write) and patches the count into `status.ticks`."""
    with TICKS_LOCK:
        TICKS[uid] = TICKS.get(uid, 0) + 1
        patch.status['ticks'] = TICKS[uid]


@bosun.daemon(*KEX, id='daemon', labels={DAEMON_LABEL: 'yes'})
def daemon(stopped, body, namespace, name, logger, **_):
    """Says it started (a log line and an event), waits to be stopped, and says so on stdout."""
    logger.info("conformance: daemon started")
    bosun.info(body, reason='DaemonStarted', message="conformance: daemon started")
    while not stopped.wait(0.5):
        pass
    print(f"conformance: daemon stopped for {namespace}/{name}", flush=True)


@bosun.daemon(*KEX, id='silent', labels={SILENT_LABEL: 'yes'})
def silent(stopped, namespace, name, **_):
    """Sends nothing while it runs (it says so on stdout only), and takes 1 s to wind down once
    stopped: the controller must wait for it all the same."""
    print(f"conformance: silent daemon started for {namespace}/{name}", flush=True)
    while not stopped:
        time.sleep(0.1)
    time.sleep(1)
    print(f"conformance: silent daemon stopped for {namespace}/{name}", flush=True)


@bosun.daemon(*KEX, id='patcher', labels={PATCHER_LABEL: 'yes'})
def patcher(stopped, patch, namespace, name, **_):
    """Patches its beat count every 100 ms while it runs, and once more when stopped, as it ends
    (the Python SDK sends a daemon's patch when it exits, as Kopf: the last count, with the end)."""
    print(f"conformance: patcher started for {namespace}/{name}", flush=True)
    beats = 0
    while not stopped.wait(BEAT):
        beats += 1
        patch.setdefault('status', {})['beats'] = beats
    patch.setdefault('status', {})['patcher'] = 'stopped'
    print(f"conformance: patcher stopped for {namespace}/{name}", flush=True)


@bosun.on.create(*KEX, id='crash', backoff=RETRY_DELAY)
def crash(spec, retry, **_):
    """On its first call for an object with `spec.crash`, ends its own server at once (as an
    OOM kill or a segfault would: no answer, no cleanup); answers on the next call."""
    if not spec.get('crash'):
        return None
    if retry == 0:
        print("conformance: crashing", flush=True)
        os._exit(3)
    return {'retry': retry}


if os.environ.get('CONFORMANCE_EXTRA'):
    @bosun.on.create(*KEX, id='extra')
    def extra(**_):
        """Registered only with `CONFORMANCE_EXTRA` set (a server started again with a changed
        registry)."""
        return {'message': 'extra'}
