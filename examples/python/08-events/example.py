import bosun


@bosun.on.event('kopfexamples')
def event_fn_with_error(**kwargs):
    raise Exception("Oops!")


@bosun.on.event('kopfexamples')
def normal_event_fn(event, **kwargs):
    print(f"Event received: {event!r}")
