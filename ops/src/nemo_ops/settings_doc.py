"""`nemo settings`: every environment variable of the three services and the console, with
defaults.

The README's settings section is this command's output; a test keeps the two identical.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator

from pydantic import BaseModel, TypeAdapter
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from nemo_console.settings import ConsoleSettings
from nemo_context.settings import ContextSettings
from nemo_core.secret_files import FILE_SUFFIX, SECRET_FILE
from nemo_core.settings import ServiceSettings
from nemo_gateway.settings import GatewaySettings
from nemo_toolplane.settings import ToolPlaneSettings

HELP = "list every service setting (environment variable) with its default"

SERVICES: tuple[tuple[str, type[ServiceSettings]], ...] = (
    ("context", ContextSettings),
    ("gateway", GatewaySettings),
    ("toolplane", ToolPlaneSettings),
    ("console", ConsoleSettings),
)


def _default(field: FieldInfo) -> str:
    if field.default is PydanticUndefined and field.default_factory is None:
        return "required"
    value = field.get_default(call_default_factory=True)
    if value is None:
        return "unset"
    if value == {}:
        return "`{}`"
    if isinstance(value, list) and any(isinstance(item, BaseModel) for item in value):
        # As the environment variable takes it: JSON.
        return f"`{json.dumps(TypeAdapter(type(value)).dump_python(value, mode='json'))}`"
    return f"`{value}`"


def _describe(field: FieldInfo) -> tuple[str, str | None]:
    return _default(field), field.description


def _rows(prefix: str, fields: dict[str, FieldInfo]) -> Iterator[str]:
    yield "| variable | default | meaning |"
    yield "| --- | --- | --- |"
    for name, field in fields.items():
        variable = f"{prefix}{name.upper()}"
        yield f"| `{variable}` | {_default(field)} | {field.description} |"
        if SECRET_FILE in field.metadata:
            yield (
                f"| `{variable}{FILE_SUFFIX}` | unset | File holding {name} (for mounted "
                f"secrets); mutually exclusive with {name}. |"
            )


def render_markdown() -> str:
    """The settings as Markdown tables: common server settings, then each service's own."""
    common = ServiceSettings.model_fields
    lines = [
        "Every service reads these, each with its own prefix (`NEMO_CONTEXT_`, `NEMO_GATEWAY_`, "
        "`NEMO_TOOLPLANE_`, `NEMO_CONSOLE_`); a service's own default wins where it sets one. "
        "The console serves no gRPC: it uses the client side of these (its caller token, TLS, "
        "keepalive, message sizes) and its log level.",
        "",
        *_rows("NEMO_<SERVICE>_", dict(common)),
    ]
    for service, settings in SERVICES:
        prefix = str(settings.model_config.get("env_prefix", ""))
        own = {
            name: field
            for name, field in settings.model_fields.items()
            if name not in common or _describe(field) != _describe(common[name])
        }
        lines += ["", f"**{service}** (`{prefix}*`)", "", *_rows(prefix, own)]
    return "\n".join(lines) + "\n"


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.description = "Print every environment variable of the three services as Markdown."


def run_command(args: argparse.Namespace) -> int:
    print(render_markdown(), end="")
    return 0
