"""Renders the files a conversion creates (launch scripts, configs) from jinja2 templates.

Shell templates quote every value with `shquote`, so a path with spaces or `$(...)` in it
stays one harmless word; JSON templates pass values through `tojson`. Undefined variables are
errors, not empty strings. jinja2 is imported on first use, not at CLI start-up.
"""

from __future__ import annotations

import shlex
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import jinja2

# Installed: migrate/templates (package data). From a checkout: templates/ beside migrate/.
_CANDIDATES = (Path(__file__).resolve().parent / "templates", Path(__file__).resolve().parent.parent / "templates")


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    import jinja2

    folder = next(str(p) for p in _CANDIDATES if p.is_dir())
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(folder),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters["shquote"] = lambda value: shlex.quote(str(value))
    return env


def render(template: str, **values: Any) -> str:
    return environment().get_template(template).render(**values)
