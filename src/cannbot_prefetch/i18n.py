"""The one catalog of bilingual text (configs/messages.yaml): `t(key, lang, **params)`.

Every text shown in both languages lives in that file under a dotted key, with `en` and `zh`
side by side, so a translator edits one file and a test checks that both languages carry the same
placeholders. `Msg(key, **params)` is a `str` (its English text) that remembers its key: a deep
layer can raise `InputError(Msg(...))` and the CLI prints it in the user's language.

Which parts stay English is written down in docs/cli.md ("Languages").

The catalog is read when this module is imported, into `CATALOG`, a read-only constant (with
the patterns `localize` matches, compiled from it then too): the program's own text, like its
source, not a setting of a run and not a cache filled later. Why not a catalog passed down from
each command's start: 29 modules write its sentences (178 call sites, a `Msg` raised from deep
inside a stage, report tables built from it at import), and no caller chooses another catalog.
`cannbot --help` does not import this module (0.08 s CPU before and after,
benchmarks/bench_startup.py); a command that writes text read the catalog before too, and now
also compiles `localize`'s patterns at import (about 0.015 s CPU).
"""

from __future__ import annotations

import re
from types import MappingProxyType
from typing import Any, Mapping

from .settings import configs_dir, load_yaml

LANGS = ("en", "zh")


def _read_catalog() -> Mapping[str, Mapping[str, str]]:
    """configs/messages.yaml as a read-only {key: {lang: text}}."""
    data = load_yaml(configs_dir() / "messages.yaml")
    return MappingProxyType({str(k): MappingProxyType({str(lang): str(text)
                                                       for lang, text in v.items()})
                             for k, v in data.items()})


CATALOG = _read_catalog()


def t(key: str, lang: str = "en", **params: Any) -> str:
    """The text of `key` in `lang` (English when that language lacks it), formatted."""
    entry = CATALOG[key]
    text = entry.get(lang) or entry["en"]
    return text.format(**params) if params else text


def texts(prefix: str, lang: str = "en") -> dict[str, str]:
    """Every unformatted text under `prefix.` as {short key: text} (table headers and the like)."""
    cut = len(prefix) + 1
    return {k[cut:]: v.get(lang) or v["en"] for k, v in CATALOG.items()
            if k.startswith(prefix + ".")}


def pairs(prefix: str) -> dict[str, tuple[str, str]]:
    """Every entry under `prefix.` as {code: (English, Chinese)}: for code -> text tables
    (report outcomes, actions, reasons) that keep both languages side by side."""
    cut = len(prefix) + 1
    return {k[cut:]: (v["en"], v.get("zh") or v["en"]) for k, v in CATALOG.items()
            if k.startswith(prefix + ".") and "." not in k[cut:]}


class Msg(str):
    """A catalog message that reads as its English text and renders in any language later."""

    key: str
    params: dict[str, Any]

    def __new__(cls, key: str, **params: Any) -> "Msg":
        obj = super().__new__(cls, t(key, "en", **params))
        obj.key, obj.params = key, params
        return obj

    def render(self, lang: str) -> str:
        return t(self.key, lang, **{k: tr(v, lang) for k, v in self.params.items()})


def tr(value: Any, lang: str) -> Any:
    """`value` in `lang` when it is a Msg; anything else unchanged."""
    return value.render(lang) if isinstance(value, Msg) else value


# Sentences the analysis stores in its plan and JSON (reasons, cap notes, window reasons, notes)
# are written in English from `said.*` entries (`said()`); a document in another language finds
# the entry an English text came from and re-words it, its parameters the same way (`localize`).
# Failing a whole entry, in order: for a parameter, a list ("A, B": each item) or a `part.*`
# entry (a place, an op with its reason: too general to recognise a whole sentence); "WHO: WHAT"
# (`joined.about`); "; "-joined sentences one by one; fixed `phrase.*` entries wherever they
# occur. What matches nothing is shown as it is (a name, a path). The joints' own marks are the
# `joined.*` entries.
_FIELD = re.compile(r"\{(\w+)(?:[:!][^{}]*)?\}")
# Fields that always hold one word (a verdict such as `latency-bound`, a number): matched as
# one, so "counters say latency-bound (...)" cannot split into who="counters", verdict="say ...".
_ONE_WORD = frozenset({"verdict", "roof", "measured"})


