"""
Send the custom events for the handled or other objects.
"""
import bosun


@bosun.on.create('kopfexamples')
def create_fn(body, **kwargs):

    # The all-purpose function for the event creation.
    bosun.event(body, type="SomeType", reason="SomeReason", message="Some message")

    # The shortcuts for the conventional events and common cases.
    bosun.info(body, reason="SomeReason", message="Some message")
    bosun.warn(body, reason="SomeReason", message="Some message")

    try:
        raise RuntimeError("Exception text.")
    except Exception:
        bosun.exception(body, reason="SomeReason", message="Some exception:")
