"""The one catalog of bilingual text (configs/messages.yaml): `t(key, lang, **params)`.

Every text shown in both languages lives in that file under a dotted key, with `en` and `zh`
side by side, so a translator edits one file and a test checks that both languages carry the same
placeholders. `Msg(key, **params)` is a `str` (its English text) that remembers its key: a deep
layer can raise `InputError(Msg(...))` and the CLI prints it in the user's language.

Which parts stay English is written down in docs/cli.md ("Languages").
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

LANGS = ("en", "zh")


@lru_cache(maxsize=None)
def catalog() -> dict[str, dict[str, str]]:
    """configs/messages.yaml as {key: {lang: text}} (loaded once, on first use)."""
    from .settings import configs_dir, load_yaml

    data = load_yaml(configs_dir() / "messages.yaml")
    return {str(k): {str(lang): str(text) for lang, text in v.items()} for k, v in data.items()}


def t(key: str, lang: str = "en", **params: Any) -> str:
    """The text of `key` in `lang` (English when that language lacks it), formatted."""
    entry = catalog()[key]
    text = entry.get(lang) or entry["en"]
    return text.format(**params) if params else text


def texts(prefix: str, lang: str = "en") -> dict[str, str]:
    """Every unformatted text under `prefix.` as {short key: text} (table headers and the like)."""
    cut = len(prefix) + 1
    return {k[cut:]: v.get(lang) or v["en"] for k, v in catalog().items()
            if k.startswith(prefix + ".")}


def pairs(prefix: str) -> dict[str, tuple[str, str]]:
    """Every entry under `prefix.` as {code: (English, Chinese)}: for code -> text tables
    (report outcomes, actions, reasons) that keep both languages side by side."""
    cut = len(prefix) + 1
    return {k[cut:]: (v["en"], v.get("zh") or v["en"]) for k, v in catalog().items()
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
