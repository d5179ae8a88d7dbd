"""What the identifier gate forbids and what it knows to be safe: the part a privacy reviewer reads.

A field name is judged by its words, not by its exact spelling. Names are split into words the
way they are written (``snake_case``, ``camelCase``, ``kebab-case``, ``dotted.names``, spaces)
and run-together words are split again with :data:`VOCABULARY` (``fullname`` → ``full name``,
``userid`` → ``user id``, ``dateofbirth`` → ``date of birth``); a word that cannot be split stays
whole, so ``photosynthesis`` and ``phoneme`` are words of their own and pass. A name is forbidden
when its words contain

- one of :data:`FORBIDDEN_WORDS` (``email``, ``phone``, ``address``, ``birth``, ``avatar``...);
- one of :data:`FORBIDDEN_PHRASES` as consecutive words (``profile picture``, ``ngay sinh``);
- a person or a household directly followed by a key word (:data:`KEY_OWNERS` then
  :data:`KEY_WORDS`: ``user id``, ``learner ids``, ``family key``), since keys are for binding
  and never leave the service; ``node id``, ``message id`` and ``parent node id`` pass;
- the word ``name`` (a person's name, in any form: ``display_name``, ``studentName``,
  ``guardian-name``, ``username``), unless the whole name is one of :data:`SAFE_NAMES`.

:data:`SAFE_NAMES` is short and every entry says why it is safe. Adding a name to it is a policy
change, reviewed like one.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

FORBIDDEN_WORDS: Final[Mapping[str, str]] = MappingProxyType(
    {
        # Names of people.
        "surname": "a family name",
        "nickname": "what a child is called",
        "fullname": "a person's whole name",
        "username": "an account's login name",
        # Contact and whereabouts.
        "email": "an e-mail address",
        "emails": "e-mail addresses",
        "mail": "an e-mail or postal address",
        "phone": "a telephone number",
        "phones": "telephone numbers",
        "telephone": "a telephone number",
        "sdt": "a telephone number (Vietnamese abbreviation of số điện thoại)",
        "address": "where a person lives or is reached",
        "addresses": "where people live or are reached",
        "street": "part of a home address",
        # Birth (age in whole years comes from a definer function and is allowed).
        "birth": "a birth date or place",
        "birthday": "a birth date",
        "birthdate": "a birth date",
        "birthplace": "where a child was born",
        "born": "when or where a child was born",
        "dob": "a date of birth",
        # Pictures of people and accounts elsewhere.
        "avatar": "a child's picture",
        "avatars": "children's pictures",
        "photo": "a picture of a person",
        "photos": "pictures of people",
        "selfie": "a picture of a person",
        "facebook": "a social-network account",
        "instagram": "a social-network account",
        "tiktok": "a social-network account",
        "twitter": "a social-network account",
        "zalo": "a messaging account (common in Vietnam)",
        "linkedin": "a social-network account",
        # Identity documents.
        "passport": "an identity document",
        "ssn": "a national identity number",
        "cccd": "a citizen identity card number (Căn cước công dân)",
        "cmnd": "an identity card number (Chứng minh nhân dân)",
        # People the learner is linked to.
        "guardian": "a person responsible for the child",
        "guardians": "people responsible for the child",
        # The child's own words.
        "payload": "an answer as the child wrote it (evidence payload)",
        "verbatim": "an answer as the child wrote it",
    }
)
"""Words that make any name that contains them forbidden, with what such a field would hold."""

FORBIDDEN_PHRASES: Final[Mapping[tuple[str, ...], str]] = MappingProxyType(
    {
        ("profile", "picture"): "a child's picture",
        ("profile", "pic"): "a child's picture",
        ("profile", "image"): "a child's picture",
        ("social", "links"): "accounts on social networks",
        ("social", "profile"): "an account on a social network",
        ("links", "json"): "the learners table's column of social links",
        ("national", "id"): "an identity number",
        ("citizen", "id"): "an identity number",
        ("mobile", "number"): "a telephone number",
        # Vietnamese field names, written without diacritics as column names are.
        ("ho", "ten"): "a full name (họ tên)",
        ("ho", "va", "ten"): "a full name (họ và tên)",
        ("ngay", "sinh"): "a date of birth (ngày sinh)",
        ("dien", "thoai"): "a telephone number (điện thoại)",
        ("dia", "chi"): "an address (địa chỉ)",
        ("ten", "truong"): "a school's name (tên trường)",
        ("truong", "hoc"): 'a school (trường học; "trường" alone is also a data field)',
        ("ten", "hoc", "sinh"): "a student's name (tên học sinh)",
        ("ten", "bo"): "a father's name (tên bố)",
        ("ten", "me"): "a mother's name (tên mẹ)",
        ("ten", "con"): "a child's name (tên con)",
        ("ten", "dem"): "a middle name (tên đệm)",
        ("ma", "hoc", "sinh"): "a student's code (mã học sinh)",
        ("ma", "so", "hoc", "sinh"): "a student's code (mã số học sinh)",
        ("nam", "sinh"): "a birth year (năm sinh)",
        ("sinh", "nhat"): "a birthday (sinh nhật)",
        ("noi", "sinh"): "a birthplace (nơi sinh)",
        ("anh", "dai", "dien"): "a child's picture (ảnh đại diện)",
        ("que", "quan"): "where a family comes from (quê quán)",
        ("noi", "o"): "where a person lives (nơi ở)",
        ("phu", "huynh"): "a parent (phụ huynh)",
        ("nguoi", "giam", "ho"): "a guardian (người giám hộ)",
    }
)
"""Consecutive words that make a name forbidden, Vietnamese ones as written without their
diacritics (names are read without them: "Họ tên", "họ_tên" and "ho_ten" are one name); each
word alone is ordinary (``social
studies``, ``national curriculum``, ``ten`` is also the English number)."""

KEY_OWNERS: Final = frozenset(
    {
        "user", "users", "learner", "learners", "student", "students", "pupil", "pupils",
        "child", "children", "kid", "kids", "family", "families", "parent", "parents",
        "mentor", "mentors", "teacher", "teachers", "member", "members", "owner", "owners",
        "account", "accounts", "person", "people", "sibling", "siblings", "supporter",
        "supporters", "school", "schools", "guardian", "guardians",
    }
)  # fmt: skip
"""Words for people, households and schools, whose keys never leave the service."""

KEY_WORDS: Final = frozenset({"id", "ids", "key", "keys", "uid", "uuid", "code", "number", "no"})
"""Words that, right after one of :data:`KEY_OWNERS`, make the name a key: ``user_id``,
``studentCode``, ``learner-ids``, ``account_number``."""

NAME_WORDS: Final = frozenset({"name", "names"})
"""The words of a person's name; forbidden unless the whole name is safe."""

