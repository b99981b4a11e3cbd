"""README.zh-CN.md is kept in step with README.md: same sections, commands, code and rule table."""

from __future__ import annotations

import re

from tests.helpers.repos import REPO

ROOT = REPO
FENCE = re.compile(r"^```[^\n]*\n.*?^```$", re.MULTILINE | re.DOTALL)


def read(name: str) -> str:
    return (ROOT / name).read_text(encoding="utf-8")


def heading_levels(text: str) -> list[int]:
    prose = FENCE.sub("", text)
    return [len(m.group(1)) for m in re.finditer(r"^(#{1,6}) ", prose, re.MULTILINE)]


def commands(text: str) -> list[str]:
    """The first cell of every table row that names a gpugov command."""
    return re.findall(r"^\| (`gpugov [^`]+`)", text, re.MULTILINE)


def rule_ids(text: str) -> list[str]:
    return re.findall(r"^\| (G[GDP]\d{3}) \|", text, re.MULTILINE)


def test_the_chinese_readme_has_the_english_ones_structure() -> None:
    english, chinese = read("README.md"), read("README.zh-CN.md")
    assert heading_levels(chinese) == heading_levels(english)
    assert commands(chinese) == commands(english)
    assert rule_ids(chinese) == rule_ids(english)
    assert len(rule_ids(english)) > 60


def test_the_chinese_readme_keeps_every_code_block() -> None:
    english, chinese = read("README.md"), read("README.zh-CN.md")
    # Commands and outputs are the same in both languages; comments inside them may be translated.
    def code(text: str) -> list[list[str]]:
        return [[line.split(" #")[0].rstrip() for line in block.splitlines()] for block in FENCE.findall(text)]

    assert code(chinese) == code(english)


def test_each_readme_links_the_other() -> None:
    assert "README.zh-CN.md" in read("README.md")
    assert "README.md" in read("README.zh-CN.md")
