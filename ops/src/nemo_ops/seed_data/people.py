"""Users, families, learners and who may reach whom.

Keys carry the kind (L learner, F family, U user), the school's code (2041) and a serial, so
none of them can be mistaken for ordinary text (see ``nemo_context.ids``).

- F-2041-1: parent U-2041-P1 (owner), U-2041-P4 (guardian), grandfather U-2041-G1
  (supporter); learners L-2041-1 (grade 8, own account U-2041-L1, an aunt U-2041-G3 as guardian
  outside the family) and L-2041-3 (grade 5).
- F-2041-2: parent U-2041-P2 (owner); learner L-2041-2 (grade 6), legal guardian U-2041-G2
  outside the family.
- F-2041-3: parent U-2041-P3 (owner); learner L-2041-10 (grade 11), an id that contains
  "L-2041-1" as a prefix.
- Mentors: U-2041-M1 active on L-2041-1 only, U-2041-M2 inactive on L-2041-2, U-2041-M3 with no
  assignment.
- Staff U-2041-S1, admin U-2041-A1.
"""

from __future__ import annotations

from datetime import date

from nemo_ops.seed_data.base import TableData, at


def _user(user_id: str, role: str, name: str, email: str, phone: str) -> dict[str, object]:
    return {
        "id": user_id,
        "role": role,
        "display_name": name,
        "email": email,
        "phone": phone,
        "created_at": at(days=-400),
    }


USERS = TableData(
    "learning.users",
    ("id",),
    (
        _user(
            "U-2041-P1",
            "parent",
            "Nguyễn Thị Lan",
            "lan.nguyenthi.demo@example.com",
            "0912 345 678",
        ),
        _user(
            "U-2041-P2", "parent", "Trần Văn Hùng", "hung.tranvan.demo@example.com", "0903 221 457"
        ),
        _user("U-2041-P3", "parent", "Lê Thị Mai", "mai.lethi.demo@example.com", "0938 660 112"),
        _user(
            "U-2041-P4",
            "parent",
            "Nguyễn Văn Dũng",
            "dung.nguyenvan.demo@example.com",
            "0977 104 386",
        ),
        _user(
            "U-2041-G1",
            "parent",
            "Nguyễn Văn Bình",
            "binh.nguyenvan.demo@example.com",
            "0243 856 201",
        ),
        _user(
            "U-2041-G2", "parent", "Phạm Thị Hoa", "hoa.phamthi.demo@example.com", "0986 452 019"
        ),
        _user("U-2041-G3", "parent", "Ngô Thị Thu", "thu.ngothi.demo@example.com", "0961 584 203"),
        _user("U-2041-M1", "mentor", "Đỗ Minh Khoa", "khoa.do.mentor@example.com", "0916 830 554"),
        _user("U-2041-M2", "mentor", "Vũ Thu Trang", "trang.vu.mentor@example.com", "0355 207 918"),
        _user(
            "U-2041-M3", "mentor", "Hoàng Đức Anh", "anh.hoang.mentor@example.com", "0868 413 207"
        ),
        _user(
            "U-2041-S1", "staff", "Bùi Thanh Hương", "huong.bui.staff@example.com", "0909 118 326"
        ),
        _user(
            "U-2041-A1", "admin", "Đặng Quốc Việt", "viet.dang.admin@example.com", "0904 772 931"
        ),
        _user(
            "U-2041-L1", "learner", "Nguyễn Minh An", "minhan.nguyen.hs@example.com", "0981 246 135"
        ),
        _user(
            "U-2041-L10", "learner", "Lê Hoàng Nam", "hoangnam.le.hs@example.com", "0392 817 664"
        ),
    ),
)

FAMILIES = TableData(
    "learning.families",
    ("id",),
    (
        {"id": "F-2041-1", "name": "Gia đình Nguyễn Văn Dũng", "created_at": at(days=-400)},
        {"id": "F-2041-2", "name": "Gia đình Trần Văn Hùng", "created_at": at(days=-380)},
        {"id": "F-2041-3", "name": "Gia đình Lê Thị Mai", "created_at": at(days=-300)},
    ),
)

FAMILY_MEMBERS = TableData(
    "learning.family_members",
    ("family_id", "user_id"),
    tuple(
        {"family_id": family, "user_id": user, "relation": relation, "created_at": at(days=-400)}
        for family, user, relation in (
            ("F-2041-1", "U-2041-P1", "owner"),
            ("F-2041-1", "U-2041-P4", "guardian"),
            ("F-2041-1", "U-2041-G1", "supporter"),
            ("F-2041-2", "U-2041-P2", "owner"),
            ("F-2041-3", "U-2041-P3", "owner"),
        )
    ),
)

