"""Kopf's storages of state on objects: where handlers' progress records
(`settings.persistence.progress_storage`) and the last handled configuration
(`settings.persistence.diffbase_storage`) are kept.

Here they are descriptions: the controller reads and writes the state, so each storage keeps
Kopf's constructor parameters as attributes, which the settings' conversion sends to the
controller. Subclasses with methods of their own (custom storages) cannot run in the controller
and are reported as ignored."""

from __future__ import annotations

from typing import Collection, Iterable, List, Optional, TypedDict

from ._bodies import FieldPath, FieldSpec, parse_field


class ProgressRecord(TypedDict, total=False):
    """One handler's progress on one object (Kopf's `kopf.ProgressRecord`)."""

    started: Optional[str]
    stopped: Optional[str]
    delayed: Optional[str]
    purpose: Optional[str]
    retries: Optional[int]
    success: Optional[bool]
    failure: Optional[bool]
    message: Optional[str]
    subrefs: Optional[Collection[str]]


def _named_field(field: FieldSpec, name: str) -> FieldPath:
    """`'status.{name}.progress'` with the storage's name → a path."""
    return parse_field(field.format(name=name) if isinstance(field, str) else field)


class _Prefixed:
    """Annotations under `<prefix>/…`; `v1` also writes Kopf's older, shorter keys."""

    def __init__(self, *, prefix: str, v1: bool) -> None:
        if not prefix:
            raise ValueError("Annotations storages must be prefixed.")
        self.prefix = prefix
        self.v1 = v1


class ProgressStorage:
    """Where handlers' progress is kept (Kopf's base class)."""


class AnnotationsProgressStorage(_Prefixed, ProgressStorage):
    """Progress in annotations `<prefix>/<handler-id>`, one JSON record each."""

    def __init__(self, *, prefix: str = "kopf.zalando.org", verbose: bool = False, touch_key: str = "touch-dummy",
                 v1: bool = True) -> None:
        super().__init__(prefix=prefix, v1=v1)
        self.verbose = verbose
        self.touch_key = touch_key


class _InStatus:
    """A storage under a status field whose `{name}` is the storage's name."""

    _name: str
    _field: FieldPath

    @property
    def field(self) -> FieldPath:
        return self._field

    @field.setter
    def field(self, field: FieldSpec) -> None:
        self._field = _named_field(field, self._name)


class StatusProgressStorage(_InStatus, ProgressStorage):
    """Progress in the status, under `field` (`status.kopf.progress`)."""

    def __init__(self, *, name: str = "kopf", field: FieldSpec = "status.{name}.progress",
                 touch_field: FieldSpec = "status.{name}.dummy") -> None:
        self._name = name
        self._field = _named_field(field, name)
        self._touch_field = _named_field(touch_field, name)


    @property
    def touch_field(self) -> FieldPath:
        return self._touch_field

    @touch_field.setter
    def touch_field(self, field: FieldSpec) -> None:
        self._touch_field = _named_field(field, self._name)


class NoWriteStatusProgressStorage(StatusProgressStorage):
    """Progress read from the status but not written there (the second half of
    `SmartProgressStorage`)."""


class MultiProgressStorage(ProgressStorage):
    """Several storages: records are read from the first that has them, written to all."""

    def __init__(self, storages: Collection[ProgressStorage]) -> None:
        self.storages = storages


class SmartProgressStorage(MultiProgressStorage):
    """Kopf's default: written to annotations, also read from the status (where older Kopf
    versions wrote)."""

    def __init__(self, *, name: str = "kopf", field: FieldSpec = "status.{name}.progress",
                 touch_key: str = "touch-dummy", touch_field: FieldSpec = "status.{name}.dummy",
                 prefix: str = "kopf.zalando.org", v1: bool = True, verbose: bool = False) -> None:
        super().__init__([
            AnnotationsProgressStorage(v1=v1, prefix=prefix, verbose=verbose, touch_key=touch_key),
            NoWriteStatusProgressStorage(name=name, field=field, touch_field=touch_field),
        ])


class DiffBaseStorage:
    """Where the last handled configuration is kept (Kopf's base class); `ignored_fields`
    are left out of it, so their changes cause no update."""

    def __init__(self, ignored_fields: Optional[Iterable[FieldSpec]] = None) -> None:
        self.ignored_fields: List[FieldSpec] = list(ignored_fields or [])


class AnnotationsDiffBaseStorage(_Prefixed, DiffBaseStorage):
    """The last handled configuration in the annotation `<prefix>/<key>`."""

    def __init__(self, *, prefix: str = "kopf.zalando.org", key: str = "last-handled-configuration",
                 ignored_fields: Optional[Iterable[FieldSpec]] = None, v1: bool = True) -> None:
        _Prefixed.__init__(self, prefix=prefix, v1=v1)
        DiffBaseStorage.__init__(self, ignored_fields=ignored_fields)
        self.key = key


class StatusDiffBaseStorage(_InStatus, DiffBaseStorage):
    """The last handled configuration in the status, under `field`."""

    def __init__(self, *, name: str = "kopf", field: FieldSpec = "status.{name}.last-handled-configuration",
                 ignored_fields: Optional[Iterable[FieldSpec]] = None) -> None:
        super().__init__(ignored_fields=ignored_fields)
        self._name = name
        self._field = _named_field(field, name)


class MultiDiffBaseStorage(DiffBaseStorage):
    """Several storages: read from the first that has it, written to all."""

    def __init__(self, storages: Collection[DiffBaseStorage]) -> None:
        super().__init__()
        self.storages = storages
