"""Inline Markdown in a pasted line: set aside before the model reads the line, put back around the words its
translation aligns with them (what each marker does: docs/attention.md).

    "Press **Save** to keep `notes.txt`."     the model reads "Press Save to keep CODE1.", a code it copies
    "Pulse **Guardar** para conservar `notes.txt`."     ← "**" around the words aligned with "Save"
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

MARKUP = re.compile(r"(?P<code>`[^`\n]+`)|\[(?P<link>[^\]\n]+)\]\((?P<url>[^()\s]+)\)"
                    r"|(?<![\w*])(?P<mark>\*\*|__|\*|_)(?=[^\s*_])(?P<inner>[^\n]*?[^\s*_])(?P=mark)(?![\w*])")
WORD = re.compile(r"\S+")
OPENING, CLOSING = "¿¡\"'“‘«([", ".,:;!?…\"'”’»)]"  # left outside a word's markup


@dataclass(frozen=True)
class Markup:
    """One span of markup: its markers (``**``, ``*``, ``[``…``](url)``; a code span: the whole span), and the
    words of the plain line it covered."""

    opening: str
    closing: str
    words: frozenset[int]
    code: str = ""  # a code span as written, backticks included; ``placeholder`` stands for it
    placeholder: str = ""


@dataclass
class SetAside:
    """A line without its markup (what the model reads), the markup, and where each plain word was pasted."""

    plain: str
    markup: list[Markup] = field(default_factory=list)
    pasted_word: list[int] = field(default_factory=list)  # of each plain word: the pasted line's word


def word_at(text: str, at: int) -> int:
    """The index of the whitespace-separated word of ``text`` holding character ``at``."""
    return len(text[: at + 1].split()) - 1


def set_aside(line: str) -> SetAside:
    """``line`` as the model should read it, and what was set aside; a line without markup stays as it is."""
    plain, origin, spans, end = "", [], [], 0  # origin: the pasted character of each plain one
    for match in MARKUP.finditer(line):
        plain, origin = plain + line[end : match.start()], origin + list(range(end, match.start()))
        if match.group("code"):  # a placeholder the line does not hold, read where the span starts
            content = f"CODE{sum(bool(m.group('code')) for m, _, _ in spans) + 1}"
            while content in line:
                content += "X"
            origin += [match.start()] * len(content)
        else:
            inner = "link" if match.group("link") else "inner"
            content = match.group(inner)
            origin += list(range(match.start(inner), match.end(inner)))
        spans.append((match, len(plain), content))
        plain, end = plain + content, match.end()
    plain, origin = plain + line[end:], origin + list(range(end, len(line)))
    markup = []
    for match, at, content in spans:
        words = frozenset(range(word_at(plain, at), word_at(plain, at + len(content) - 1) + 1))
        if match.group("code"):
            markup.append(Markup("", "", words, match.group("code"), content))
        elif match.group("link"):
            markup.append(Markup("[", f"]({match.group('url')})", words))
        else:
            markup.append(Markup(match.group("mark"), match.group("mark"), words))
    return SetAside(plain, markup, [word_at(line, origin[m.start()]) for m in WORD.finditer(plain)])


def put_back(aside: SetAside, text: str, alignment: list[tuple[int, int]]) -> tuple[str, list[tuple[int, int]]]:
    """The translation ``text`` of ``aside.plain`` with the markup around the target words ``alignment`` (plain
    source word, target word) links to it, and the alignment in the words of the pasted line and of the result."""
    words = [(m.start(), m.end()) for m in WORD.finditer(text)]
    inserts, shift, copied = [], [0] * len(words), []  # shift: the words code spans add before each target word
    for markup in aside.markup:
        if markup.code:  # copied word for word: (its first source word, its target word)
            found = text.lower().find(markup.placeholder.lower())  # a line in capitals is read in sentence case
            inserts.append((found, 0, markup) if found >= 0 else (len(text), 0, markup))
            after = word_at(text, found) + 1 if found >= 0 else len(words)
            copied += [(min(markup.words), after - 1, len(markup.code.split()))] * (found >= 0)
            shift[after:] = [n + len(markup.code.split()) - 1 for n in shift[after:]]
            continue
        linked = sorted({t for s, t in alignment if s in markup.words})
        if linked:
            start, end = words[linked[0]][0], words[linked[-1]][1]
            start += len(text[start:end]) - len(text[start:end].lstrip(OPENING))
            end -= len(text[start:end]) - len(text[start:end].rstrip(CLOSING))
            if start < end:
                inserts += [(start, 1, markup.opening), (end, 0, markup.closing)]
    for at, _, marker in sorted(inserts, key=lambda insert: insert[:2], reverse=True):  # the last place first
        if isinstance(marker, Markup):  # a code span in its placeholder's place, or at the end
            found = text.lower().startswith(marker.placeholder.lower(), at)
            replaced = len(marker.placeholder) if found else 0
            text = text[:at] + (marker.code if found else " " + marker.code) + text[at + replaced :]
        else:
            text = text[:at] + marker + text[at:]
    pasted = {(aside.pasted_word[s], t + shift[t]) for s, t in alignment}
    pasted |= {(aside.pasted_word[s] + n, t + shift[t] + n) for s, t, length in copied for n in range(length)}
    return text, sorted(pasted, key=lambda pair: (pair[1], pair[0]))
