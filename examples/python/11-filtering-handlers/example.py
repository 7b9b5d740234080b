"""Filters: which handlers are called for which objects, decided before the call.

- `labels=` and `annotations=`: a value to equal, `kopf.PRESENT`, `kopf.ABSENT`, or a callback
  given the value (callbacks combine with `kopf.all_`, `kopf.any_`, `kopf.none_`);
- `when=`: a callback given the handler's own kwargs;
- `field=` with `value=` (creation, daemons) or with `old=`/`new=` (updates).

A handler filtered out is not called and does not count as failed: `obj.yaml` matches the
`*_matches` handlers below and none of the `*_never` ones."""

import bosun as kopf


def is_somevalue(value, **_):
    return value == "somevalue"


def is_othervalue(value, **_):
    return value == "othervalue"


def has_items(spec, **_):
    return bool(spec.get("items"))


@kopf.on.create("kopfexamples", labels={"somelabel": "somevalue"})
def label_value_matches(logger, **_):
    logger.info("matched: somelabel=somevalue")


@kopf.on.create("kopfexamples", labels={"somelabel": kopf.PRESENT, "otherlabel": kopf.ABSENT})
def label_presence_matches(logger, **_):
    logger.info("matched: somelabel present, otherlabel absent")


@kopf.on.create("kopfexamples", labels={"somelabel": kopf.any_([is_othervalue, is_somevalue])})
def label_callbacks_match(logger, **_):
    logger.info("matched: somelabel's callbacks")


@kopf.on.create("kopfexamples", labels={"otherlabel": kopf.PRESENT})
def label_presence_never(logger, **_):
    logger.info("never: otherlabel present")


@kopf.on.create("kopfexamples", annotations={"someannotation": is_somevalue})
def annotation_callback_matches(logger, **_):
    logger.info("matched: someannotation's callback")


@kopf.on.create("kopfexamples", annotations={"someannotation": "othervalue"})
def annotation_value_never(logger, **_):
    logger.info("never: someannotation=othervalue")


@kopf.on.create("kopfexamples", when=lambda name, **_: name.startswith("kopf-example-"))
def when_matches(logger, **_):
    logger.info("matched: the name's prefix")


@kopf.on.create("kopfexamples", when=kopf.none_([has_items]))
def when_never(logger, **_):
    logger.info("never: no items")


@kopf.on.create("kopfexamples", field="spec.field", value="value")
def field_value_matches(logger, **_):
    logger.info("matched: spec.field=value")


@kopf.on.create("kopfexamples", field="spec.missing", value=kopf.PRESENT)
def field_presence_never(logger, **_):
    logger.info("never: spec.missing present")


@kopf.on.update("kopfexamples", field="spec.field", old="value", new="changed")
def field_change_matches(logger, **_):
    logger.info("matched: spec.field went from value to changed")


@kopf.on.update("kopfexamples", field="spec.field", new="something-else")
def field_change_never(logger, **_):
    logger.info("never: spec.field became something-else")


@kopf.daemon("kopfexamples", field="spec.field", value="changed")
def watch_changed(stopped, logger, **_):
    logger.info("matched: a daemon for as long as spec.field=changed")
    stopped.wait()