LEARNERS = TableData(
    "learning.learners",
    ("id",),
    (
        {
            "id": "L-2041-1",
            "family_id": "F-2041-1",
            "user_id": "U-2041-L1",
            "grade": 8,
            "display_name": "Nguyễn Minh An",
            "first_name": "An",
            "last_name": "Nguyễn Minh",
            "birth_date": date(2012, 10, 14),
            "email": "minhan.nguyen.hs@example.com",
            "phone": "0981 246 135",
            "address": "Số 12 ngõ 45 Trần Duy Hưng, Trung Hòa, Cầu Giấy, Hà Nội",
            "school_name": "Trường THCS Nghĩa Tân",
            "avatar_url": "https://cdn.example.com/avatars/minh-an-2012.png",
            "facebook_url": "https://www.facebook.com/minhan.nguyen.2012",
            "links_json": {"tiktok": "https://www.tiktok.com/@minhan.toanhoc"},
            "photo_url": "https://cdn.example.com/photos/minh-an-lop8.jpg",
            "created_at": at(days=-400),
            "updated_at": at(days=-30),
        },
        {
            "id": "L-2041-2",
            "family_id": "F-2041-2",
            "user_id": None,
            "grade": 6,
            "display_name": "Trần Bảo Ngọc",
            "first_name": "Ngọc",
            "last_name": "Trần Bảo",
            "birth_date": date(2014, 5, 2),
            "email": None,
            "phone": None,
            "address": "47 Lê Văn Sỹ, phường 13, quận 3, TP. Hồ Chí Minh",
            "school_name": "Trường THCS Lê Quý Đôn",
            "avatar_url": "https://cdn.example.com/avatars/bao-ngoc.png",
            "facebook_url": None,
            "links_json": None,
            "photo_url": None,
            "created_at": at(days=-380),
            "updated_at": at(days=-60),
        },
        {
            "id": "L-2041-3",
            "family_id": "F-2041-1",
            "user_id": None,
            "grade": 5,
            "display_name": "Nguyễn Gia Huy",
            "first_name": "Huy",
            "last_name": "Nguyễn Gia",
            "birth_date": date(2015, 8, 21),
            "email": None,
            "phone": None,
            "address": "Số 12 ngõ 45 Trần Duy Hưng, Trung Hòa, Cầu Giấy, Hà Nội",
            "school_name": "Trường Tiểu học Dịch Vọng A",
            "avatar_url": "https://cdn.example.com/avatars/gia-huy.png",
            "facebook_url": None,
            "links_json": {"youtube": "https://www.youtube.com/@giahuy.vevui"},
            "photo_url": "https://cdn.example.com/photos/gia-huy-lop5.jpg",
            "created_at": at(days=-400),
            "updated_at": at(days=-45),
        },
        {
            "id": "L-2041-10",
            "family_id": "F-2041-3",
            "user_id": "U-2041-L10",
            "grade": 11,
            "display_name": "Lê Hoàng Nam",
            "first_name": "Nam",
            "last_name": "Lê Hoàng",
            "birth_date": date(2009, 12, 3),
            "email": "hoangnam.le.hs@example.com",
            "phone": "0392 817 664",
            "address": "22 Nguyễn Chí Thanh, Hải Châu, Đà Nẵng",
            "school_name": "Trường THPT chuyên Lê Quý Đôn Đà Nẵng",
            "avatar_url": "https://cdn.example.com/avatars/hoang-nam.png",
            "facebook_url": "https://www.facebook.com/hoangnam.le.dn",
            "links_json": {"github": "https://github.com/hoangnam-le-dn"},
            "photo_url": None,
            "created_at": at(days=-300),
            "updated_at": at(days=-10),
        },
    ),
)

GUARDIANS = TableData(
    "learning.guardians",
    ("learner_id", "user_id"),
    tuple(
        {"learner_id": learner, "user_id": user, "kind": kind, "created_at": at(days=-200)}
        for learner, user, kind in (
            ("L-2041-1", "U-2041-G3", "relative"),
            ("L-2041-2", "U-2041-G2", "legal_guardian"),
        )
    ),
)

MENTOR_ASSIGNMENTS = TableData(
    "learning.mentor_assignments",
    ("mentor_user_id", "learner_id"),
    (
        {
            "mentor_user_id": "U-2041-M1",
            "learner_id": "L-2041-1",
            "status": "active",
            "assigned_at": at(days=-90),
            "ended_at": None,
        },
        {
            "mentor_user_id": "U-2041-M2",
            "learner_id": "L-2041-2",
            "status": "inactive",
            "assigned_at": at(days=-240),
            "ended_at": at(days=-120),
        },
    ),
)

TABLES = (USERS, FAMILIES, FAMILY_MEMBERS, LEARNERS, GUARDIANS, MENTOR_ASSIGNMENTS)
