import bosun


class MyException(Exception):
    pass


@bosun.on.create('kopfexamples')
def instant_failure_with_only_a_message(**kwargs):
    raise bosun.PermanentError("Fail once and for all.")


@bosun.on.create('kopfexamples')
def eventual_success_with_few_messages(retry, **kwargs):
    if retry < 3:  # 0, 1, 2, 3
        raise bosun.TemporaryError("Expected recoverable error.", delay=1.0)


@bosun.on.create('kopfexamples', retries=3, backoff=1.0)
def eventual_failure_with_tracebacks(**kwargs):
    raise MyException("An error that is supposed to be recoverable.")


@bosun.on.create('kopfexamples', errors=bosun.ErrorsMode.PERMANENT, backoff=1.0)
def instant_failure_with_traceback(**kwargs):
    raise MyException("An error that is supposed to be recoverable.")
