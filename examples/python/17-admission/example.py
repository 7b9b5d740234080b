"""Admission webhooks: handlers that judge (`@kopf.on.validate`) or amend (`@kopf.on.mutate`)
an object before the API server stores it. An `kopf.AdmissionError` denies the request with
its message (and `code`); `warnings` go back to the client (kubectl prints them); a mutating
handler's `patch` is applied to the object being stored.

A startup handler chooses the webhook server and the name of the webhook configurations
the operator creates and keeps up to date (`managed`)."""

import bosun as kopf


@kopf.on.startup()
def serve_webhooks(settings, **_):
    settings.admission.server = kopf.WebhookAutoServer()  # a local HTTPS server, its own CA
    settings.admission.managed = "examples.bosun.dev"


@kopf.on.validate("kopfexamples")
def forbid_the_empty_field(spec, **_):
    if spec.get("field") == "":
        raise kopf.AdmissionError("spec.field must not be empty.")


@kopf.on.validate("kopfexamples", field="spec.field", value="reserved")
def forbid_reserved(**_):
    raise kopf.AdmissionError("'reserved' is reserved for the operator.", code=403)


@kopf.on.validate("kopfexamples")
def advise(spec, dryrun, warnings, **_):
    if not spec.get("items"):
        warnings.append("spec.items is empty: there is nothing to serve.")
    if dryrun:
        warnings.append("A dry run: nothing is stored.")


@kopf.on.validate("kopfexamples", subresource="status")
def guard_the_status(status, **_):
    if status.get("approved") and not isinstance(status["approved"], bool):
        raise kopf.AdmissionError("status.approved must be true or false.")


@kopf.on.mutate("kopfexamples")
def default_the_duration(spec, patch, **_):
    if "duration" not in spec:
        patch.spec["duration"] = "1m"
