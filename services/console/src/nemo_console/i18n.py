"""The console's words in Vietnamese (the default) and English: one table, read by every page.

A person picks the language with the switch in the header (kept in a cookie); without a choice
the browser's ``Accept-Language`` decides between the two, Vietnamese when it names neither.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

LOCALES: Final = ("vi", "en")
DEFAULT_LOCALE: Final = "vi"
LOCALE_COOKIE: Final = "nemo_console_lang"

#: Every phrase: key -> (Vietnamese, English).
PHRASES: Final[Mapping[str, tuple[str, str]]] = {
    "console": ("Bảng điều khiển Nemo", "Nemo console"),
    "skip": ("Bỏ qua, tới nội dung chính", "Skip to the main content"),
    "language": ("Ngôn ngữ", "Language"),
    "sign_in": ("Đăng nhập", "Sign in"),
    "sign_out": ("Đăng xuất", "Sign out"),
    "signed_in_as": ("Đã đăng nhập:", "Signed in as"),
    "operator": ("người vận hành", "operator"),
    "welcome": (
        "Xem và kiểm soát những gì AI làm: phụ huynh xem về con mình, người vận hành duyệt "
        "và điều tra.",
        "See and control what AI does: parents about their child, operators approve and "
        "investigate.",
    ),
    "sign_in_lead": (
        "Đăng nhập bằng tài khoản nền tảng của bạn.",
        "Sign in with your platform account.",
    ),
    "nav_approvals": ("Yêu cầu duyệt", "Approvals"),
    "nav_audit": ("Nhật ký kiểm toán", "Audit log"),
    "nav_agents": ("Agent và token", "Agents and tokens"),
    "nav_policies": ("Chính sách", "Policies"),
    "nav_evaluation": ("Đánh giá", "Evaluation"),
    "nav_family": ("Con của tôi", "My children"),
    "approvals_title": ("Yêu cầu chờ duyệt", "Approval requests"),
    "approvals_lead": (
        "Các lệnh gọi cần một người duyệt; yêu cầu đang chờ ở trên cùng.",
        "Calls that wait for a person; pending requests first.",
    ),
    "tool": ("Công cụ", "Tool"),
    "agent": ("Tác tử (agent)", "Agent"),
    "client": ("Ứng dụng (client)", "App (client)"),
    "on_behalf_of": ("Thay mặt", "On behalf of"),
    "user_source_token": ("gắn với token", "bound to the token"),
    "user_source_caller": ("do dịch vụ tin cậy xác nhận", "vouched for by a trusted service"),
    "user_source_asserted": ("agent tự khai, chưa xác minh", "named by the agent, unverified"),
    "user_source_none": ("không ai", "nobody"),
    "summary": ("Tóm tắt", "Summary"),
    "arguments_digest": ("Mã băm đối số (SHA-256)", "Arguments digest (SHA-256)"),
    "arguments": ("Đối số", "Arguments"),
    "resource": ("Đối tượng", "About"),
    "status": ("Trạng thái", "Status"),
    "deadline": ("Hạn quyết định", "Decide by"),
    "time_left": ("Còn lại", "Time left"),
    "policy": ("Chính sách", "Policy"),
    "approvers": ("Người được duyệt", "Who decides"),
    "token_issued_by": ("Token do ai cấp", "Token issued by"),
    "decided_by": ("Người quyết định", "Decided by"),
    "note": ("Ghi chú (lý do)", "Note (why)"),
    "approve": ("Duyệt", "Approve"),
    "reject": ("Từ chối", "Reject"),
    "details": ("Chi tiết", "Details"),
    "none_pending": ("Không có yêu cầu nào.", "No requests."),
    "status_pending": ("đang chờ", "pending"),
    "status_approved": ("đã duyệt", "approved"),
    "status_rejected": ("bị từ chối", "rejected"),
    "status_consumed": ("đã dùng", "used"),
    "status_expired": ("hết hạn", "expired"),
    "status_denied": ("bị từ chối vì quá hạn quyết định", "denied: not decided in time"),
    "decided": ("Đã ghi quyết định.", "The decision is recorded."),
    "audit_title": ("Tìm trong nhật ký kiểm toán", "Search the audit log"),
    "search": ("Tìm", "Search"),
    "user": ("Người dùng", "User"),
    "learner_ref": ("Mã học sinh (bí danh)", "Learner (pseudonym)"),
    "decision": ("Quyết định", "Decision"),
    "any": ("bất kỳ", "any"),
    "from": ("Từ", "From"),
    "to": ("Đến", "To"),
    "time": ("Thời điểm", "Time"),
    "outcome": ("Kết quả", "Outcome"),
    "next_page": ("Trang sau", "Next page"),
    "first_page": ("Trang đầu", "First page"),
    "export_csv": ("Xuất CSV", "Export CSV"),
    "no_entries": ("Không có mục nào.", "No entries."),
    "agents_title": ("Agent, token và quyền", "Agents, tokens and grants"),
    "tokens": ("Token", "Tokens"),
    "grants": ("Quyền", "Grants"),
    "oauth_clients": ("Ứng dụng OAuth", "OAuth clients"),
    "issue_token": ("Cấp token", "Issue a token"),
    "bind_user": ("Gắn với người dùng", "Bind to user"),
    "label": ("Nhãn", "Label"),
    "unbound": ("Không gắn người dùng", "Bound to no user"),
    "issued": ("Cấp lúc", "Issued"),
    "issued_by": ("Người cấp", "Issued by"),
    "revoked": ("Thu hồi lúc", "Revoked"),
    "revoked_by": ("Người thu hồi", "Revoked by"),
    "revoke": ("Thu hồi", "Revoke"),
    "token_once": (
        "Token mới (chỉ hiện một lần, hãy lưu ngay):",
        "The new token (shown once, keep it now):",
    ),
    "tool_pattern": ("Mẫu công cụ", "Tool pattern"),
    "resource_scope": ("Phạm vi tài nguyên", "Resource scope"),
    "environment_scope": ("Môi trường", "Environments"),
    "permission": ("Quyền hạn", "Permission"),
    "created_by": ("Người tạo", "Created by"),
    "add_grant": ("Thêm quyền", "Add a grant"),
    "delete": ("Xoá", "Delete"),
    "policies_title": ("Mục đích, chính sách và công tắc", "Purposes, policies and switches"),
    "kill_switch": ("Công tắc AI", "AI switch"),
    "kill_switch_on": (
        "AI đang bật: các prompt dùng mô hình.",
        "AI is on: prompts use the model.",
    ),
    "kill_switch_off": (
        "AI đang tắt: mọi prompt trả về phương án cố định.",
        "AI is off: every prompt returns its deterministic baseline.",
    ),
    "purposes": ("Bảng mục đích", "The purpose table"),
    "reason": ("Lý do", "Reason"),
    "slices": ("Dữ liệu", "Data"),
    "policies": ("Chính sách", "Policies"),
    "effect": ("Hiệu lực", "Effect"),
    "findings": ("Kết quả kiểm tra (nemo policies check)", "Check findings (nemo policies check)"),
    "no_findings": ("Không có quy tắc hỏng.", "No rule that can never match."),
    "evaluation_title": ("Báo cáo đánh giá gần nhất", "The latest evaluation report"),
    "no_report": ("Chưa có báo cáo (chạy make eval).", "No report yet (run make eval)."),
    "chart_alt": (
        "Biểu đồ: cách mỗi prompt được phục vụ",
        "Chart: how each prompt was served",
    ),
    "family_title": ("Con của tôi", "My children"),
    "family_lead": (
        "Những gì AI đã đọc và làm về con bạn, và những gì bạn đã cho phép.",
        "What AI read and did about your children, and what you have allowed.",
    ),
    "grade": ("Lớp", "Grade"),
    "relation": ("Quan hệ", "Relation"),
    "relation_self": ("chính bạn", "yourself"),
    "relation_family_member": ("gia đình", "family"),
    "relation_guardian": ("người giám hộ", "guardian"),
    "relation_mentor": ("người hướng dẫn", "mentor"),
    "no_children": ("Không có học sinh nào liên kết với bạn.", "No learner is linked to you."),
    "open": ("Xem", "Open"),
    "activity": ("AI đã đọc hoặc làm gì", "What AI read or did"),
    "what_ai_saw": ("AI đã thấy gì", "What the AI saw"),
    "approvals_child": ("Yêu cầu duyệt về con", "Approvals about your child"),
    "rights": ("Yêu cầu về dữ liệu", "Data requests"),
    "request_export": ("Yêu cầu xuất dữ liệu", "Ask for an export"),
    "request_erasure": ("Yêu cầu xoá dữ liệu", "Ask for erasure"),
    "rights_export": ("xuất dữ liệu", "export"),
    "rights_erasure": ("xoá dữ liệu", "erasure"),
    "rights_restriction": ("hạn chế xử lý", "restriction"),
    "received": ("Nhận lúc", "Received"),
    "complete_by": ("Hoàn tất trước", "Complete by"),
    "authorizations": ("Những gì bạn đã cho phép", "What you have allowed"),
    "hosts": ("Ứng dụng đã hành động thay bạn", "Apps that acted for you"),
    "last_use": ("Lần dùng gần nhất", "Last used"),
    "snapshot_title": ("AI đã thấy gì", "What the AI saw"),
    "snapshot_lead": (
        "Đúng những gì đã được gửi cho AI, lưu lại lúc đó; mã băm bên dưới đã được kiểm tra.",
        "Exactly what was given to the AI, kept at the time; the digest below was checked.",
    ),
    "verified_digest": ("Mã băm đã kiểm tra (SHA-256)", "Verified digest (SHA-256)"),
    "built": ("Lập lúc", "Built"),
    "purpose": ("Mục đích", "Purpose"),
    "told": ("Văn bản AI nhận được", "The text the AI was given"),
    "data_given": ("Dữ liệu đã cung cấp", "The data given"),
    "refused_title": ("Không được phép", "Not allowed"),
    "error_title": ("Không thực hiện được", "This could not be done"),
    "back": ("Quay lại", "Back"),
    "csrf_refused": (
        "Biểu mẫu đã hết hạn hoặc không đến từ trang này; hãy tải lại trang và thử lại.",
        "The form expired or did not come from this console; reload the page and try again.",
    ),
    "not_found": ("Không tìm thấy trang.", "Page not found."),
}


def phrase(key: str, locale: str) -> str:
    """The phrase in ``locale``; the key itself for a phrase the table lacks."""
    words = PHRASES.get(key)
    if words is None:
        return key
    return words[1] if locale == "en" else words[0]


def choose(cookie: str | None, accept_language: str | None) -> str:
    """The person's language: their choice, else the browser's, else Vietnamese."""
    if cookie in LOCALES:
        return cookie
    for part in (accept_language or "").split(","):
        tag = part.split(";")[0].strip().lower()
        if tag.startswith("en"):
            return "en"
        if tag.startswith("vi"):
            return "vi"
    return DEFAULT_LOCALE
