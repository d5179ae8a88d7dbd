"""Sign-in: the PKCE challenge as RFC 7636 computes it, and a "next" path that never leaves the
console."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from nemo_console.signin import challenge, safe_next


def test_the_challenge_is_rfc_7636s() -> None:
    # The example of RFC 7636, appendix B.
    assert challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk") == (
        "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
    )


@given(
    root=st.sampled_from(["", "/console", "/a/b"]),
    target=st.one_of(
        st.none(),
        st.text(),
        st.sampled_from(["//evil.example/", "https://evil.example/", "/\\evil", "/console//x"]),
        st.builds(lambda s: "/console/" + s, st.text()),
    ),
)
def test_next_is_always_a_path_of_the_console(root: str, target: str | None) -> None:
    result = safe_next(target, root)
    assert result.startswith(f"{root}/")
    assert not result.startswith("//")
    assert "\\" not in result
    assert result == target or result == f"{root}/"
