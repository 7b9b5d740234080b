"""Spies: `@kopf.on.event` handlers see every raw watch event (ADDED, MODIFIED, DELETED) as it
comes, without progress, retries or finalizers. An error in one is logged and forgotten: the
next event calls it again, and nothing else is held up."""

import collections

import bosun as kopf

seen = collections.Counter()  # event types seen so far, in this handler server


@kopf.on.event("kopfexamples")
def count_events(event, name, **_):
    seen[event["type"]] += 1
    print(f"{event['type']} of {name}; so far {dict(seen)}")


@kopf.on.event("kopfexamples")
def stumble(**_):
    raise RuntimeError("a spy that always fails")
