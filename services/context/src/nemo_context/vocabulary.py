"""Words for the engine codes that reach rendered text: subjects, strands, plan activities and
step statuses, kinds of learning experience. A prompt reads better, and a model guesses less,
with "Toán, mạch Đại số" than with "math, algebra".

A code missing here is printed as it is, underscores as spaces: a new engine code degrades to a
readable word, never to an empty one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from nemo_protos.type.v1 import locale_pb2

TERMS: Final[Mapping[str, tuple[str, str]]] = {
    # subjects
    "math": ("Toán", "mathematics"),
    "vietnamese": ("Tiếng Việt", "Vietnamese"),
    "english": ("Tiếng Anh", "English"),
    "science": ("Khoa học", "science"),
    # strands
    "algebra": ("Đại số", "algebra"),
    "calculus": ("Giải tích", "calculus"),
    "functions": ("Hàm số", "functions"),
    "geometry": ("Hình học", "geometry"),
    "numbers": ("Số học", "numbers"),
    "statistics_probability": ("Thống kê và xác suất", "statistics and probability"),
    "grammar": ("Ngữ pháp", "grammar"),
    "vocabulary": ("Từ vựng", "vocabulary"),
    "physics": ("Vật lý", "physics"),
    # plan activities and kinds of experience
    "lesson": ("học bài mới", "lesson"),
    "practice": ("luyện tập", "practice"),
    "guided_practice": ("luyện tập có hướng dẫn", "guided practice"),
    "review": ("ôn tập", "review"),
    "assessment": ("kiểm tra", "assessment"),
    # step statuses
    "planned": ("chưa bắt đầu", "planned"),
    "in_progress": ("đang học", "in progress"),
    "done": ("đã xong", "done"),
    "skipped": ("bỏ qua", "skipped"),
}
"""Code -> (Vietnamese, English)."""


def term(code: str, locale: locale_pb2.Locale.ValueType) -> str:
    """The word for ``code`` in ``locale`` (Vietnamese unless English is asked for)."""
    words = TERMS.get(code)
    if words is None:
        return code.replace("_", " ")
    return words[1] if locale == locale_pb2.LOCALE_EN else words[0]
