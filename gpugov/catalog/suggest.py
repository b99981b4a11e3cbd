"""'Did you mean': the closest name to a typo, case-insensitive, knowing what users type instead.

A typed accelerator model is compared with the catalog's and the declared models' names and with
the values GPU Feature Discovery writes into `nvidia.com/gpu.product` (what `kubectl get nodes
--show-labels` shows: NVIDIA-H20 is the H20), ignoring case, with a letter O read as a zero
(h2O). A misspelled field is compared with the fields its place allows.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping

CUTOFF = 0.6


def _variants(word: str) -> set[str]:
    lowered = word.lower()
    return {lowered, lowered.replace("o", "0"), lowered.removeprefix("nvidia-")}


def closest(word: str, candidates: Iterable[str], aliases: Mapping[str, str] | None = None,
            cutoff: float = CUTOFF) -> str | None:
    """The candidate `word` most likely means (an alias names its candidate), None when nothing is close."""
    keys: dict[str, str] = {}
    for candidate in sorted(candidates):
        keys.setdefault(candidate.lower(), candidate)
    for alias, candidate in sorted((aliases or {}).items()):
        keys.setdefault(alias.lower(), candidate)
    variants = _variants(word)
    for variant in sorted(variants):
        if variant in keys:
            return keys[variant]
    best: tuple[float, str] | None = None
    for key, candidate in sorted(keys.items()):
        score = max(difflib.SequenceMatcher(None, variant, key).ratio() for variant in variants)
        if score >= cutoff and (best is None or score > best[0]):
            best = (score, candidate)
    return best[1] if best else None


def closest_model(typed: str, declared: Iterable[str] = ()) -> str | None:
    """The built-in or declared accelerator model `typed` most likely means."""
    from gpugov.catalog import MODELS

    aliases = {product: name for name, model in MODELS.items() for product in model.gfd_products}
    return closest(typed, [*MODELS, *declared], aliases)


__all__ = ["closest", "closest_model"]
