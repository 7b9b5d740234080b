"""An operator and its tests (`test_example.py`, run with pytest): the handler tags each new
object with a checksum of its spec, and the tests check that it did, end to end."""

import hashlib
import json

import bosun as kopf


@kopf.on.create("kopfexamples")
def checksum(spec, logger, **_):
    digest = hashlib.sha256(json.dumps(dict(spec), sort_keys=True).encode()).hexdigest()[:12]
    logger.info(f"The spec's checksum is {digest}.")
    return digest  # stored as status.checksum
