"""The checks every layer shares: pydantic errors as a ConfigError that names the field and the
fix, provider and plugin options validated by name, URLs, and secrets read from where the plan
points (an environment variable or a file).

A leaf: it imports only the other leaves (errors, secrets), so the plugin contract, the cost
catalog and the registry can validate their input without importing the plan model
(``_plan._config``) that is built on top of them.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import typing
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

from pydantic import BaseModel, SecretStr, ValidationError

from ._errors import ConfigError
from ._secrets import remember, scrub

M = TypeVar("M", bound=BaseModel)


def whole_number(value: Any) -> int | None:
    """A JSON integer (not a bool), such as a count a server reported, else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _location(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


class NestedError(ValueError):
    """Raised by a field validator that validated the field's table as a model of its own (a
    union of a number and a table, whose pydantic error would list both branches):
    ``config_error`` reports the model's problem at the field's path, unknown keys included."""

    def __init__(self, error: ValidationError, model: type[BaseModel]) -> None:
        super().__init__(str(error))
        self.error = error
        self.model = model


def config_error(
    exc: ValidationError,
    prefix: str = "",
    model: Any = None,
    where: str | None = None,
    also: Iterable[str] = (),
) -> ConfigError:
    """The clearest problem of a pydantic ValidationError as a ConfigError, with the count of
    the rest: a ConfigError a validator raised first, then an unknown key (named with the
    closest valid one of ``model``, the model or dataclass validated), then the first error."""
    errors = exc.errors(include_url=False)
    more = f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
    for err in errors:
        inner = (err.get("ctx") or {}).get("error")
        if isinstance(inner, NestedError):  # a table a field's validator checked as a model
            at = ".".join(p for p in (prefix, _location(tuple(err["loc"]))) if p)
            return config_error(inner.error, at, inner.model)
        if isinstance(inner, ConfigError):  # raised by a validator: it names its own field
            loc = _location(tuple(err["loc"]))
            field = ".".join(p for p in (prefix, loc, inner.field) if p)
            return ConfigError(field, inner.value, inner.expected)
    extra = [e for e in errors if e["type"] in _UNKNOWN]
    first = extra[0] if extra else errors[0]
    loc = _location(tuple(first["loc"]))
    field = f"{prefix}.{loc}" if prefix and loc else (prefix or loc or "config")
    if extra:
        *parent, key = first["loc"]
        inside, base = _location(tuple(parent)), where or prefix
        place = f"{base}.{inside}" if base and inside else (base or inside or "the plan")
        valid = {*_keys_at(model, parent), *also} - {"api_key"}  # api_key: never in a plan
        return unknown_key(field, str(key), place, valid, more)
    expected = _plain(first["msg"])
    value = scrub(first.get("input"))  # a nested credential-named value is never shown
    if first["type"] in ("missing", "missing_argument"):
        value, expected = "(nothing)", "a value: this field is required"
    return ConfigError(field, value, expected + more)


_UNKNOWN = ("extra_forbidden", "unexpected_keyword_argument")
# pydantic's messages read "expected Input should be a valid dictionary" after "got X;
# expected": say what is expected, in the plan's words (a TOML table, a list).
_PYDANTIC_PREFIXES = ("Input should be ", "Value error, ", "Assertion failed, ")
_PLAN_WORDS = {"a valid dictionary": "a table", "a valid tuple": "a list", "a valid list": "a list"}


def _plain(message: str) -> str:
    for prefix in _PYDANTIC_PREFIXES:
        if message.startswith(prefix):
            message = message[len(prefix) :]
            break
    for word, plan_word in _PLAN_WORDS.items():
        message = message.replace(word, plan_word)
    return message


def unknown_key(
    field: str, key: str, place: str, valid: Iterable[str], more: str = ""
) -> ConfigError:
    """A key that is no field, named with the closest valid one. Its value is never shown:
    an unknown field may well be a misplaced secret."""
    names = sorted(valid)
    close = difflib.get_close_matches(key, names, n=1, cutoff=0.6)
    if close:
        fix = f"did you mean {close[0]!r}?"
    elif names:
        fix = f"remove it (valid keys: {', '.join(names)})"
    else:
        fix = "remove it"
    message = f"unknown key {key!r} in {place}; {fix}{more}"
    return ConfigError(field, "(not shown)", f"no such field: {fix}", message=message)


def _keys_at(model: Any, loc: Sequence[int | str]) -> list[str]:
    """The field names of ``model`` (a pydantic model or dataclass) at the path ``loc``."""
    for part in loc:
        if model is None:
            return []
        if isinstance(part, int):
            args = [a for a in typing.get_args(model) if a is not type(None)]
            model = args[0] if args else None
            continue
        model = _field_types(model).get(str(part))
        args = [a for a in typing.get_args(model) if a is not type(None)]
        if args and typing.get_origin(model) is not list:
            model = args[0]  # Optional[X] -> X
    return list(_field_types(model)) if model is not None else []


def _field_types(model: Any) -> dict[str, Any]:
    if isinstance(model, type) and issubclass(model, BaseModel):
        return {n: f.annotation for n, f in model.model_fields.items()}
    if dataclasses.is_dataclass(model):
        return {f.name: f.type for f in dataclasses.fields(model)}
    return {}


def validate_options(
    model: type[M], data: Mapping[str, Any], prefix: str, also: Iterable[str] = ()
) -> M:
    """``model`` from ``data``; ``also`` are other keys valid where ``data`` was written."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise config_error(exc, prefix, model, also=also) from None


def check_url(field: str, url: str, *, host_only_ok: bool = False) -> None:
    """Refuse what is not an absolute http(s) URL with a host (``ConfigError`` naming
    ``field``); ``host_only_ok`` also accepts a bare ``host[:port]`` (an API endpoint host)."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError as exc:
        raise ConfigError(field, url, f"a URL like https://host/path ({exc})") from None
    if any(c.isspace() for c in url) or not url:
        problem = "no spaces" if url else "not empty"
    elif host_only_ok and "://" not in url:
        return
    elif parts.scheme not in ("http", "https"):
        problem = "a scheme, http:// or https://"
    elif not parts.hostname:
        problem = "a host after the scheme"
    else:
        return
    raise ConfigError(field, url, f"a URL like https://host/path: {problem}")


def resolve_secret(field: str, *, env: str | None, file: str | None) -> SecretStr | None:
    """Read a secret from the named environment variable or file; ``None`` if neither is given."""
    if env and file:
        raise ConfigError(field, {"env": env, "file": file}, "only one of *_env or *_file")
    if env:
        value = os.environ.get(env)
        if not value:
            raise ConfigError(
                f"{field}_env", env, f"an environment variable that is set: export {env}=..."
            )
    elif file:
        path = Path(file).expanduser()
        try:
            value = path.read_text(encoding="utf-8-sig").strip()  # a BOM is no part of a key
        except OSError as exc:
            raise ConfigError(f"{field}_file", file, f"a readable file ({exc.strerror})") from None
        except UnicodeDecodeError:
            raise ConfigError(f"{field}_file", file, "a UTF-8 text file") from None
        if not value:
            raise ConfigError(f"{field}_file", file, "a file that contains the secret")
    else:
        return None
    remember(value)
    return SecretStr(value)
