"""Whether a learner-facing text states a score, mastery, accuracy or a like measure of the learner.

Scores, mastery and confidence are server-authoritative, so a generated text that states one is
rejected, never edited. Teaching text is full of numbers, percentages and other people's scores
("giảm giá 20%", "Lan scored 8 points", "độ chính xác 0,01", "Cho 3 điểm A, B, C"), so a
sentence states a claim only when it is a statement (not a question or a condition) and either

- names a measure that only describes a learner (mastery, proficiency, readiness, "độ vững")
  next to a number, or accuracy next to a percentage; or
- names a measure that may describe anyone (score, average, result, "điểm") next to a number,
  in a sentence about the reader (em, con, bạn, you, your); or
- says the reader achieved a score: "em đạt 8/10 điểm", "you got 9 out of 10".

"bạn" before a name ("bạn Lan") is a third person, as in word problems. Matching runs on text
folded like the instruction check (:func:`nemo_core.text.fold_lookalikes`: lower case, no
diacritics, look-alike letters read as the letters they imitate), once as written and once with
numbers written in words read as digits ("chín mươi phần trăm" is "90 phan tram", "nine out of
ten" is "9 out of 10"); the words come from ``num2words`` (0 to 100, Vietnamese and English).
Measured on the labelled corpus ``nemo_testing.corpora`` (``score_claims``) by ``make bench``.
"""

from __future__ import annotations

import re
from functools import cache, lru_cache

from num2words import num2words

from nemo_core.text import fold_lookalikes

_NUMBER = r"\d+(?:[.,]\d+)?"
# A number written as a score or share: 8/10, 95%, 8 điểm, 9 out of 10, 7 trên 10, 4/5 sao.
_SCORE = (
    rf"{_NUMBER}\s*(?:%|/\s*\d+|phan tram|percent\b|(?:\w+ ){{0,2}}?(?:diem|points?|sao|stars?)\b"
    rf"|(?:cau )?(?:tren|trong) (?:\w+ )?\d+|(?:out )?of (?:the |a possible )?\d+"
    r"|cau dung|correct)"
)
_LEARNER_MEASURE = (
    r"(?:(?:muc (?:do )?)?thanh thao|do vung|muc (?:do )?san sang|muc do hieu|mastery|"
    r"proficien\w*|readiness|stability|understanding|tien do|progress)"
)
_ACCURACY = r"(?:do chinh xac|ti le (?:tra loi |lam )?(?:dung|chinh xac)|accuracy|correct\S* rate)"
# A result may be anything ("nhân kết quả với 3"): only a number written as a score counts.
_RESULT = r"(?:ket qua|result)"
_MEASURE = (
    r"(?:diem(?: so| trung binh| kiem tra| nang luc)?|ti le (?:sai|hoan thanh)|"
    r"phan tram cau dung|do tin cay|score|marks?|grade|average|result|confidence|error rate|"
    r"completion rate|precision rate|percentage of correct answers)"
)
_READER = r"\b(?:em|con|ban|you|your)\b"
_ACHIEVED = (
    r"\b(?:dat|duoc|lam dung|tra loi (?:dung|chinh xac)|giai dung|dung duoc|co|hoan thanh|"
    r"nam duoc|xep thu|vuot|ghi duoc|dan dau|duoc cham|danh gia|got|scored|earned|achieved|"
    r"reached|hit|solved|answered|completed|finished|have|passed|ranked|outperformed|"
    r"collected|understood|were right|are leading|rated|graded)\b"
)

_CLAIMS = tuple(
    re.compile(pattern)
    for pattern in (
        rf"\b{_LEARNER_MEASURE}\b.{{0,40}}{_NUMBER}|{_NUMBER}.{{0,40}}\b{_LEARNER_MEASURE}\b",
        rf"\b{_ACCURACY}\b.{{0,40}}{_NUMBER}\s*%|{_NUMBER}\s*%.{{0,40}}\b{_ACCURACY}\b",
    )
)
_READER_CLAIMS = tuple(
    re.compile(pattern)
    for pattern in (
        rf"\b(?:{_MEASURE}|{_ACCURACY})\b.{{0,40}}{_NUMBER}|{_SCORE}.{{0,30}}\b{_MEASURE}\b",
        rf"\b{_RESULT}\b.{{0,40}}{_SCORE}",
        rf"{_READER}.{{0,40}}{_ACHIEVED}.{{0,40}}{_SCORE}",
        # A score with nothing after it: "you scored 72", "em đạt 9".
        rf"\b(?:scored|dat|graded|rated)\s+{_NUMBER}",
        rf"\b(?:got|had|lam dung|dung) {_NUMBER} (?:right|correct|cau dung|dung)\b",
        rf"{_NUMBER}\s*/\s*\d+ (?:cau )?(?:dung|correct)",
    )
)
_DIGIT = re.compile(r"\d")
_WORD = re.compile(r"[a-z]+")
_CONDITION = re.compile(r"\b(?:neu|gia su|if|suppose|imagine|would)\b")
_NAMED = re.compile(r"\b[Bb]ạn(?= [A-ZĐ])")
_SENTENCES = re.compile(r"(?<=[.!?;])\s+|\n+")


NUMBER_WORD_LANGUAGES = ("vi", "en")
MAX_NUMBER_IN_WORDS = 100


@cache
def _number_words() -> tuple[re.Pattern[str], dict[str, str]]:
    """A pattern of the numbers 0 to :data:`MAX_NUMBER_IN_WORDS` in words, folded, longest
    first, and the digits of each."""
    digits: dict[str, str] = {}
    for lang in NUMBER_WORD_LANGUAGES:
        for number in range(MAX_NUMBER_IN_WORDS + 1):
            words = " ".join(
                fold_lookalikes(num2words(number, lang=lang)).replace("-", " ").split()
            )
            digits.setdefault(words, str(number))
    alternation = "|".join(re.escape(words) for words in sorted(digits, key=len, reverse=True))
    return re.compile(rf"\b(?:{alternation})\b"), digits


def numbers_as_digits(folded: str) -> str:
    """Folded text with its numbers in words written as digits."""
    pattern, digits = _number_words()
    return pattern.sub(lambda match: digits[match.group()], folded)


def states_a_score(text: str) -> bool:
    """Whether ``text`` states a measure of the learner (see the module docstring)."""
    return any(
        _states_a_score(sentence) for sentence in _SENTENCES.split(_NAMED.sub("người", text))
    )


@lru_cache(maxsize=4096)
def _states_a_score(sentence: str) -> bool:
    """One sentence's verdict; cached, since a stream checks what it released again with what
    follows."""
    folded = " ".join(fold_lookalikes(sentence).split())
    if not folded or folded.endswith("?") or _CONDITION.search(folded):
        return False
    # Every claim names a number: most sentences have none, in digits or in words.
    converted = numbers_as_digits(folded)
    if _DIGIT.search(converted) is None:
        return False
    return _claims(folded) or (converted != folded and _claims(converted))


def _claims(folded: str) -> bool:
    """Whether one folded statement claims a measure of the reader."""
    if any(claim.search(folded) for claim in _CLAIMS):
        return True
    return re.search(_READER, folded) is not None and any(
        claim.search(folded) for claim in _READER_CLAIMS
    )
