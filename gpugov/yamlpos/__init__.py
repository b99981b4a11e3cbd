"""Positioned YAML: plain data that remembers where each node was written (file:line:col)."""

from gpugov.yamlpos.reader import (
    DUPLICATE_KEY,
    MAX_DEPTH,
    SYNTAX,
    UNREADABLE,
    LoadError,
    SourceDoc,
    parse_documents,
    reconvert,
)

__all__ = ["DUPLICATE_KEY", "MAX_DEPTH", "SYNTAX", "UNREADABLE", "LoadError", "SourceDoc", "parse_documents", "reconvert"]