SAFE_NAMES: Final[Mapping[str, str]] = MappingProxyType(
    {
        "node_name": "the name of a knowledge node: curriculum, not a person",
        "subject_name": "the name of a school subject",
        "strand_name": "the name of a strand of a subject",
        "topic_name": "the name of a topic of the curriculum",
        "lesson_name": "the name of a lesson",
        "unit_name": "the name of a unit of a course",
        "course_name": "the name of a course",
        "package_name": "the name of a learning package",
        "competency_name": "the name of a competency the engines measure",
        "skill_name": "the name of a skill the engines measure",
        "milestone_name": "the name of a milestone such as an exam",
        "activity_name": "the name of a kind of learning activity",
        "tool_name": "the name of a tool a tutor called",
        "prompt_name": "the name of a registered prompt",
        "model_name": "the name of an AI model",
        "file_name": "the name of a file of teaching material",
        "exam_name": "the name of an exam the learner prepares for, such as a milestone",
        "theorem_name": "the name of a theorem of the curriculum",
        "formula_name": "the name of a formula of the curriculum",
        "chapter_name": "the name of a chapter of a textbook",
    }
)
"""Whole names (words joined by ``_``) that hold ``name`` but no person's name, with why."""

PHRASE_WORDS: Final = frozenset(word for phrase in FORBIDDEN_PHRASES for word in phrase)
"""Every word of a forbidden phrase: a key written in text of several words counts only when all
of them are known words (see ``names.is_forbidden_key``)."""

VOCABULARY: Final = frozenset(
    {
        *FORBIDDEN_WORDS,
        # Short Vietnamese words ("me", "bo", "ma", "o") would split English words that hold
        # them ("phoneme" is no "phone me"): only the longer ones split run-together names.
        *(
            word
            for phrase in FORBIDDEN_PHRASES
            for word in phrase
            if len(word) > 2 or word in {"ho", "va", "so"}
        ),
        *KEY_OWNERS,
        *KEY_WORDS,
        *NAME_WORDS,
        *(word for name in SAFE_NAMES for word in name.split("_")),
        # Words that qualify the forbidden ones when written together (``firstname``).
        "first", "last", "middle", "given", "full", "display", "nick", "real", "legal",
        "maiden", "sur", "of", "date", "day", "place", "year", "home", "work", "contact",
        "primary", "secondary", "url", "urls", "link", "e", "cell", "mobile", "tele", "his",
        "her", "my", "their",
    }
)  # fmt: skip
"""Words a run-together name is split into; a name that cannot be split into them stays one
word (``photosynthesis``, ``hostname``, ``tournament``)."""


# Identifiers in text: what the matchers look for (see ``identifiers.py``), in folded words
# (lower case, no diacritics, đ as d).

