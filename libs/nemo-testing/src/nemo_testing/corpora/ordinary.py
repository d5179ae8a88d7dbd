"""Ordinary teaching text, Vietnamese and English, that identifies nobody: lesson titles (some
shaped like a ``key: value``), formulas and comparisons (``a < b``), class names, vocabulary
lists and glossaries (``onion = củ hành``), product and book codes, exam dates, historical
figures and places, and the ordinary words that are also given names ("An toàn", "ngày mai",
"miền Nam", "hùng vĩ").

:func:`ordinary_texts` generates the corpus from these pieces, deterministically (a fixed seed),
so a detector that flags any of them is raising a false alarm on text a platform shows children.
"""

from __future__ import annotations

import random
from functools import cache
from typing import Final

LESSON_TITLES: Final = (
    # Vietnamese curriculum, some shaped like fields.
    "Email: gửi và nhận thư",
    "Địa chỉ IP và tên miền",
    "Họ và tên trong tiếng Anh: first name và last name",
    'Truyện ngắn "The Address": tóm tắt',
    "Số điện thoại khẩn cấp: 113, 114, 115",
    "Ngày sinh của Bác Hồ 19/5 và ý nghĩa lịch sử",
    "Phân số và số thập phân",
    "Hằng đẳng thức đáng nhớ",
    "Hệ số góc của đường thẳng",
    "Phương trình bậc hai một ẩn",
    "Định lý Py-ta-go",
    "Tính chất ba đường trung tuyến của tam giác",
    "Văn bản nghị luận: Tinh thần yêu nước của nhân dân ta",
    "Bài thơ Tây Tiến của Quang Dũng",
    "Chiếc lược ngà của Nguyễn Quang Sáng",
    "Lê Quý Đôn và bộ Vân đài loại ngữ",
    "Trần Hưng Đạo và ba lần kháng chiến chống quân Nguyên Mông",
    "Hùng Vương dựng nước Văn Lang",
    "Nguyễn Du và Truyện Kiều",
    "An toàn giao thông cho học sinh tiểu học",
    "Mai Am và bài học về lòng tốt",
    "Miền Nam và Nam Bộ: địa lý tự nhiên",
    "Cảnh đẹp hùng vĩ của núi rừng Tây Bắc",
    "Thời gian biểu: ngày mai em làm gì?",
    "Sinh học 8: hệ tuần hoàn",
    "Học sinh với văn hóa giao thông",
    "Sinh nhật của bạn Gấu (truyện tranh)",
    "Năm 1945: Cách mạng tháng Tám",
    "Ngày 30 tháng 4 năm 1975: thống nhất đất nước",
    "Đường Lê Lợi và những con phố mang tên anh hùng",
    "Phường, xã, thị trấn: đơn vị hành chính cơ sở",
    "Trường học của em",
    "Trường THCS trong văn học thiếu nhi",
    # English.
    "Writing an email: greetings and closings",
    "Your address book: organising contacts",
    "Phone calls: polite phrases",
    "Name: a noun or a verb?",
    "Birthday party vocabulary",
    "Born Free: a story about lions",
    "Date of birth and other forms: filling in a form in English",
    "The Address by Marga Minco: reading guide",
    "Street map reading: left, right, straight on",
    "Present perfect: have you ever been to Ha Long Bay?",
    "Unit 3: My friends",
    "Unit 5: Our customs and traditions",
    "Fractions and decimals",
    "Linear equations in one variable",
    "The Pythagorean theorem",
    "Photosynthesis: how plants make food",
    "The water cycle",
    "Reading comprehension: The Little Prince",
    "Past simple vs past continuous",
    "Conditional sentences type 2",
    "Reported speech: statements and questions",
    "The solar system: planets and moons",
    "Electric circuits in series and in parallel",
    "Newton's laws of motion",
    "World War II: causes and consequences",
    "Probability: tossing a coin",
    "Area and perimeter of rectangles",
    "Prime numbers and factorisation",
    "Writing a postcard from your holiday",
    "Describing your school day",
    "Food and healthy eating",
    "Jobs and occupations: doctor, teacher, farmer",
    "Animals in danger",
    "Greetings: hello, goodbye, see you later",
    "Subject: the grammar of a sentence",
    "Title: how to write a good headline",
    "Summary: three steps to summarise a text",
    "Key: the answers to exercise 4",
    "Note: irregular verbs list",
    "User manual of a calculator",
    "Passive voice with modal verbs",
    "Relative clauses: who, which, that",
    "Ancient Egypt and the Nile",
    "Volcanoes and earthquakes",
    "Map skills: latitude and longitude",
    "Speed, distance and time word problems",
    "Percentages: discounts and interest",
    "Ratio and proportion",
    "Graphs of quadratic functions",
    "Vectors in the plane",
)
FORMULAS: Final = (
    "(a + b)² = a² + 2ab + b²",
    "x = (-b ± √Δ) / 2a",
    "S = πr²",
    "v = s / t = 120 km / 2 h = 60 km/h",
    "y = 2x + 3, hệ số góc a = 2",
    "sin²x + cos²x = 1",
    "E = mc²",
    "1 + 2 + 3 + ... + 100 = 5050",
    "0,333... = 1/3",
    "12 345 678 \u00d7 9 = 111 111 102",
    "2^10 = 1024",
    "log₂ 8 = 3",
    "H₂O, CO₂, NaCl",
    "F = m·a = 2 kg · 9,8 m/s² = 19,6 N",
    "P = U·I = 220 V · 0,5 A = 110 W",
)
COMPARISONS: Final = (
    "Nếu a < b và b < c thì a < c",
    "0 < x < 1",
    "x < 5 hoặc x > 7",
    "a <= b <= c",
    "1 < 2 < 3 < 4",
    "\\frac{1}{2} < \\frac{2}{3}",
    "x^2 < 4 <=> -2 < x < 2",
    "Với mọi x > 0 thì x + 1/x >= 2",
    "\\langle u, v \\rangle = 0",
    "so sánh: 3/4 > 2/3",
    "If p < q then -p > -q",
    "Tom & Jerry, A&B, 5 & 6",
)
GLOSSARIES: Final = (
    "onion = củ hành; garlic = tỏi",
    "one = một, only = chỉ, online = trực tuyến",
    "ongoing = đang diễn ra",
    "data: 12 học sinh, 3 nhóm",
    "File: bài 1; Tel: 113",
    "JavaScript: một ngôn ngữ lập trình",
)
CLASS_NAMES: Final = (
    "Lớp 8A3",
    "lớp 10 chuyên Toán 2",
    "Khối 6, lớp 6B",
    "Grade 7, Class 7C",
    "Nhóm học tập số 4",
    "Tổ 2 - lớp 9A1",
    "Câu lạc bộ Toán tuổi thơ",
    "Đội tuyển học sinh giỏi cấp quận",
)
VOCABULARY: Final = (
    "apple, banana, cherry, durian, mango",
    "mẹ, bố, anh, chị, em, ông, bà",
    "family, mother, father, brother, sister",
    "an toàn, bình an, an ninh",
    "ngày mai, hoa mai, mai mốt",
    "phương Nam, gió nam, nam châm",
    "anh hùng, hùng vĩ, hùng hồn",
    "ngọc trai, đá quý, viên ngọc",
    "Monday, Tuesday, Wednesday, Thursday, Friday",
    "email, address, phone number, name (từ vựng Unit 5)",
    "đường, phố, ngõ, phường, quận (từ vựng địa lý)",
)
CODES: Final = (
    "SP-2024-000123",
    "ISBN 978-604-0-12345-6",
    "Mã đề 132",
    "Mã môn học TOAN8-HK1",
    "Phòng thi số 12, tòa B",
    "Số báo danh 0123",
    "Mã sách giáo khoa SGK-8-T1",
    "Model X200-2025",
    "Serial 4820-1973-55",
    "Ticket #20250312",
    "Bài 12, trang 45, câu 3",
    "ID node math-08-slope",
)
DATES: Final = (
    "Kiểm tra giữa kỳ ngày 12/03/2025",
    "Hạn nộp bài: 2025-04-01",
    "Lịch thi: 15 tháng 6 năm 2025",
    "The test is on May 20, 2025",
    "Năm học 2024 - 2025",
    "Học kỳ 1 kết thúc ngày 15/1",
    "Ngày Nhà giáo Việt Nam 20/11",
    "Sinh hoạt lớp lúc 7 giờ 30",
)
SENTENCE_FRAMES: Final = (
    "{}",
    "Bài hôm nay: {}",
    "Ôn tập: {}.",
    "Chú ý: {}",
    "Lesson: {}",
    "Hint: {}",
    "Today we learn: {}",
    "Exercise 2: {}",
    "Read the text and answer: {}",
    "- {}",
    "Em hãy đọc kỹ \u201c{}\u201d rồi trả lời.",
)


@cache
def ordinary_texts(count: int = 1200, seed: int = 2025) -> tuple[str, ...]:
    """``count`` distinct ordinary strings: every piece alone, then pieces in sentence frames and
    short combinations."""
    pieces = (
        *LESSON_TITLES, *FORMULAS, *COMPARISONS, *CLASS_NAMES, *VOCABULARY, *GLOSSARIES, *CODES,
        *DATES,
    )  # fmt: skip
    texts: dict[str, None] = dict.fromkeys(pieces)
    rng = random.Random(seed)  # noqa: S311  a fixed corpus, not a secret
    while len(texts) < count:
        frame = rng.choice(SENTENCE_FRAMES)
        first, second = rng.sample(pieces, 2)
        text = frame.format(first if rng.random() < 0.5 else f"{first}; {second}")
        texts.setdefault(text, None)
    return tuple(texts)[:count]
