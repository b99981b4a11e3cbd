"""'Did you mean': the closest name to a typo, case-insensitive, knowing what users type instead.

A typed accelerator model is read the way people write one: a catalog name (`H100-80GB`), a family with
or without its variant (`H100`, `A100 40GB`, `H100-PCIe`, `V100-32G`), the value GPU Feature Discovery
writes into `nvidia.com/gpu.product` (`NVIDIA-H100-80GB-HBM3`, what `kubectl get nodes --show-labels`
shows), the NVML name `nvidia-smi` prints (`NVIDIA H20`: GFD's value with spaces) or a vendor's short
name (`910B` for Ascend-910B). Case, spaces, '_' and '-' do not matter, and a letter O reads as a zero
(h2O). The family decides first: a model of another family (H200 for H100, A10 for A100, H800 for
A800) is never suggested when the typed family exists, since its memory and MIG profiles differ.
Where a family has one plain model (no form factor such as NVL in its name) and nothing more was
typed, that is the short name's obvious meaning, said with the family's other variants; where it has
several (A100-40GB and A100-80GB), each is named with what tells them apart (memory). Only a name of
no known family falls back to likeness, and then only to a name with the same digits.

A misspelled field is compared with the fields its place allows.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal

from gpugov.i18n import Joined, Text

CUTOFF = 0.6
MODEL_CUTOFF = 0.75

# Words a typed model may carry that name no model: the vendor and its product lines.
_BRANDS = ("nvidia", "tesla", "geforce", "huawei", "amd", "instinct", "hygon", "cambricon", "kunlunxin", "metax",
           "iluvatar", "enflame", "moore-threads")
# Form factors and memory kinds: a variant of a family, not a family.
_FORMS = ("sxm2", "sxm4", "sxm5", "sxm", "pcie", "nvl", "hbm3", "hbm3e", "hbm2e", "hbm2")
_MEMORY = re.compile(r"^(\d+)(?:g|gb|gi|gib)$")
# Catalog names whose first word is a brand: the rest is what people type alone (910B, K100, MLU370).
_NAMED_BRANDS = ("ascend", "hygon", "cambricon", "kunlunxin", "metax", "iluvatar", "enflame")


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


def _words(text: str) -> list[str]:
    """Lower-case words of a typed or known name: split at spaces, '_', '-' and between a memory size
    and what follows it; the letter o read as zero where it stands among digits."""
    words = []
    for word in re.split(r"[\s_\-/(),.]+", text.strip().lower()):
        while word:
            zeroed = re.sub(r"(?<=\d)o|o(?=\d)", "0", word)
            if zeroed == word:
                words.append(word)
                break
            word = zeroed
    return words


def _key(text: str) -> str:
    """A name as compared: its words without the vendor's, run together."""
    return "".join(w for w in _words(text) if w not in _BRANDS)


@dataclass(frozen=True)
class Reading:
    family: str  # the words that are neither brand, form factor nor memory, joined: "h100", "910b"
    memory_gb: int | None
    forms: frozenset[str]


def _read(text: str) -> Reading:
    family: list[str] = []
    memory = None
    forms: set[str] = set()
    for word in _words(text):
        found = _MEMORY.match(word)
        if word in _BRANDS:
            continue
        if found:
            memory = int(found.group(1))
        elif word in _FORMS:
            forms.add(word.removesuffix("e") if word.startswith("hbm") else word)
            if word.startswith("sxm"):
                forms.add("sxm")  # SXM4 and SXM5 are SXM boards
        else:
            family.append(word)
    return Reading("".join(family), memory, frozenset(forms))


@dataclass(frozen=True)
class Known:
    """One model as the suggestions know it."""

    name: str
    memory_gb: int | None
    family: str  # its name's family words, e.g. "a100" for A100-40GB, "910b" for Ascend-910B
    forms: frozenset[str]  # form factors its name or its labels carry
    plain: bool  # its name carries no form factor: the family's model a bare family name means
    labels: tuple[str, ...]  # GFD (or the vendor's) product label values
    nvml: tuple[str, ...]  # NVML names (NVIDIA: GFD's value with spaces)

    @property
    def keys(self) -> set[str]:
        """Exact spellings, normalized: its name, label values and NVML names."""
        return {_key(text) for text in (self.name, *self.labels, *self.nvml)}


def _gb(memory: Decimal | None) -> int | None:
    return None if memory is None else int((memory / (1 << 30)).to_integral_value())


def _known(name: str, memory: Decimal | None, labels: tuple[str, ...], nvidia: bool, description: str = "") -> Known:
    reading = _read(name)
    family = reading.family
    words = _words(name)
    if words and words[0] in _NAMED_BRANDS and len(words) > 1:
        family = "".join(w for w in words[1:] if not _MEMORY.match(w) and w not in _FORMS)
    forms = set(reading.forms)
    for text in (*labels, description):
        forms |= _read(text).forms
    return Known(name, _gb(memory), family, frozenset(forms), not reading.forms, labels,
                 tuple(label.replace("-", " ") for label in labels) if nvidia else ())