PLACEHOLDERS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "name": "[name]",
        "email": "[email]",
        "phone": "[phone]",
        "address": "[address]",
        "school": "[school]",
        "birth_date": "[birth date]",
    }
)
"""Each kind of identifier and the placeholder that replaces it in text a person wrote. Bundle
metadata counts redactions by these kinds, never by value."""

PERSON_WORDS: Final = frozenset(
    {
        # Vietnamese forms of address and kinship, as written (with their diacritics: "bạn" is a
        # friend, "bán" is to sell; "ba" is left out, it is also the number three).
        "bạn", "em", "anh", "chị", "bố", "mẹ", "má", "cô", "chú", "bác", "thầy", "ông", "bà",
        "cậu", "mợ", "dì", "dượng", "cháu", "bé", "nhóc",
        # English titles and greetings.
        "mr", "mrs", "ms", "miss", "dear", "hi", "hello", "aunt", "uncle",
    }
)  # fmt: skip
"""Words that, right before a given name of the circle written alone, make it a person: "bố Hùng",
"bạn Mai", "Mr Nam". Alone, a given name is often an ordinary word ("An" is safe, "Mai" is
tomorrow, "Nam" is south) and passes; so does a given name after a person word written without
diacritics ("ban Mai"), which no longer says whether it is a person."""

ORDINARY_PAIRS: Final = frozenset(
    {
        "anh hùng", "anh dũng", "anh minh", "anh tài", "anh tuấn", "anh hào", "anh linh",
        "anh thư", "em bé", "bà con", "ông bà", "cô đơn", "cô gái", "cậu bé", "bé nhỏ",
        "chú ý", "bác sĩ", "thầy giáo", "cô giáo", "mẹ hiền", "em trai", "em gái", "anh em",
        "chị em", "hi vọng",
    }
)  # fmt: skip
"""A person word and a word after it that together are an ordinary word ("anh hùng" is a hero,
"chú ý" is attention), so the second is no given name there."""


SCHOOL_WORDS: Final = frozenset(
    {
        "truong", "thcs", "thpt", "th", "tieu", "hoc", "trung", "co", "so", "pho", "thong",
        "chuyen", "mam", "non", "lop", "school", "primary", "secondary", "high", "middle",
    }
)  # fmt: skip
"""Words of a school's kind. A circle school's own name ("Lê Quý Đôn") is an identifier when one
of these stands right before it ("THCS Lê Quý Đôn", "trường Lê Quý Đôn"); alone it is also a
historical figure and a street, and passes."""

BIRTH_WORDS: Final[Mapping[str, bool]] = MappingProxyType(
    {
        # Vietnamese: "ngày sinh", "sinh ngày", "năm sinh"... ("học sinh" and "sinh học" are
        # not birth words, see shapes.py).
        "ngay sinh": False,
        "sinh ngay": False,
        "sinh nhat": False,
        "sinh vao": True,
        "sinh nam": True,
        "nam sinh": True,
        "sn": False,
        "ns": False,
        # English.
        "born": True,
        "birth": False,
        "birthday": False,
        "birthdate": False,
        "birth date": False,
        "date of birth": False,
        "dob": False,
        "d.o.b": False,
        "birth year": True,
        "year of birth": True,
    }
)
"""Words that make a date written right after them (on the same line) a birth date, whoever's it
is; True where a year alone is a birth year too ("sinh năm 2014", "born in 2014")."""

WRITTEN_TEXT_FIELDS: Final = frozenset(
    {
        "nemo.context.v1.Goal.title",
        "nemo.context.v1.Goal.target",
        "nemo.context.v1.LearningPlan.title",
        "nemo.context.v1.NextExperience.title",
        "nemo.context.v1.NextExperience.reason",
        "nemo.context.v1.Readiness.milestone",
    }
)
"""Fields of a learner bundle that hold text a person (a learner, a parent, a teacher) or an
engine from what a person wrote, rather than curriculum or codes: an identifier there is masked
when the purpose says so (``Purpose.written_text_identifiers``). Every other field is structured
and a bundle with an identifier in it is refused. In conversation bundles every message, the
summary and the state's strings are written text."""

CURRICULUM_FIELDS: Final = frozenset(
    {
        "nemo.context.v1.MasteryEntry.node_title",
        "nemo.context.v1.RetentionEntry.node_title",
        "nemo.context.v1.NodeRef.node_title",
        "nemo.context.v1.PlanStep.node_title",
        "nemo.context.v1.NextExperience.node_title",
        "nemo.context.v1.LearningContext.package_title",
        "nemo.context.v1.Competency.title",
    }
)
"""Fields that hold titles of the curriculum, written by the platform's authors: a title may read
like a key ("Email: gửi và nhận thư", "Truyện ngắn \u201cThe Address\u201d: tóm tắt"), and is
not read for keys, here or where another text (the rendered text) quotes it. It is still read for
keys of learners and for identifiers."""
