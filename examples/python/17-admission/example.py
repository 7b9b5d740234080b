from typing import List

import bosun

# Kopf's startup handler here chose the webhook server (local, K3d, Minikube, ngrok) through
# `settings.admission.server` and named the managed configurations `auto.kopf.dev`. With Bosun
# the controller serves the webhooks and keeps the configurations: its flags choose how
# (`--admission-listen`, `--admission-url`, `--admission-service`, `--admission-cert`,
# `--admission-configuration`, default `auto.bosun.dev`).


@bosun.on.validate('kopfexamples')
def authhook(userinfo, warnings: List[str], **_):
    # Kopf's original reads the User-Agent header and the TLS peer, which the controller does
    # not pass on; the request's user is what the API server vouches for.
    warnings.append(f"Accessing as user: {userinfo.get('username', '(unidentified)')}")


@bosun.on.validate('kopfexamples')
def validate1(spec, dryrun, **_):
    if not dryrun and spec.get('field') == 'wrong':
        raise bosun.AdmissionError("Meh! I don't like it. Change the field.")


@bosun.on.validate('kopfexamples', field='spec.field', value='not-allowed')
def validate2(**_):
    raise bosun.AdmissionError("I'm too lazy anyway. Go away!", code=555)


@bosun.on.mutate('kopfexamples', labels={'somelabel': 'somevalue'})
def mutate1(patch: bosun.Patch, **_):
    patch.spec['injected'] = 123