def said(key: str, **params: Any) -> str:
    """A sentence the analysis stores (in the plan, the JSON), in English, from the `said.*` or
    `part.*` entry `localize` later finds it by."""
    return t(key, "en", **params)


def _compile_templates(prefix: str) -> tuple[tuple[re.Pattern[str], str], ...]:
    """The entries under `prefix` as patterns a stored English sentence fully matches."""
    out = []
    for key, entry in CATALOG.items():
        if not key.startswith(prefix):
            continue
        en = entry["en"]
        # two readings of the same template: the first field longest (a sentence with a
        # suffix, a name before a word), then every field shortest; the first whose fields are
        # whole pieces wins
        for greedy_first in (True, False):
            parts, pos, seen = [], 0, set()
            for m in _FIELD.finditer(en):
                name = m.group(1)
                lazy = "" if greedy_first and not seen else "?"
                field = r"\S+" if name in _ONE_WORD else f".*{lazy}"
                parts.append(re.escape(en[pos:m.start()])
                             + (f"(?P={name})" if name in seen else f"(?P<{name}>{field})"))
                seen.add(name)
                pos = m.end()
            parts.append(re.escape(en[pos:]))
            out.append((re.compile("".join(parts), re.S), entry.get("zh") or en))
    # longest templates first: a specific sentence wins over a general one
    return tuple(sorted(out, key=lambda p: -len(p[0].pattern.replace("*?", "*"))))


def _compile_phrases() -> tuple[tuple[re.Pattern[str], str], ...]:
    found = [(v["en"], v.get("zh") or v["en"]) for k, v in CATALOG.items() if k.startswith("phrase.")]
    return tuple((re.compile(r"\b" + re.escape(en) + r"\b"), zh)
                 for en, zh in sorted(found, key=lambda p: -len(p[0])))


# the two families `localize` re-words (whole sentences, then parameters) and the fixed phrases
_TEMPLATES = MappingProxyType({p: _compile_templates(p) for p in ("said.", "part.")})
_PHRASES = _compile_phrases()


def _whole(param: str) -> bool:
    """A parameter is one piece: not half a parenthesis, not two sentences ("; ")."""
    depth = 0
    for ch in param:
        depth += (ch == "(") - (ch == ")")
        if depth < 0:
            return False
    return depth == 0 and "; " not in param


def _is_said(param: str) -> bool:
    """A parameter that is itself a stored sentence ("mte2 0.90 >= 0.8 ...; AI 50 < ridge 184"
    inside a note) is one piece, whatever marks it holds."""
    return any(pattern.fullmatch(param) for pattern, _ in _TEMPLATES["said."])


def _reword(text: str, prefixes: tuple[str, ...], lang: str) -> str | None:
    for prefix in prefixes:
        for pattern, zh in _TEMPLATES[prefix]:
            m = pattern.fullmatch(text)
            if m and all(_whole(v) or _is_said(v) for v in m.groupdict().values()):
                got = m.groupdict()
                return _FIELD.sub(lambda f: str(localize(got[f.group(1)], lang, part=True)), zh)
    return None


def _top_level_items(text: str) -> list[str]:
    """`text` split at the ", " outside parentheses ("A (x, y), B" -> ["A (x, y)", "B"])."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0 and text.startswith(", ", i):
            out.append(text[start:i])
            start = i + 2
    return [*out, text[start:]]


def localize(text: Any, lang: str, part: bool = False) -> Any:
    """`text` (an English sentence the analysis stored) in `lang` (see above); `part`: `text` is a
    parameter of another sentence."""
    if lang == "en" or not isinstance(text, str) or not text:
        return text
    if isinstance(text, Msg):
        return text.render(lang)
    got = _reword(text, ("said.",), lang)
    if got is not None:
        return got
    if part:   # a list of names or findings (Chinese joins them with 、), else a piece
        items = _top_level_items(text)
        if len(items) > 1:
            return t("joined.list", lang).join(str(localize(i, lang, part)) for i in items)
        got = _reword(text, ("part.",), lang)
        if got is not None:
            return got
    if ": " in text and not part and "; " not in text.split(": ", 1)[0]:
        who, what = text.split(": ", 1)
        return t("joined.about", lang, who=who, what=localize(what, lang))
    if "; " in text:
        return t("joined.sentences", lang).join(str(localize(p, lang, part)) for p in text.split("; "))
    for pattern, zh in _PHRASES:
        text = pattern.sub(zh, text)
    return text
