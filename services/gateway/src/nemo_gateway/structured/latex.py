"""LaTeX commands that JSON silently reads as control characters.

In JSON text, ``\\frac`` is a valid escape: form feed followed by "rac". A model that writes LaTeX
with single backslashes therefore produces JSON that parses, with the formula destroyed
(``\\theta`` becomes a tab and "heta", ``\\neq`` a newline and "eq"). The backslash repair cannot
help: the text is valid and ambiguous. The gateway's decision: detect the known commands below in
the JSON source, treat them as a validation error and re-ask the model to double its backslashes;
if it never does, the run falls back to the baseline. The loss is made visible, never silent.

Only commands whose first letter is a JSON escape letter (b, f, n, r, t) can be misread. What
counts as a command:

- no letter may follow it, so a newline before a word ("\\nem", "\\ntu") is not mistaken
  for LaTeX;
- a relation or operator (:data:`NEEDS_OPERAND`: ``\\ne``, ``\\ni``, ``\\to``, ``\\times``...)
  must have a right operand: when it is followed, after spaces, by ``)``, ``.``, ``,``, ``:``,
  ``;``, ``=`` or the end of the string, it is not LaTeX but a line break before a list item or
  a definition ("d) 7\\ne) 8", "\\ni. Bước một", "\\ne = 2,7"). Symbols (``\\nu``,
  ``\\theta``) and the other commands (``\\frac``, ``\\neq x``) count wherever they stand.
"""

from __future__ import annotations

import re

# Commands starting with a JSON escape letter, as they occur in school mathematics and physics.
AMBIGUOUS_COMMANDS: tuple[str, ...] = (
    # \b -> backspace
    "backslash", "bar", "beta", "begin", "bigl", "bigr", "binom", "bmod", "boldsymbol", "bot",
    "boxed", "bullet",
    # \f -> form feed
    "forall", "frac",
    # \n -> newline
    "nabla", "ne", "neg", "neq", "ni", "nmid", "not", "notin", "nu",
    # \r -> carriage return
    "rangle", "rceil", "rfloor", "rho", "right", "rightarrow", "rm",
    # \t -> tab
    "tan", "tau", "text", "textbf", "tfrac", "theta", "tilde", "times", "to", "top", "triangle",
)  # fmt: skip

# Relations and binary operators among them: LaTeX puts an operand after each.
NEEDS_OPERAND: frozenset[str] = frozenset(
    {"ne", "neq", "ni", "notin", "nmid", "to", "rightarrow", "times", "bmod"}
)

# An odd run of backslashes (so the last one is unescaped), then a command not followed by a
# letter of any script.
_PATTERN = re.compile(
    r"(?<!\\)(?:\\\\)*\\(" + "|".join(sorted(AMBIGUOUS_COMMANDS, key=len, reverse=True)) + r")"
    r"(?![^\W\d_])"
)
# What cannot start an operand, in JSON source: closing or list punctuation, "=", the string's
# closing quote.
_NO_OPERAND = re.compile(r' *[).,:;="]')


def ambiguous_latex(json_source: str) -> list[str]:
    """The LaTeX commands in ``json_source`` that JSON would read as control characters."""
    return sorted(
        {
            "\\" + match.group(1)
            for match in _PATTERN.finditer(json_source)
            if not (match.group(1) in NEEDS_OPERAND and _NO_OPERAND.match(json_source, match.end()))
        }
    )
