"""What a handler's exceptions mean, and how often it is called again.

- `kopf.TemporaryError`: try again after `delay` seconds (the attempt number is `retry`).
- `kopf.PermanentError`: give up at once; the handler counts as failed for good.
- Any other exception: unexpected, retried every `backoff` seconds, at most `retries` times,
  unless `errors=` says otherwise (`kopf.ErrorsMode.PERMANENT`: give up at once).

Whatever fails, the other handlers of the object still run."""

import bosun as kopf


class QuotaExceeded(Exception):
    """An error of our own, not one of Kopf's: unexpected, so it is logged with its traceback."""


@kopf.on.create("kopfexamples")
def wait_for_the_quota(retry, logger, **_):
    if retry < 2:  # attempts 0 and 1 fail; attempt 2 succeeds
        raise kopf.TemporaryError(f"no quota yet (attempt {retry})", delay=1)
    logger.info(f"Got the quota at attempt {retry}.")


@kopf.on.create("kopfexamples")
def refuse_the_spec(spec, **_):
    raise kopf.PermanentError(f"field={spec.get('field')!r} cannot be served here")


@kopf.on.create("kopfexamples", retries=2, backoff=1)
def call_a_flaky_service(retry, **_):
    raise QuotaExceeded(f"the service is down (attempt {retry})")


@kopf.on.create("kopfexamples", errors=kopf.ErrorsMode.PERMANENT)
def parse_strictly(**_):
    raise ValueError("no second chance for a parsing error")
