"""Knowledge graph: nodes with Vietnamese titles and English aliases, edges, practice items."""

from __future__ import annotations

from nemo_ops.seed_data.base import TableData, at

# The tables below are laid out as tables; the formatter would put every field on its own line.
# fmt: off

# (id, title, aliases, subject, grade, strand, description)
_NODES: tuple[tuple[str, str, tuple[str, ...], str, int, str, str], ...] = (
    # Mathematics, grade 5
    ("math-05-fractions", "Phân số", ("fractions",), "math", 5, "numbers",
     "So sánh, quy đồng và cộng trừ phân số."),
    ("math-05-decimals", "Số thập phân", ("decimals", "decimal numbers"), "math", 5, "numbers",
     "Đọc, viết, so sánh và làm tròn số thập phân."),
    ("math-05-percentages", "Tỉ số phần trăm", ("percentages", "percent"), "math", 5, "numbers",
     "Tìm tỉ số phần trăm của hai số và giải bài toán phần trăm."),
    ("math-05-triangle-area", "Diện tích hình tam giác", ("area of a triangle",), "math", 5,
     "geometry", "Công thức diện tích tam giác từ đáy và chiều cao."),
    # Mathematics, grade 6
    ("math-06-gcd", "Ước chung lớn nhất", ("greatest common divisor", "GCD"), "math", 6,
     "numbers", "Tìm ước chung lớn nhất bằng phân tích ra thừa số nguyên tố."),
    ("math-06-integers", "Số nguyên", ("integers",), "math", 6, "numbers",
     "Cộng, trừ, nhân, chia số nguyên và quy tắc dấu."),
    # Mathematics, grade 8
    ("math-08-polynomial-multiplication", "Nhân đa thức", ("polynomial multiplication",),
     "math", 8, "algebra", "Nhân đơn thức với đa thức và đa thức với đa thức."),
    ("math-08-algebraic-identities", "Hằng đẳng thức",
     ("algebraic identities", "special products"), "math", 8, "algebra",
     "Bảy hằng đẳng thức đáng nhớ: bình phương, lập phương, hiệu hai bình phương."),
    ("math-08-factorization", "Phân tích đa thức thành nhân tử",
     ("factorization", "factoring polynomials"), "math", 8, "algebra",
     "Đặt nhân tử chung, dùng hằng đẳng thức, nhóm hạng tử."),
    ("math-08-rational-expressions", "Phân thức đại số", ("rational expressions",), "math", 8,
     "algebra", "Rút gọn, quy đồng và cộng trừ phân thức."),
    ("math-08-linear-equations", "Phương trình bậc nhất một ẩn",
     ("linear equations in one variable", "linear equations"), "math", 8, "algebra",
     "Giải phương trình dạng ax + b = 0 và bài toán lập phương trình."),
    ("math-08-linear-functions", "Hàm số bậc nhất", ("linear functions",), "math", 8,
     "functions", "Hàm số y = ax + b và đồ thị của nó."),
    ("math-08-slope", "Hệ số góc", ("slope", "gradient"), "math", 8, "functions",
     "Hệ số góc của đường thẳng y = ax + b và vị trí tương đối của hai đường thẳng."),
    ("math-08-pythagorean-theorem", "Định lí Pythagore", ("Pythagorean theorem",), "math", 8,
     "geometry", "Quan hệ giữa ba cạnh của tam giác vuông và định lí đảo."),
    ("math-08-thales-theorem", "Định lí Thalès", ("Thales's theorem", "intercept theorem"),
     "math", 8, "geometry", "Đoạn thẳng tỉ lệ tạo bởi đường thẳng song song với một cạnh."),
    ("math-08-similar-triangles", "Tam giác đồng dạng", ("similar triangles",), "math", 8,
     "geometry", "Ba trường hợp đồng dạng của tam giác."),
    ("math-08-quadrilaterals", "Tứ giác", ("quadrilaterals",), "math", 8, "geometry",
     "Hình thang, hình bình hành, hình chữ nhật, hình thoi, hình vuông."),
    ("math-08-experimental-probability", "Xác suất thực nghiệm",
     ("experimental probability",), "math", 8, "statistics_probability",
     "Ước lượng xác suất từ tần số của kết quả trong nhiều lần thử."),
    ("math-08-data-charts", "Biểu đồ và phân tích dữ liệu", ("data charts", "data analysis"),
     "math", 8, "statistics_probability", "Đọc và lập biểu đồ cột, đoạn thẳng, hình quạt tròn."),
    # Mathematics, grades 9 and 11
    ("math-09-square-roots", "Căn bậc hai", ("square roots",), "math", 9, "algebra",
     "Căn bậc hai số học và biến đổi biểu thức chứa căn."),
    ("math-09-linear-systems", "Hệ hai phương trình bậc nhất hai ẩn",
     ("systems of linear equations",), "math", 9, "algebra",
     "Giải hệ bằng phương pháp thế và phương pháp cộng đại số."),
    ("math-09-quadratic-equations", "Phương trình bậc hai",
     ("quadratic equations", "quadratic formula"), "math", 9, "algebra",
     "Công thức nghiệm, biệt thức delta và định lí Viète."),
    ("math-11-arithmetic-progressions", "Cấp số cộng", ("arithmetic progressions",), "math", 11,
     "algebra", "Số hạng tổng quát và tổng n số hạng đầu của cấp số cộng."),
    ("math-11-derivatives", "Đạo hàm", ("derivatives",), "math", 11, "calculus",
     "Định nghĩa đạo hàm, quy tắc tính và ý nghĩa hình học."),
    # Other subjects
    ("science-08-density", "Khối lượng riêng", ("density",), "science", 8, "physics",
     "Khối lượng riêng, trọng lượng riêng và cách đo."),
    ("science-08-chemical-reactions", "Phản ứng hóa học", ("chemical reactions",), "science", 8,
     "chemistry", "Dấu hiệu của phản ứng hóa học và định luật bảo toàn khối lượng."),
    ("english-08-present-perfect", "Thì hiện tại hoàn thành", ("present perfect tense",),
     "english", 8, "grammar", "Cấu trúc have/has + V3 và cách dùng với since, for."),
    ("vietnamese-05-synonyms", "Từ đồng nghĩa", ("synonyms",), "vietnamese", 5, "vocabulary",
     "Từ đồng nghĩa hoàn toàn và không hoàn toàn."),
)

