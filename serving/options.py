"""Command-line options written once, as dataclass fields: each one's default, its ``--help`` text and how
its default is shown there. ``translate.py`` builds its options and its ``--help`` from them, ``serve.*``
from ``serving/limits.py``'s fields. Imports nothing heavy: the options are checked before the model loads.
"""

from __future__ import annotations

import textwrap
from dataclasses import MISSING, field, fields


def option(default, metavar: str, help: str, shown: str | None = None):  # noqa: A002 — the --help text
    """A command-line option: its default, its ``--help`` text and how its default is ``shown`` there (else
    the default itself)."""
    return field(default=default, metadata={"metavar": metavar, "help": help, "shown": shown})


def options_help(options: type, prefix: str = "", option_width: int = 20, help_width: int = 63) -> str:
    """One ``--help`` line per field of ``options`` that is an ``option``, its default in brackets at the end."""
    lines = []
    for f in fields(options):
        if "help" not in f.metadata:
            continue
        first, *more = textwrap.wrap(f.metadata["help"], help_width - 1, break_on_hyphens=False) or [""]
        default = f.default if f.default is not MISSING else f.default_factory()
        shown = f.metadata.get("shown") or (f"{default:.12g}" if isinstance(default, float) else str(default).lower())
        lines.append(f"  {prefix + f.name + '=' + f.metadata['metavar']:<{option_width}}{first:<{help_width}}[{shown}]")
        lines += [" " * (option_width + 2) + line for line in more]
    return "\n".join(lines)
