"""The lines the tool writes, recognised and stripped: each is a whole one-line statement ending
in `# cannbot-prefetch: <tag>` (tag = site id, or `import` / `switch` / `join` / `next-layer`).

Stripping the marked lines gives the original back byte for byte, which is how a rewrite is made
idempotent and how `--revert` works. Kept apart from the rewrite so revert, the file layer and
analyze's checks read markers without the code generator.
"""

from __future__ import annotations

import io
import re
import tokenize

from ..pysource import source_lines

MARKER = "# cannbot-prefetch: "
ALIAS = "_cbp"
BOM = "\ufeff"
# A line the tool wrote: indentation, one of the statement shapes below, two spaces, the marker
# and a tag. Recognised exactly (not by the marker substring), and only as a whole one-line
# statement (never inside a string or a bracket), so a user's line that mentions the marker
# is never taken for one of ours.
_OWN_LINE = re.compile(r"(?P<indent>[ \t]*)(?P<code>\S[^\r\n]*?)  # cannbot-prefetch: "
                       r"(?P<tag>[a-z0-9_.-]{1,128})(?P<nl>\r\n|\n|\r)?")
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_OWN_CODE = re.compile(
    rf"try: from \. import _cannbot_prefetch as {ALIAS}"
    rf"|except ImportError: import _cannbot_prefetch as {ALIAS}"
    rf"|import {_NAME}(?:\.{_NAME})* as {ALIAS}"
    rf"|self\.{_NAME} = {ALIAS}\.{_NAME}\([^\r\n]*\)"
    rf"|(?:if [^\r\n]+: )?{ALIAS}\.{_NAME}\([^\r\n]*\)")
JOIN_TAG, SWITCH_TAG, IMPORT_TAG, LINK_TAG = "join", "switch", "import", "next-layer"


def split_bom(code: str) -> tuple[str, str]:
    """(BOM or "", the rest): the rewrite works on the text after a UTF-8 byte-order mark."""
    return (BOM, code[1:]) if code.startswith(BOM) else ("", code)


def _one_line_statements(code: str) -> set[int] | None:
    """1-based rows that hold a whole logical line of their own (None: the code does not
    tokenize). A row inside a triple-quoted string or a bracket is not one."""
    rows: set[int] = set()
    start = None
    skip = (tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING)
    try:
        for tok in tokenize.generate_tokens(io.StringIO(code).readline):
            if tok.type == tokenize.ENDMARKER:
                break
            if start is None:
                if tok.type in skip:
                    continue
                start = tok.start[0]
            if tok.type == tokenize.NEWLINE:
                if tok.start[0] == start:
                    rows.add(start)
                start = None
    except (tokenize.TokenError, SyntaxError):
        return None
    return rows


def own_lines(code: str) -> tuple[tuple[int, str], ...]:
    """(0-based line index, tag) of every line the tool wrote (code without a BOM). Not
    memoised: a caller that needs it twice for one text keeps the answer (`strip_own`)."""
    if MARKER not in code:
        return ()
    rows = _one_line_statements(code)
    if rows is None:     # not Python we can read: take nothing for ours (never drop user lines)
        return ()
    out = []
    for i, ln in enumerate(source_lines(code)):
        if MARKER in ln and i + 1 in rows:
            m = _OWN_LINE.fullmatch(ln)
            if m and _OWN_CODE.fullmatch(m["code"]):
                out.append((i, m["tag"]))
    return tuple(out)


def _drop_lines(code: str, drop: set[int]) -> str:
    """The code without the lines at `drop`. A file without a final newline keeps none: when
    its last line is one of ours (written without a newline), the line before it gets back
    its own ending (none)."""
    lines = source_lines(code)
    kept = "".join(ln for i, ln in enumerate(lines) if i not in drop)
    if lines and (len(lines) - 1) in drop and not lines[-1].endswith(("\n", "\r")):
        kept = re.sub(r"(\r\n|\n|\r)\Z", "", kept)
    return kept


def strip_own(code: str, own: tuple[tuple[int, str], ...]) -> str:
    """The code (without a BOM) without the lines `own` (its `own_lines`)."""
    return _drop_lines(code, {i for i, _ in own})


def strip_markers(code: str) -> str:
    """The source without any line the tool wrote."""
    bom, body = split_bom(code)
    return bom + strip_own(body, own_lines(body))


def has_markers(code: str) -> bool:
    return bool(own_lines(split_bom(code)[1]))


def marked_ids(code: str) -> set[str]:
    return {tag for _, tag in own_lines(split_bom(code)[1])}


# YAML runner configs: the lines _add_yaml_key writes (`key: false` / `parent:` + marker)
_OWN_YAML = re.compile(rf" *{_NAME}:(?: false)?  # cannbot-prefetch: switch(?:\r\n|\n|\r)?")


def strip_yaml_markers(text: str) -> str:
    lines = source_lines(text)
    return _drop_lines(text, {i for i, ln in enumerate(lines) if _OWN_YAML.fullmatch(ln)})


def strip_ids(code: str, ids: set[str]) -> str:
    """The code without this plan's site lines (shared lines stay for another plan's sites)."""
    bom, body = split_bom(code)
    return bom + _drop_lines(body, {i for i, tag in own_lines(body) if tag in ids})
