"""Whether an answer is written in the language its prompt declares.

Every prompt says which language to write in (``ANSWER_LANGUAGE``), and a Vietnamese request
must not be served an English answer. The text of an answer (every string of it, joined) is
identified by ``py3langid`` (its model ships in the package), choosing between the prompt
languages only. An answer is in the wrong language only when the other language wins with a
probability of at least :data:`MIN_CONFIDENCE` on at least :data:`MIN_LETTERS` letters: short
texts, formulas and names decide nothing. The pipeline re-asks such an answer.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from typing import Any, Final

from py3langid.langid import MODEL_FILE, LanguageIdentifier
from pydantic import BaseModel

from nemo_gateway.lang import Lang

MIN_LETTERS: Final = 40
MIN_CONFIDENCE: Final = 0.99


@cache
def _identifier() -> Any:
    identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    identifier.set_languages([lang.value for lang in Lang])
    return identifier


def prepare() -> None:
    """Load the model now (about half a second), so the first answer does not wait for it."""
    _identifier()


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, BaseModel):
        for item in value.__dict__.values():
            yield from _strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)


def written_in(text: str) -> Lang | None:
    """The language ``text`` is confidently written in, or None."""
    if sum(char.isalpha() for char in text) < MIN_LETTERS:
        return None
    language, probability = _identifier().classify(text)
    return Lang(language) if probability >= MIN_CONFIDENCE else None


def wrong_language(answer: Any, lang: Lang) -> Lang | None:
    """The other language an answer is confidently written in, or None."""
    found = written_in("\n".join(_strings(answer)))
    return found if found is not None and found is not lang else None