def _catalog(declared: Iterable[str]) -> list[Known]:
    from gpugov.catalog import MODELS

    known = [_known(m.name, m.memory, m.product_label.values if m.product_label else (), m.vendor == "nvidia",
                    m.description) for m in MODELS.values()]
    return known + [_known(name, None, (), False) for name in sorted(set(declared) - set(MODELS))]


@dataclass(frozen=True)
class ModelHint:
    """What a typed model most likely means: one model (`obvious`: a short name's one plain meaning,
    with its family's `others`), or several of one family that the typed name does not tell apart."""

    models: tuple[str, ...]
    others: tuple[str, ...] = ()  # the family's other variants, when one is the obvious meaning
    differ_in: str = ""  # "memory" or "form factor": what tells `models` apart


def _memory_text(known: Known) -> str:
    return f"{known.memory_gb}GB" if known.memory_gb is not None else ""


def suggest_model(typed: str, declared: Iterable[str] = ()) -> ModelHint | None:
    """What `typed` most likely means among the built-in and `declared` models; None when nothing does."""
    models = _catalog(declared)
    key = _key(typed)
    exact = [m for m in models if key and key in m.keys]
    if exact:
        return ModelHint(tuple(sorted({m.name for m in exact})), differ_in="product" if len(exact) > 1 else "")
    reading = _read(typed)
    family = [m for m in models if m.family == reading.family and reading.family]
    if family:
        return _in_family(reading, family)
    return _alike(typed, reading, models)


def _in_family(reading: Reading, family: list[Known]) -> ModelHint:
    fitting = family
    if reading.memory_gb is not None:
        fitting = [m for m in fitting if m.memory_gb == reading.memory_gb] or fitting
    if reading.forms:
        formed = [m for m in fitting if reading.forms <= m.forms]
        fitting = formed or fitting
    if len(fitting) > 1 and not reading.forms:
        plain = [m for m in fitting if m.plain]
        if len(plain) == 1:
            others = tuple(sorted(m.name for m in family if m is not plain[0]))
            return ModelHint((plain[0].name,), others)
        fitting = plain or fitting
    names = tuple(sorted(m.name for m in fitting))
    differ = ""
    if len(fitting) > 1:
        differ = "memory" if len({m.memory_gb for m in fitting}) == len(fitting) else "form factor"
    return ModelHint(names, differ_in=differ)


def _digits(text: str) -> str:
    return "".join(re.findall(r"\d+", "".join(_words(text))))


def _alike(typed: str, reading: Reading, models: list[Known]) -> ModelHint | None:
    """No family of that name: the likest name with the same digits (a typo), else nothing."""
    digits = _digits(typed)
    best: tuple[float, str] | None = None
    for model in sorted(models, key=lambda m: m.name):
        if _digits(model.name) != digits and not any(_digits(label) == digits for label in model.labels):
            continue
        for spelled in ("".join(_words(model.name)), model.family, *("".join(_words(x)) for x in model.labels)):
            if not spelled:
                continue
            score = difflib.SequenceMatcher(None, reading.family or "".join(_words(typed)), spelled).ratio()
            if score >= MODEL_CUTOFF and (best is None or score > best[0]):
                best = (score, model.name)
    return ModelHint((best[1],)) if best else None


def closest_model(typed: str, declared: Iterable[str] = ()) -> str | None:
    """The one built-in or declared accelerator model `typed` most likely means; None when nothing, or
    several alike (see suggest_model)."""
    hint = suggest_model(typed, declared)
    return hint.models[0] if hint is not None and len(hint.models) == 1 else None


def describe(name: str) -> str:
    """A model as a hint names it: its catalog name with its memory, e.g. 'A100-40GB (40GB)'."""
    from gpugov.catalog import MODELS

    model = MODELS.get(name)
    memory = _gb(model.memory) if model is not None else None
    return f"{name} ({memory}GB)" if memory is not None and f"{memory}GB" not in name else name


DIFFER_IN = {"memory": Text("memory and MIG profiles"), "form factor": Text("form factor"),
             "product": Text("model, though the node label is the same")}


def unknown_model_text(pool: str, typed: str, hint: ModelHint | None) -> str:
    """GG046's message: the model `typed` most likely means, and what a short name leaves open."""
    fields = {"pool": pool, "model": typed}
    if hint is None:
        return Text("pool '{pool}': accelerator model '{model}' is neither built in nor declared", **fields)
    if len(hint.models) > 1:
        return Text("pool '{pool}': accelerator model '{model}' is neither built in nor declared (did you mean one of "
                    "{choices}? They differ in {differ}: name the one your nodes have)",
                    choices=Joined(", ", [describe(m) for m in hint.models]),
                    differ=DIFFER_IN.get(hint.differ_in, hint.differ_in), **fields)
    if hint.others:
        return Text("pool '{pool}': accelerator model '{model}' is neither built in nor declared (did you mean "
                    "{close}? {model} most likely means {described}; the family's other variants: {others})",
                    close=hint.models[0], described=describe(hint.models[0]),
                    others=Joined(", ", [describe(m) for m in hint.others]), **fields)
    return Text("pool '{pool}': accelerator model '{model}' is neither built in nor declared (did you mean "
                "{close}?)", close=hint.models[0], **fields)


__all__ = ["ModelHint", "closest", "closest_model", "describe", "suggest_model", "unknown_model_text"]
