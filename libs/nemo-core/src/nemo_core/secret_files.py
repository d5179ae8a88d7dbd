"""Secrets from mounted files: ``<VARIABLE>_FILE`` names a file that holds ``<VARIABLE>``.

A settings field marked :data:`SECRET_FILE` (``Annotated[SecretStr | None, SECRET_FILE]``) is
read by :class:`SecretFileSource` from the file its ``_FILE`` variable names, for example
``NEMO_CONTEXT_PSEUDONYM_KEY_FILE`` for ``pseudonym_key``: the way Kubernetes mounts secrets. The
file's surrounding whitespace is not part of the secret (mounts often end with a newline); a
field of JSON type (the caller token maps) holds JSON. Setting both the variable and its file is
an error, and no error ever quotes a file's content.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    InitSettingsSource,
    PydanticBaseSettingsSource,
    SettingsError,
)

FILE_SUFFIX: Final = "_FILE"


@dataclass(frozen=True)
class _SecretFile:
    """The marker of a field that may come from a file."""


SECRET_FILE: Final = _SecretFile()


def read_secret_file(path: str | Path) -> str:
    """The secret in ``path``, without the whitespace around it."""
    return Path(path).read_text(encoding="utf-8").strip()


def secret_file_fields(settings_cls: type[BaseSettings]) -> dict[str, FieldInfo]:
    """The fields of ``settings_cls`` marked :data:`SECRET_FILE`, by name."""
    return {
        name: field
        for name, field in settings_cls.model_fields.items()
        if SECRET_FILE in field.metadata
    }


def file_variable(settings_cls: type[BaseSettings], name: str) -> str:
    """The variable naming the file of field ``name``: ``NEMO_CONTEXT_PSEUDONYM_KEY_FILE``."""
    prefix = str(settings_cls.model_config.get("env_prefix", ""))
    return f"{prefix}{name}{FILE_SUFFIX}".upper()


class SecretFileSource(PydanticBaseSettingsSource):
    """Values of the :data:`SECRET_FILE` fields whose ``_FILE`` variable is set."""

    def __init__(
        self,
        settings_cls: type[BaseSettings],
        init_settings: InitSettingsSource,
        env_settings: EnvSettingsSource,
    ) -> None:
        super().__init__(settings_cls)
        self._given = set(init_settings.init_kwargs)
        self._environment = env_settings.env_vars
        self._case_sensitive = bool(env_settings.case_sensitive)

    def _lookup(self, variable: str) -> str | None:
        return self._environment.get(variable if self._case_sensitive else variable.lower())

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        """The secret of ``field_name`` from its file, or None when no file is named."""
        file_name = file_variable(self.settings_cls, field_name)
        path = self._lookup(file_name)
        if not path:
            return None, field_name, False
        variable = file_name.removesuffix(FILE_SUFFIX)
        if field_name in self._given or self._lookup(variable) is not None:
            raise SettingsError(f"set {variable} or {file_name}, not both")
        secret = read_secret_file(path)
        if not self.field_is_complex(field):
            return secret, field_name, False
        try:
            return json.loads(secret), field_name, True
        except ValueError:
            # json's own message would quote the content.
            raise SettingsError(f"{file_name} must hold JSON") from None

    def __call__(self) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for name, field in secret_file_fields(self.settings_cls).items():
            value, key, _ = self.get_field_value(field, name)
            if value is not None:
                values[key] = value
        return values
