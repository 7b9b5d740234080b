import bosun


def say_yes(value, spec, **_):
    return value == 'somevalue' and spec.get('field') is not None


def say_no(value, spec, **_):
    return value == 'somevalue' and spec.get('field') == 'not-this-value-for-sure'


@bosun.on.create('kopfexamples', labels={'somelabel': 'somevalue'})
def create_with_labels_matching(logger, **kwargs):
    logger.info("Label is matching.")


@bosun.on.create('kopfexamples', labels={'somelabel': bosun.PRESENT})
def create_with_labels_present(logger, **kwargs):
    logger.info("Label is present.")


@bosun.on.create('kopfexamples', labels={'nonexistent': bosun.ABSENT})
def create_with_labels_absent(logger, **kwargs):
    logger.info("Label is absent.")


@bosun.on.create('kopfexamples', labels={'somelabel': say_yes})
def create_with_labels_callback_matching(logger, **kwargs):
    logger.info("Label callback matching.")


@bosun.on.create('kopfexamples', annotations={'someannotation': 'somevalue'})
def create_with_annotations_matching(logger, **kwargs):
    logger.info("Annotation is matching.")


@bosun.on.create('kopfexamples', annotations={'someannotation': bosun.PRESENT})
def create_with_annotations_present(logger, **kwargs):
    logger.info("Annotation is present.")


@bosun.on.create('kopfexamples', annotations={'nonexistent': bosun.ABSENT})
def create_with_annotations_absent(logger, **kwargs):
    logger.info("Annotation is absent.")


@bosun.on.create('kopfexamples', annotations={'someannotation': say_no})
def create_with_annotations_callback_matching(logger, **kwargs):
    logger.info("Annotation callback mismatch.")


@bosun.on.create('kopfexamples', when=lambda body, **_: True)
def create_with_filter_satisfied(logger, **kwargs):
    logger.info("Filter satisfied.")


@bosun.on.create('kopfexamples', when=lambda body, **_: False)
def create_with_filter_not_satisfied(logger, **kwargs):
    logger.info("Filter not satisfied.")


@bosun.on.create('kopfexamples', field='spec.field', value='value')
def create_with_field_value_satisfied(logger, **kwargs):
    logger.info("Field value is satisfied.")


@bosun.on.create('kopfexamples', field='spec.field', value='something-else')
def create_with_field_value_not_satisfied(logger, **kwargs):
    logger.info("Field value is not satisfied.")


@bosun.on.create('kopfexamples', field='spec.field', value=bosun.PRESENT)
def create_with_field_presence_satisfied(logger, **kwargs):
    logger.info("Field presence is satisfied.")


@bosun.on.create('kopfexamples', field='spec.inexistent', value=bosun.PRESENT)
def create_with_field_presence_not_satisfied(logger, **kwargs):
    logger.info("Field presence is not satisfied.")


@bosun.on.update('kopfexamples',
                 field='spec.field', old='value', new='changed')
def update_with_field_change_satisfied(logger, **kwargs):
    logger.info("Field change is satisfied.")


@bosun.daemon('kopfexamples', field='spec.field', value='value')
def daemon_with_field(stopped, logger, **kwargs):
    while not stopped:
        logger.info("Field daemon is satisfied.")
        stopped.wait(1)