# (from, to, kind): a prerequisite edge means "learn from before to".
_EDGES: tuple[tuple[str, str, str], ...] = (
    ("math-05-fractions",                 "math-05-decimals",               "prerequisite"),
    ("math-05-decimals",                  "math-05-percentages",            "prerequisite"),
    ("math-06-integers",                  "math-08-polynomial-multiplication", "prerequisite"),
    ("math-08-polynomial-multiplication", "math-08-algebraic-identities",   "prerequisite"),
    ("math-08-algebraic-identities",      "math-08-factorization",          "prerequisite"),
    ("math-08-factorization",             "math-08-rational-expressions",   "prerequisite"),
    ("math-08-factorization",             "math-09-quadratic-equations",    "prerequisite"),
    ("math-08-linear-equations",          "math-09-linear-systems",         "prerequisite"),
    ("math-08-linear-equations",          "math-09-quadratic-equations",    "prerequisite"),
    ("math-08-linear-functions",          "math-08-slope",                  "prerequisite"),
    ("math-08-slope",                     "math-09-linear-systems",         "related"),
    ("math-08-thales-theorem",            "math-08-similar-triangles",      "prerequisite"),
    ("math-08-pythagorean-theorem",       "math-09-square-roots",           "related"),
    ("math-09-square-roots",              "math-09-quadratic-equations",    "prerequisite"),
    ("math-08-experimental-probability",  "math-08-data-charts",            "related"),
    ("math-11-arithmetic-progressions",   "math-11-derivatives",            "related"),
)

