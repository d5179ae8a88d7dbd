"""LaTeX that JSON silently reads as control characters, and control characters in answers.

In JSON text, ``\\frac`` is a valid escape: form feed followed by "rac". A model that writes LaTeX
with single backslashes therefore produces JSON that parses, with the formula destroyed
(``\\theta`` becomes a tab and "heta", ``\\neq`` a newline and "eq"). The backslash repair cannot
help: the text is valid, and doubling a valid escape would be a guess about its meaning, not a
syntax repair. So the pipeline re-asks the model to double its backslashes; if it never does,
the run falls back to the baseline. The loss is made visible, never silent.

What decides, for the five JSON escape letters followed by letters:

- ``\\b``, ``\\f``, ``\\r``, ``\\t``: backspace, form feed, a carriage return that ends no line
  and a tab have no place before a word (or a ``{``) in a learner-facing text, whatever the
  command: every such escape is read as LaTeX written with one backslash. No list is needed,
  so no command of these letters can be missed.
- ``\\n``: a line break before a word is ordinary text ("Dòng một\\nem làm bài"), so it is
  LaTeX only when the letters make a command of a maintained list (``latex_n_commands.txt``,
  generated from latex2mathml, pylatexenc and unicodeit) and no letter of any script follows.
  A relation or binary operator of that list (``\\ne``, ``\\ni``, ``\\nleq``...) must also have a
  right operand: followed, after spaces, by ``)``, ``.``, ``,``, ``:``, ``;``, ``=`` or the end of
  the string, it is a line break before a list item or a definition ("d) 7\\ne) 8",
  "\\ni. Bước một", "\\ne = 2,7"). When what follows the ``n`` is itself a word that opens lines
  of prose (:data:`PROSE_WORDS`: "in", "is", "exists", "subset", ...), the same holds for that
  command, and a word of two or more letters after it is read as prose too ("\\nin the
  morning", "\\nexists in the docs", "\\ne là hằng số"), and so is a single letter that such a
  word follows ("\\nin A result is..."); LaTeX puts a symbol there, such as a single letter that
  ends the formula, a digit, a brace or a command.

Whatever the source looked like, a decoded text holds no control character but line breaks
(:func:`control_characters`): the output fields are prose for learners, where a tab, a form feed
or ``\\u0008`` is never meant. That also catches a single-letter accent such as ``\\t x``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from importlib import resources
from typing import Any


def _n_commands() -> tuple[frozenset[str], frozenset[str]]:
    """(every listed ``n`` command, those that need a right operand)."""
    table = resources.files("nemo_gateway.structured").joinpath("latex_n_commands.txt")
    text = table.read_text("utf-8")
    rows = [line.split() for line in text.splitlines() if line and not line.startswith("#")]
    return frozenset(row[0] for row in rows), frozenset(row[0] for row in rows if len(row) > 1)


N_COMMANDS, NEEDS_OPERAND = _n_commands()

# An odd run of backslashes (so the last one is unescaped), then the escape letter.
_UNESCAPED = r"(?<!\\)(?:\\\\)*\\"
# b, f, r, t before an ASCII letter or a brace: the letters as written, for the message.
_NEVER_PROSE = re.compile(_UNESCAPED + r"([bfrt](?:[A-Za-z]+|(?=\{)))")
# n, then a run of ASCII letters that no letter of any script continues.
_NEWLINE_WORD = re.compile(_UNESCAPED + r"(n[A-Za-z]+)(?![^\W\d_])")
# What cannot start an operand, in JSON source: closing or list punctuation, "=", the string's
# closing quote.
_NO_OPERAND = re.compile(r' *[).,:;="]')
PROSE_WORDS = frozenset({"e", "i", "in", "is", "exists", "subset"})
"""The ``n`` commands whose letters after the ``n`` are a word that opens lines of prose, and
whose operand in LaTeX is one symbol, one letter or a command. Reviewed against the generated
list: the other words in it are relations that take a product or a segment ("a \\nmid bc",
"AB \\nparallel CD", "\\nless", "\\nsim"), where reading a word after them as prose would
accept a destroyed formula; the rest are fragments (``\\not``, ``\\neq``, ``\\natural``), single
letters (``\\nu`` is read as the symbol: "\\nu là tần số" is LaTeX far more often than a line that
starts with "u") and words without their Vietnamese marks (``\\ncong``)."""
# After such a command: a word of two letters or more, or a single letter (an article, a
# pronoun) that such a word follows.
_WORD_NEXT = re.compile(r" *(?:[^\W\d_] +)?[^\W\d_]{2}")
# Control characters (Unicode category Cc) but the line feed; a carriage return only where it
# ends no line.
_CONTROL = re.compile(r"[\x00-\x09\x0b\x0c\x0e-\x1f\x7f-\x9f]|\r(?!\n)")


def ambiguous_latex(json_source: str) -> list[str]:
    """The LaTeX commands in ``json_source`` that JSON would read as control characters."""
    found = {"\\" + match.group(1) for match in _NEVER_PROSE.finditer(json_source)}
    for match in _NEWLINE_WORD.finditer(json_source):
        name = match.group(1)
        if name not in N_COMMANDS:
            continue
        end = match.end()
        opens_prose = name[1:] in PROSE_WORDS
        if (name in NEEDS_OPERAND or opens_prose) and _NO_OPERAND.match(json_source, end):
            continue
        if opens_prose and _WORD_NEXT.match(json_source, end):
            continue
        found.add("\\" + name)
    return sorted(found)


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def control_characters(value: Any) -> list[str]:
    """Control characters in the strings of a decoded JSON value, as ``U+XXXX``: all but line
    breaks (``\\n``, or ``\\r\\n``)."""
    found = {char for text in _strings(value) for char in _CONTROL.findall(text)}
    return sorted(f"U+{ord(char):04X}" for char in found)
