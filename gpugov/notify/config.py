"""Sink specs ("slack", "feishu:text") plus their URLs and secrets from the environment or a file.

Settings are environment-variable names (GPUGOV_SLACK_WEBHOOK_URL...). A --notify-config file holds
the same names, as NAME=VALUE lines or YAML, or YAML sections per platform; a value in the file
wins over the environment. No error message here quotes a value, only the name it came from.
A chat sink's language (GPUGOV_FEISHU_LANG=zh_CN, or `lang:` in its YAML section) sets the fixed
words of its messages; without one it speaks the command's language (gpugov --lang, LANG).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from urllib.parse import urlsplit

from gpugov.i18n import LANGUAGES, normalize
from gpugov.notify.sinks import SINKS, Sink
from gpugov.notify.transport import Transport

URL_VARS = {
    "webhook": "GPUGOV_WEBHOOK_URL",
    "slack": "GPUGOV_SLACK_WEBHOOK_URL",
    "feishu": "GPUGOV_FEISHU_WEBHOOK_URL",
    "dingtalk": "GPUGOV_DINGTALK_WEBHOOK_URL",
    "wecom": "GPUGOV_WECOM_WEBHOOK_URL",
}
SECRET_VARS = {
    "webhook": "GPUGOV_WEBHOOK_SECRET",  # HMAC of the body, sent as X-Gpugov-Signature-256
    "feishu": "GPUGOV_FEISHU_SECRET",  # the bot's "signature verification" secret
    "dingtalk": "GPUGOV_DINGTALK_SECRET",  # the robot's "additional signature" (加签) secret
}
# The chat sinks' languages (the webhook sends JSON, which stays English).
LANG_VARS = {kind: f"GPUGOV_{kind.upper()}_LANG" for kind in ("slack", "feishu", "dingtalk", "wecom")}
_ENV_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=(.*)$")


class NotifyConfigError(ValueError):
    """A spec or setting is wrong. The message names variables and files, never their values."""


def spec_help() -> str:
    kinds = ", ".join(f"{k}[:{'|'.join(c.formats)}]" if len(c.formats) > 1 else k for k, c in SINKS.items())
    return f"sinks: {kinds}"


def parse_specs(specs: list[str]) -> list[tuple[str, str, str]]:
    """["slack", "feishu:text,wecom"] -> [(name, kind, format)]; commas separate specs too."""
    parsed: list[tuple[str, str, str]] = []
    for raw in (part.strip() for spec in specs for part in spec.split(",")):
        if not raw:
            continue
        kind, _, fmt = raw.lower().partition(":")
        cls = SINKS.get(kind)
        if cls is None:
            raise NotifyConfigError(f"unknown sink {raw!r}; {spec_help()}")
        fmt = fmt or cls.formats[0]
        if fmt not in cls.formats:
            raise NotifyConfigError(f"sink {kind} has no format {fmt!r}: choose {' or '.join(cls.formats)}")
        name = kind if fmt == cls.formats[0] else f"{kind}:{fmt}"
        if any(name == seen for seen, _, _ in parsed):
            raise NotifyConfigError(f"sink {name} is listed twice")
        parsed.append((name, kind, fmt))
    return parsed


def read_config_file(path: Path) -> dict[str, str]:
    """The settings in a --notify-config file, by environment-variable name."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise NotifyConfigError(f"cannot read {path}: {why}") from None
    if path.suffix in (".yaml", ".yml") or not _looks_env_style(text):
        return _from_yaml(path, text)
    return _from_env_lines(path, text)


def _looks_env_style(text: str) -> bool:
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            return bool(_ENV_LINE.match(line))
    return True


def _from_env_lines(path: Path, text: str) -> dict[str, str]:
    values = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = _ENV_LINE.match(line)
        if not match:
            raise NotifyConfigError(f"{path}:{number}: expected NAME=VALUE")  # the line may hold a secret
        value = match.group(2).strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        values[match.group(1)] = value
    return values


def _from_yaml(path: Path, text: str) -> dict[str, str]:
    import yaml  # here, not at the top: `gpugov --help` builds the --notify options without it

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        # str(exc) quotes the offending line, which may be a secret: give the position only.
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        raise NotifyConfigError(
            f"{path}{where}: not valid YAML ({getattr(exc, 'problem', None) or 'syntax error'})"
        ) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise NotifyConfigError(f"{path}: expected a mapping of settings")
    values: dict[str, str] = {}
    for key, value in data.items():
        if isinstance(value, dict):  # slack: {webhook_url: ...}
            kind = str(key).lower()
            if kind not in SINKS:
                raise NotifyConfigError(f"{path}: unknown section {key!r}; {spec_help()}")
            for field, item in value.items():
                values[_section_var(path, kind, str(field).lower())] = _scalar(path, f"{key}.{field}", item)
        elif value is not None:
            values[str(key)] = _scalar(path, str(key), value)
    return values


def _section_var(path: Path, kind: str, field: str) -> str:
    if field in ("url", "webhook_url"):
        return URL_VARS[kind]
    if field == "secret" and kind in SECRET_VARS:
        return SECRET_VARS[kind]
    if field in ("lang", "locale") and kind in LANG_VARS:
        return LANG_VARS[kind]
    allowed = ", ".join(["url", *(["secret"] if kind in SECRET_VARS else []), *(["lang"] if kind in LANG_VARS else [])])
    raise NotifyConfigError(f"{path}: unknown setting {kind}.{field} (allowed: {allowed})")


def _scalar(path: Path, name: str, value: object) -> str:
    if isinstance(value, dict | list):
        raise NotifyConfigError(f"{path}: {name} must be a string")
    return str(value).strip()


def _check_url(name: str, var: str, url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise NotifyConfigError(f"sink {name}: {var} is not an http(s) URL")


def _language(name: str, kind: str, settings: Mapping[str, str]) -> str:
    """The sink's own language, "" for the command's."""
    var = LANG_VARS.get(kind, "")
    value = (settings.get(var) or "").strip() if var else ""
    if not value:
        return ""
    language = normalize(value)
    if language is None:
        raise NotifyConfigError(f"sink {name}: {var} names a language gpugov has no messages in "
                                f"(choose {' or '.join(LANGUAGES)})")
    return language


def build_sinks(
    specs: list[str],
    env: Mapping[str, str],
    config_file: Path | None = None,
    *,
    transport: Transport | None = None,
    clock: Callable[[], float] | None = None,
) -> list[Sink]:
    """Sinks for the specs, configured from `config_file` (when given), then `env`."""
    parsed = parse_specs(specs)
    settings = {**env, **(read_config_file(config_file) if config_file else {})}
    transport = transport or Transport()
    sinks = []
    for name, kind, fmt in parsed:
        var = URL_VARS[kind]
        url = (settings.get(var) or "").strip()
        if not url:
            where = " or in --notify-config" if config_file else ""
            raise NotifyConfigError(f"sink {name}: set {var} in the environment{where}")
        _check_url(name, var, url)
        secret = (settings.get(SECRET_VARS.get(kind, "")) or "").strip() or None
        extra = {"clock": clock} if clock else {}
        sinks.append(SINKS[kind](name, url, format=fmt, secret=secret, transport=transport,
                                 language=_language(name, kind, settings), **extra))
    return sinks
