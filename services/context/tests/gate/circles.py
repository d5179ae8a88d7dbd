"""The seeded circles of the demo learners, and their fingerprints as this test suite derives them
from the identifiers themselves (``test_circle_fingerprints.py`` checks that the database derives
the same rows from the columns).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date

from nemo_context.gate.circle import Circle, fingerprint
from nemo_context.gate.tokens import accented_words, words
from nemo_context.settings import DEVELOPMENT_IDENTIFIER_KEY
from nemo_ops.seed_data import TableData, people

KEY = DEVELOPMENT_IDENTIFIER_KEY.encode()


@dataclass(frozen=True)
class Person:
    """The descriptive identifiers of one person of a circle."""

    name: str
    email: str | None = None
    phone: str | None = None
    address: str | None = None
    school: str | None = None
    birth_date: date | None = None


def _rows(table: TableData) -> list[Mapping[str, object]]:
    return list(table.rows)


def seeded_circle(learner_id: str) -> list[Person]:
    """The people around ``learner_id`` in the demo data: the learner and its siblings, their
    accounts, the family's members, the learner's guardians and mentors."""
    learners = {str(row["id"]): row for row in _rows(people.LEARNERS)}
    users = {str(row["id"]): row for row in _rows(people.USERS)}
    family = learners[learner_id]["family_id"]
    kids = [row for row in learners.values() if row["family_id"] == family]
    user_ids = {str(kid["user_id"]) for kid in kids if kid["user_id"]}
    user_ids |= {
        str(row["user_id"]) for row in _rows(people.FAMILY_MEMBERS) if row["family_id"] == family
    }
    user_ids |= {
        str(row["user_id"]) for row in _rows(people.GUARDIANS) if row["learner_id"] == learner_id
    }
    user_ids |= {
        str(row["mentor_user_id"])
        for row in _rows(people.MENTOR_ASSIGNMENTS)
        if row["learner_id"] == learner_id
    }
    circle = [
        Person(
            name=str(kid["display_name"]),
            email=_text(kid["email"]),
            phone=_text(kid["phone"]),
            address=_text(kid["address"]),
            school=_text(kid["school_name"]),
            birth_date=kid["birth_date"] if isinstance(kid["birth_date"], date) else None,
        )
        for kid in kids
    ]
    circle.extend(
        Person(
            name=str(users[user]["display_name"]),
            email=_text(users[user]["email"]),
            phone=_text(users[user]["phone"]),
        )
        for user in sorted(user_ids)
    )
    return circle


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _prints(key: bytes, values: Iterable[str]) -> list[str]:
    return [fingerprint(key, value) for value in values]


def circle_rows(key: bytes, circle: Iterable[Person]) -> list[tuple[str, list[str]]]:
    """The rows ``learning.circle_fingerprints`` returns for ``circle``: a name's words and their
    pairs and whole written together, an e-mail's local part, a phone's national digits, an
    address's first part from the house number, a school's words, a birth date, and the words of
    names, addresses and schools with their diacritics."""
    rows: list[tuple[str, list[str]]] = []
    persons = list(circle)
    for person in persons:
        name = words(person.name)
        rows.append(("name", _prints(key, name)))
        pairs = {a + b for i, a in enumerate(name) for j, b in enumerate(name) if i != j}
        rows.append(("name_joined", _prints(key, sorted(pairs | {"".join(name)}))))
    for email in sorted({person.email for person in persons if person.email}):
        rows.append(("email", _prints(key, words(email.split("@")[0]))))
    for phone in sorted({person.phone for person in persons if person.phone}):
        digits = "".join(char for char in phone if char.isdigit())
        national = digits[2:] if digits.startswith("84") else digits.removeprefix("0")
        rows.append(("phone", _prints(key, [national])))
    for person in persons:
        if person.address:
            first_part = person.address.split(",")[0]
            house = next((i for i, char in enumerate(first_part) if char.isdigit()), 0)
            rows.append(("address", _prints(key, words(first_part[house:]))))
        if person.school:
            rows.append(("school", _prints(key, words(person.school))))
        if person.birth_date:
            rows.append(("birth_date", _prints(key, [person.birth_date.isoformat()])))
    accented = [person.name for person in persons]
    accented += [person.address.split(",")[0] for person in persons if person.address]
    accented += [person.school for person in persons if person.school]
    rows.extend(("accented", _prints(key, accented_words(value))) for value in accented)
    return rows


def circle_of(circle: Iterable[Person], key: bytes = KEY) -> Circle:
    """The gate's view of ``circle``."""
    return Circle.from_rows(key, circle_rows(key, circle))
