import bosun


@bosun.on.resume('kopfexamples')
def resume_fn_1(**kwargs):
    print('RESUMED 1st')


@bosun.on.create('kopfexamples')
def create_fn_1(**kwargs):
    print('CREATED 1st')


@bosun.on.resume('kopfexamples')
def resume_fn_2(**kwargs):
    print('RESUMED 2nd')


@bosun.on.create('kopfexamples')
def create_fn_2(**kwargs):
    print('CREATED 2nd')


@bosun.on.update('kopfexamples')
def update_fn(old, new, diff, **kwargs):
    print('UPDATED')


@bosun.on.delete('kopfexamples')
def delete_fn_1(**kwargs):
    print('DELETED 1st')


@bosun.on.delete('kopfexamples')
def delete_fn_2(**kwargs):
    print('DELETED 2nd')


@bosun.on.field('kopfexamples', field='spec.field')
def field_fn(old, new, **kwargs):
    print(f'FIELD CHANGED: {old} -> {new}')
