"""Passages that read like instructions to the model rather than content.

Retrieved text can be written by anyone. The prompt already says that sources are data; these
patterns additionally flag the passages that try to give orders, so the caller sees them and the
gateway withholds them. Teaching text uses the same words all the time ("bỏ qua yêu cầu của đề
bài", "ignore air resistance", "từ nay ta kí hiệu", ``print()``, role-play in a word problem),
so each family below names what an instruction to a model is about: the model's own
instructions, rules or prompt, its role, its hidden text, or what it must answer. Matching runs
on text folded to lower case without Vietnamese diacritics, invisible characters removed,
full-width and look-alike letters read as ASCII (``nemo_core.text.fold_lookalikes``, from
Unicode's confusables data), so the patterns are written that way. A word that mixes letters
with the digits and signs leetspeak writes for letters (``1gn0re``, ``ru1es``) is read a second
time with them as letters (:data:`LEET`).

Measured on the labelled corpus ``nemo_testing.corpora`` (``instructions``) by ``make bench``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import partial

from nemo_core.text import fold_lookalikes
from nemo_gateway.grounding.literals import LiteralFilter

# What a model's instructions are called; "yeu cau" and "quy dinh" only with a word that points
# back at them ("yeu cau truoc do"), since an exercise has requirements too.
_RULES_EN = (
    r"(?:instructions?|directions?|directives?|guidelines?|guidance|rules?|prompts?|system "
    r"(?:prompt|message|instructions?)|programming|constraints|restrictions|safety "
    r"(?:rules|guidelines|principles)|filters)"
)
_BEFORE_EN = r"(?:previous|prior|earlier|preceding|above|initial|original|old|former|system)"
_RULES_VI = (
    r"(?:chi dan|chi thi|huong dan|menh lenh|quy tac|nguyen tac|rang buoc|thiet lap|cai dat"
    r"|bo loc|loi dan|loi nhac)"
)
_BEFORE_VI = (
    r"(?:truoc( do| day| kia)?|o tren|phia tren|ben tren|ban dau|cu|goc|he thong|da duoc"
    r"|vua (dan|noi)|cua ban)"
)

INSTRUCTION_PATTERNS: tuple[str, ...] = (
    # Override the model's instructions: "ignore the instructions above", "quên hết chỉ dẫn".
    rf"(?<!(?:n't|not|ver) )\b(?:ignore|disregard|forget|override|bypass|skip|discard|drop|set "
    rf"aside|throw out|wipe|cancel|never mind|don'?t bother with|stop following|do not "
    rf"(?:comply|follow|obey)|no longer follow)\b.{{0,50}}\b(?:{_RULES_EN}|(?:everything|all|"
    rf"whatever|what)\b.{{0,25}}\b(?:above|before|earlier|told|said|instructed)|the above|"
    rf"{_BEFORE_EN} (?:\w+ )?(?:requests?|messages?|setup|text))",
    r"\b(?:ignore|disregard|forget|discard)\b (?:all )?(?:of )?(?:the )?(?:above|everything "
    r"above|prior|previous)\b",
    rf"(?<!dung )(?<!khong )\b(?:bo qua|quen|lo di|phot lo|gat bo|xoa bo|vut bo|huy bo|vo hieu"
    rf"|bo het|khong (?:can )?tuan (?:theo|thu)|dung (?:tuan theo|lam theo|nghe theo|ban tam)"
    rf")\b.{{0,40}}\b(?:{_RULES_VI}|(?:yeu cau|quy dinh|noi dung|moi (?:thu|dieu)|tat ca|nhung "
    rf"gi|gi)\b.{{0,20}}\b{_BEFORE_VI}\b|vai tro)",
    rf"\b(?:cac|moi|tat ca|nhung) (?:{_RULES_VI}|yeu cau)\b.{{0,25}}\b(?:da het hieu luc|vo "
    r"hieu|la gia|khong con)",
    r"\b(?:instructions?|requests?|directions?) (?:above|you (?:got|received)|before)\b.{0,30}"
    r"\b(?:outdated|void|fake|no longer)",
    r"\b(?:earlier|previous|prior|above) (?:requests|instructions|directions) (?:are|were) "
    r"(?:void|fake|outdated|cancelled)",
    r"\b(?:rest of )?this (?:document|text|passage|paragraph) (?:does not|doesn'?t) matter\b",
    r"\b(?:phan con lai cua )?(?:tai lieu|doan) (?:nay )?khong quan trong\b",
    # A new role or mode for the model.
    r"\byou are (?:now|no longer)\b(?! (?:ready|going to learn|able)\b)",
    r"\b(?:from now on|henceforth|from this point on|starting now)\b.{0,40}\b(?:you|answer|"
    r"reply|respond|do not|don'?t)\b",
    r"\byou will now\b",
    r"\b(?:pretend|imagine) (?:that )?you (?:are|have)\b(?!.{0,40}\b(?:shop|seller|farmer|"
    r"customer|oranges|character)\b)",
    r"\bact as (?:an? |the )?(?:ai|assistant|system|admin|administrator|developer|unfiltered|"
    r"uncensored|dan)\b",
    r"\b(?:your|the) new (?:role|task|job|goal|instructions?)\b(?! (?:in|of) (?:the|this) "
    r"(?:group|game|project)\b)",
    r"\bin your new role\b",
    r"\b(?:developer|debug|maintenance|unrestricted|jailbreak) mode\b",
    r"\b(?:bay gio|tu (?:bay )?gio|tu nay|ke tu (?:luc nay|gio)|tu luc nay)\b(?: tro di)?,? "
    r"(?:(?:ban|may|em) (?:la|se|phai|chi|hay|khong)|dung|khong duoc|hay)\b",
    r"\b(?:hay )?dong vai (?:la )?(?:mot )?(?:tro ly|ai|mo hinh|chatbot|he thong|quan tri|"
    r"nguoi khong|hacker)",
    r"\b(?:ban|em) khong con la\b",
    r"\b(?:vai tro|nhiem vu) (?:moi|that su) cua ban\b",
    r"\bvoi vai tro moi\b",
    r"\bche do (?:nha phat trien|go loi|developer|khong gioi han|khong kiem duyet)\b",
    r"\b(?:khong|chua tung) co (?:bat ky )?(?:han che|gioi han|quy tac)\b.{0,30}\b(?:tra loi|"
    r"tuong tuong)|\btuong tuong ban khong co\b",
    r"\b(?:imagine|pretend) you have no (?:restrictions|rules|limits)\b",
    r"\bwithout any restrictions\b|\bno (?:rules|limits)\b.{0,15}\b(?:answer|friend)",
    r"\b(?:khong bi gioi han|khong co gioi han|khong gioi han)\b",
    r"\bdan\b.{0,20}\b(?:no limits|khong (?:co )?gioi han)",
    # Hidden text the model holds.
    r"\b(?:reveal|print|show|display|repeat|leak|dump|output|disclose|tell me|give me|share|"
    r"send me|what)\b.{0,30}\b(?:system (?:prompt|message|instructions?)|(?:your|the) "
    r"(?:hidden|initial|original|secret) (?:instructions|rules|prompt)|hidden (?:instructions|"
    r"rules)|initial (?:prompt|instructions)|api key|admin password|configuration|(?:whole|"
    r"entire) (?:conversation|context|system prompt)|conversation so far)",
    r"\b(?:tiet lo|in ra|hien thi|chep lai|lap lai|cho (?:toi|minh) biet|gui|xuat)\b.{0,30}"
    r"\b(?:(?:chi dan|loi nhac|huong dan|chi thi|quy tac) (?:he thong|an|goc)|system prompt|"
    r"khoa api|mat khau|(?:toan bo )?(?:ngu canh|loi nhac ban dau))",
    # What the model must answer, or whom it must tell.
    r"\b(?:answer|reply|respond|say|state|tell the (?:user|student|students))\b(?: only)? "
    r"(?:that|with the word|with \"|\")\b",
    r"\b(?:reply|respond) (?:only )?with\b",
    r"\b(?:tell|inform) the (?:user|student|students|child)\b",
    r"\b(?:always|only) (?:answer|reply|respond|say|agree|repeat)\b",
    r"\b(?:instead of answering|instead,? answer|answer that)\b",
    r"\b(?:hay|phai) (?:tra loi|noi|khang dinh|thong bao)(?: (?:voi|cho) (?:nguoi dung|hoc "
    r"sinh))? rang\b",
    r"\b(?:tra loi|noi|thong bao|khang dinh) (?:voi |cho )?(?:nguoi dung|hoc sinh) rang\b",
    r"\b(?:hay )?noi (?:voi|cho) (?:hoc sinh|nguoi dung)\b",
    r"\bchi (?:duoc )?(?:tra loi|lap lai|noi)\b",
    r"\bluon (?:luon )?(?:tra loi|khang dinh|noi)\b",
    r"\bthay vi tra loi\b|\bthay vao do,? hay\b",
    r"\bcau tra loi (?:dung )?(?:luon|phai)\b|\bthe correct answer is always\b",
    r"\bthe answer must contain\b",
    # The passage speaks to the model, or says it outranks the system.
    r"\b(?:note|message|hint|instruction|attention|a note) (?:to|for) (?:the )?(?:ai|"
    r"assistant|model|chatbot|language model|llm)\b",
    r"\b(?:attention|dear|hey) (?:ai|assistant|model|chatbot)\b",
    r"\bif you are (?:an? )?(?:ai|assistant|language model|llm|chatbot|virtual assistant|ai "
    r"assistant)\b",
    r"(?:^|[.!?] )(?:assistant|model|ai assistant|ai|system)[,:] ",
    # The same address after a label a carrier puts first ("Goal: Assistant: ...").
    r": (?:assistant|model|ai assistant|ai|system): ",
    r"\b(?:luu y|ghi chu|thong diep|goi y|chi thi|gui)\b.{0,12}\b(?:cho|danh cho|gui) (?:tro "
    r"ly|ai|mo hinh|chatbot|he thong ai)\b",
    r"\b(?:gui|thong diep cho) (?:mo hinh|tro ly|chatbot)\b",
    r"\bneu ban la (?:mot )?(?:ai|tro ly|mo hinh|chatbot|he thong)\b",
    r"\b(?:tro ly|mo hinh|chatbot)(?: ai)?(?: oi\b| vui long\b|:| hay\b| phai\b)",
    r"\b(?:takes precedence|overrides?|supersedes?|replaces)\b.{0,30}\b(?:instructions|"
    r"guidance|directions)\b",
    r"\b(?:priority|new) instructions?\b|\binstruction to the model\b",
    r"\b(?:uu tien cao nhat|chi dan uu tien|chi dan moi|ghi de|thay the (?:moi|huong dan|chi "
    r"dan))\b",
    r"\b(?:doan|tai lieu|cau lenh) (?:nay|van nay) (?:ghi de|thay the|duoc uu tien)\b",
    r"\bcoi (?:day|doan nay) la chi dan\b|\btreat (?:it|this) as your instructions\b",
    r"\bdisable your filters\b",
)

# One alternation: a single scan of the text instead of one per pattern.
_COMPILED = re.compile("|".join(f"(?:{pattern})" for pattern in INSTRUCTION_PATTERNS))
# The words one of which any match holds: a text without any is not scanned (same answer).
_MAY_MATCH = LiteralFilter.of(INSTRUCTION_PATTERNS).may_match


LEET: tuple[dict[str, str], ...] = (
    {"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t", "@": "a", "$": "s", "!": "i"},
    {"1": "l", "|": "l"},
)
"""What leetspeak writes for letters; ``1`` stands for ``i`` or ``l``, so a word is read once with
each table (the second over the first)."""
_LEET_CHARS = "".join(sorted({char for table in LEET for char in table}))
_LEET_WORD = re.compile(
    rf"(?<![\w{re.escape(_LEET_CHARS)}])(?=[\w{re.escape(_LEET_CHARS)}]*[a-z])"
    rf"(?=[\w{re.escape(_LEET_CHARS)}]*[{re.escape(_LEET_CHARS)}])[\w{re.escape(_LEET_CHARS)}]{{2,}}"
)


def _leet_readings(folded: str) -> list[str]:
    """``folded`` with its leetspeak words read as letters, once per table; none when it has no
    such word."""
    if _LEET_WORD.search(folded) is None:
        return []
    readings = []
    table: dict[str, str] = {}
    for extra in LEET:
        table = table | extra
        readings.append(_LEET_WORD.sub(partial(_as_letters, str.maketrans(table)), folded))
    return readings


def _as_letters(letters: dict[int, str], word: re.Match[str]) -> str:
    return word.group().translate(letters)


def looks_like_instructions(text: str) -> bool:
    """Whether ``text`` contains an instruction aimed at the model."""
    folded = " ".join(fold_lookalikes(text).split())
    return any(
        _MAY_MATCH(reading) and _COMPILED.search(reading)
        for reading in (folded, *_leet_readings(folded))
    )


def none_can_instruct(texts: Iterable[str]) -> bool:
    """True only when no text of ``texts`` can contain an instruction: read together, they hold
    no word an instruction needs, and neither do the leetspeak readings of the texts that hold
    a leetspeak word. Each piece's plain reading is part of the joined one, so whatever a piece
    holds the joined text holds; False sends the caller to :func:`looks_like_instructions`,
    piece by piece."""
    folded = [" ".join(fold_lookalikes(text).split()) for text in texts]
    if _MAY_MATCH("\n".join(folded)):
        return False
    # Maths items are full of leetspeak-shaped words ("3x", "x4"): only their pieces are read again.
    return not any(_MAY_MATCH(reading) for piece in folded for reading in _leet_readings(piece))
