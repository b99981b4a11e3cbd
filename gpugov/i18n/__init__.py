"""Messages in the reader's language: gettext catalogues under gpugov/locale, English the source text.

The language comes from `gpugov --lang`, else the POSIX locale variables (LC_ALL, LC_MESSAGES, LANG:
the first one set wins, so LC_ALL=C keeps English); a notify sink may name its own. Only output for
people is translated: rule ids, file:line:col, JSON and the README's rule table stay English.
`make messages` re-extracts the catalogue (Babel, with gpugov.i18n.extract for the rule table).

The ground floor: it imports no other gpugov package.
"""

from __future__ import annotations

import gettext as _gettext
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

DOMAIN = "gpugov"
LOCALE_DIR = Path(__file__).resolve().parent.parent / "locale"
ENGLISH = "en"
LANGUAGES = (ENGLISH, "zh_CN")  # English is the source text; zh_CN has a catalogue
LOCALE_VARIABLES = ("LC_ALL", "LC_MESSAGES", "LANG")  # POSIX order of precedence
_TRADITIONAL = ("TW", "HK", "MO", "HANT")
Translator = _gettext.NullTranslations


def normalize(name: str) -> str | None:
    """The catalogue for a locale name: zh_CN.UTF-8, zh, zh-Hans -> zh_CN; en_US, C, POSIX -> en;
    None for a language gpugov has no messages in."""
    base = name.strip().split(".")[0].split("@")[0].replace("-", "_")
    if base in ("", "C", "POSIX"):
        return ENGLISH
    language, _, region = base.partition("_")
    if language.lower() == "en":
        return ENGLISH
    if language.lower() == "zh" and not any(part.upper() in _TRADITIONAL for part in region.split("_")):
        return "zh_CN"
    return None


def from_environment(environ: Mapping[str, str]) -> str:
    """The language of the first locale variable that is set; English for one without messages."""
    for variable in LOCALE_VARIABLES:
        value = environ.get(variable)
        if value:
            return normalize(value) or ENGLISH
    return ENGLISH


@cache
def translator(language: str) -> Translator:
    """The catalogue of `language` (a normalized name); English translates nothing."""
    if language == ENGLISH:
        return _gettext.NullTranslations()
    return _gettext.translation(DOMAIN, LOCALE_DIR, languages=[language], fallback=True)


_current = [ENGLISH]  # set once per command by the CLI (gpugov.cli.main); a library caller gets English


def use(language: str) -> None:
    _current[0] = language


def current() -> str:
    return _current[0]


def _(message: str, tr: Translator | None = None) -> str:
    """`message` in the current language (or `tr`'s); an empty message stays empty (gettext would
    answer the catalogue's header)."""
    return (tr or translator(current())).gettext(message) if message else message


def ngettext(singular: str, plural: str, n: int, tr: Translator | None = None) -> str:
    return (tr or translator(current())).ngettext(singular, plural, n)


class Text(str):
    """A message whose English is its value (so JSON, comparisons and tests see English) and that
    can be told again in another language: `localized(text, tr)`. Fields may be Texts themselves."""

    msgid: str
    fields: dict[str, Any]

    def __new__(cls, msgid: str, **fields: Any) -> Text:
        self = super().__new__(cls, msgid.format(**fields))
        self.msgid, self.fields = msgid, fields
        return self

    def __getnewargs_ex__(self) -> tuple[tuple[str], dict[str, Any]]:
        # copy and pickle (dataclasses.asdict) rebuild from the msgid: the English may hold braces
        return (self.msgid,), self.fields

    def render(self, tr: Translator) -> str:
        return _(self.msgid, tr).format(**{name: localized(value, tr) for name, value in self.fields.items()})


class Joined(str):
    """Parts joined by a separator that is itself a message ("; or " reads "；或 " in Chinese)."""

    separator: str
    parts: tuple[str, ...]

    def __new__(cls, separator: str, parts: Iterable[str]) -> Joined:
        items = tuple(parts)
        self = super().__new__(cls, separator.join(items))
        self.separator, self.parts = separator, items
        return self

    def __getnewargs__(self) -> tuple[str, tuple[str, ...]]:
        return self.separator, self.parts

    def render(self, tr: Translator) -> str:
        return _(self.separator, tr).join(localized(part, tr) for part in self.parts)


def localized(value: object, tr: Translator | None = None) -> str:
    """A Text or Joined in the current language (or `tr`'s); any other value as it is."""
    if isinstance(value, Text | Joined):
        return value.render(tr or translator(current()))
    return str(value)
