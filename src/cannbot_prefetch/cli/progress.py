"""A Rich status line on stderr for the slow steps, only when stderr is a terminal.

`with status(lang) as step: run(..., progress=step)`: the pipeline calls `step(key, **params)`
with a catalog key (configs/messages.yaml `progress.*`) at each stage; piped or captured output
(CI, an agent, `--json | jq`) gets nothing, so stdout and logs stay clean.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any, Callable, Iterator

Step = Callable[..., None]


@contextlib.contextmanager
def status(lang: str) -> Iterator[Step | None]:
    if not sys.stderr.isatty():
        yield None          # the library's own default: no progress
        return
    from rich.console import Console

    from ..i18n import t

    with Console(stderr=True).status("", spinner="dots") as live:
        def step(key: str, **params: Any) -> None:
            live.update(t(key, lang, **params))

        yield step
