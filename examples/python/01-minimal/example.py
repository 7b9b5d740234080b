"""The least an operator needs: one handler, called once for each new KopfExample.

What the handler returns is stored in the object's status under the handler's id (its
function's name): here `status.welcome.message`, which `kubectl get kex` shows as WELCOME."""

import bosun as kopf


@kopf.on.create("kopfexamples")
def welcome(name, spec, logger, **_):
    logger.info(f"Welcoming {name}, whose spec is {dict(spec)}")
    return {"message": f"welcome, {name}"}