# (id, node_id, kind, stem, answer_key, rubric, difficulty)
_ITEMS: tuple[tuple[str, str, str, str, str, str, float], ...] = (
    ("I-ID-01", "math-08-algebraic-identities", "short_answer",
     "Khai triển (x + 3)².", "x² + 6x + 9",
     "Đủ ba hạng tử; thiếu 6x (quên 2ab) là lỗi khái niệm, không phải lỗi tính.", 0.3),
    ("I-ID-02", "math-08-algebraic-identities", "short_answer",
     "Khai triển (2x - 1)².", "4x² - 4x + 1",
     "Bình phương cả hệ số 2; dấu của hạng tử giữa là âm.", 0.45),
    ("I-ID-03", "math-08-algebraic-identities", "multiple_choice",
     "Biểu thức nào bằng a² - b²? A. (a - b)²  B. (a - b)(a + b)  C. (a + b)²  D. a² + b²",
     "B", "Chỉ chấp nhận B.", 0.25),
    ("I-ID-04", "math-08-algebraic-identities", "short_answer",
     "Tính nhanh 101² bằng hằng đẳng thức.", "10201",
     "Cần thấy (100 + 1)²; đáp số đúng mà không dùng hằng đẳng thức được nửa điểm.", 0.5),
    ("I-FA-01", "math-08-factorization", "short_answer",
     "Phân tích thành nhân tử: x² - 9.", "(x - 3)(x + 3)",
     "Chấp nhận mọi thứ tự nhân tử.", 0.35),
    ("I-FA-02", "math-08-factorization", "short_answer",
     "Phân tích thành nhân tử: 3x² + 6x.", "3x(x + 2)",
     "Phải đặt đủ nhân tử chung 3x.", 0.3),
    ("I-SL-01", "math-08-slope", "short_answer",
     "Tìm hệ số góc của đường thẳng y = -2x + 5.", "-2",
     "Nhầm với tung độ gốc 5 là lỗi khái niệm.", 0.2),
    ("I-SL-02", "math-08-slope", "open",
     "Hai đường thẳng y = 3x + 1 và y = 3x - 4 có vị trí tương đối thế nào? Vì sao?",
     "Song song vì cùng hệ số góc 3 và tung độ gốc khác nhau",
     "Nêu đủ hai điều kiện: hệ số góc bằng nhau, tung độ gốc khác nhau.", 0.55),
    ("I-LE-01", "math-08-linear-equations", "short_answer",
     "Giải phương trình 3x - 7 = 11.", "x = 6", "Chấp nhận 6 hoặc x = 6.", 0.2),
    ("I-PY-01", "math-08-pythagorean-theorem", "short_answer",
     "Tam giác vuông có hai cạnh góc vuông 6 cm và 8 cm. Tính cạnh huyền.", "10 cm",
     "Thiếu đơn vị trừ một phần tư số điểm.", 0.3),
    ("I-TH-01", "math-08-thales-theorem", "short_answer",
     "Cho DE song song BC, AD = 2, DB = 3, AE = 4. Tính EC.", "6",
     "Lập đúng tỉ lệ AD/DB = AE/EC.", 0.5),
    ("I-QE-01", "math-09-quadratic-equations", "short_answer",
     "Giải phương trình x² - 5x + 6 = 0.", "x = 2 hoặc x = 3",
     "Cần đủ hai nghiệm.", 0.55),
    ("I-PR-01", "math-08-experimental-probability", "short_answer",
     "Gieo xúc xắc 50 lần, mặt 6 xuất hiện 9 lần. Xác suất thực nghiệm của mặt 6 là bao nhiêu?",
     "9/50", "Chấp nhận 0,18.", 0.3),
    ("I-FR-01", "math-05-fractions", "short_answer", "Tính 1/2 + 1/3.", "5/6",
     "Phải quy đồng mẫu số trước khi cộng.", 0.25),
    ("I-DC-01", "math-05-decimals", "short_answer",
     "Làm tròn 3,476 đến hàng phần mười.", "3,5", "Chấp nhận 3.5.", 0.2),
    ("I-PC-01", "math-05-percentages", "short_answer",
     "Lớp có 40 học sinh, 12 em đạt giỏi. Tỉ số phần trăm học sinh giỏi là bao nhiêu?", "30%",
     "Thiếu ký hiệu % trừ một phần tư số điểm.", 0.35),
)

# fmt: on

NODES = TableData(
    "knowledge.nodes",
    ("id",),
    tuple(
        {
            "id": node_id,
            "title": title,
            "aliases": list(aliases),
            "subject": subject,
            "grade": grade,
            "strand": strand,
            "description": description,
            "updated_at": at(days=-120),
        }
        for node_id, title, aliases, subject, grade, strand, description in _NODES
    ),
)

EDGES = TableData(
    "knowledge.edges",
    ("from_node_id", "to_node_id", "kind"),
    tuple(
        {"from_node_id": source, "to_node_id": target, "kind": kind}
        for source, target, kind in _EDGES
    ),
)

ITEMS = TableData(
    "knowledge.items",
    ("id",),
    tuple(
        {
            "id": item_id,
            "node_id": node_id,
            "kind": kind,
            "stem": stem,
            "answer_key": answer_key,
            "rubric": rubric,
            "difficulty": difficulty,
            "updated_at": at(days=-120),
        }
        for item_id, node_id, kind, stem, answer_key, rubric, difficulty in _ITEMS
    ),
)

TABLES = (NODES, EDGES, ITEMS)
