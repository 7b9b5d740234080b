import bosun


@bosun.on.create('kopfexamples')
def create_fn(**_):
    pass
