from typing import Any

import bosun as kopf


@kopf.on.create('kopfexamples')
def create_fn(**_: Any) -> None:
    pass
