"""The console in a real browser: Debian's Chromium driven by Playwright against the whole stack
(the three services, the local authorization server and the console as processes, the console
published under a sub-path), one browser for the session.

Every page a test visits is screenshotted into :data:`SCREENSHOTS` (``.nemo/console-screenshots``,
or ``NEMO_CONSOLE_SCREENSHOTS``) and checked with axe-core, the accessibility engine, pinned from
the npm registry in ``tests/console/node`` and injected into the page.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Browser, BrowserContext, Page, async_playwright

from nemo_core.db import connect
from nemo_devtools import node
from nemo_toolplane.operators import add_operator
from tests.stack import Stack, start_stack

REPOSITORY = Path(__file__).resolve().parents[2]
#: Where the screenshots of every page are kept, as test artifacts.
SCREENSHOTS = Path(
    os.environ.get("NEMO_CONSOLE_SCREENSHOTS", REPOSITORY / ".nemo" / "console-screenshots")
)
CHROMIUM = Path("/usr/bin/chromium")
#: Chromium on a closed network: no background connections it would try at every start.
CHROMIUM_ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
#: The path the console is published under in these tests, as behind an Ingress.
CONSOLE_PATH = "/console"
#: The operator every browser test signs in as (through the seeded administrator's account).
OPERATOR = ("console-ops", "U-2041-A1")
#: Impacts of an accessibility violation that fail a page.
BLOCKING_IMPACTS = frozenset({"serious", "critical"})


@pytest.fixture(scope="package")
async def console_stack(
    owner_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Stack]:
    conn = await connect(owner_dsn)
    try:
        await add_operator(conn, OPERATOR[0], name="console operator (tests)", user_id=OPERATOR[1])
    finally:
        await conn.close()
    stack = await start_stack(
        owner_dsn,
        tmp_path_factory.mktemp("console-stack"),
        oauth=True,
        console=True,
        console_path=CONSOLE_PATH,
        extra_env={"toolplane": {"NEMO_TOOLPLANE_TOOL_CALL_LIMITS": "[]"}},
    )
    try:
        yield stack
    finally:
        await stack.stop()


@pytest.fixture(scope="session")
def axe_script() -> Path:
    """axe-core's browser bundle, installed from the pinned lock."""
    tools = node.install(REPOSITORY / "tests" / "console" / "node")
    return tools.package("axe-core") / "axe.min.js"


@pytest.fixture(scope="session")
def chromium() -> Path:
    """Debian's Chromium, and an empty screenshots directory for this run."""
    if not CHROMIUM.exists():
        raise RuntimeError(
            f"{CHROMIUM} is missing: `make test` installs Debian's chromium package "
            "(apt-get install chromium)"
        )
    shutil.rmtree(SCREENSHOTS, ignore_errors=True)
    SCREENSHOTS.mkdir(parents=True)
    return CHROMIUM


@pytest.fixture(scope="session")
async def browser(chromium: Path) -> AsyncIterator[Browser]:
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(
            executable_path=str(chromium), args=list(CHROMIUM_ARGS)
        )
        yield launched
        await launched.close()


@dataclass
class Visitor:
    """One person's browser context: their cookies, and the pages they saw."""

    context: BrowserContext
    page: Page
    stack: Stack
    axe: Path
    seen: list[str] = field(default_factory=list)

    @property
    def console(self) -> str:
        return self.stack.console_url

    async def sign_in(self, user: str) -> None:
        """Sign in at the authorization server's pages as ``user``, back to the console."""
        await self.page.goto(f"{self.console}/")
        await self.page.get_by_role("link", name="Sign in").click()
        await self.page.select_option("select[name=user]", user)
        await self.page.fill(
            "input[name=password]", self.stack.oauth.password if self.stack.oauth else ""
        )
        await self.page.get_by_role("button", name="Sign in").click()
        await self.page.wait_for_load_state()
        if "/interaction/" in self.page.url:
            await self.page.get_by_role("button", name="Allow").click()
        await self.page.wait_for_url(f"{self.console}/**")

    async def visit(self, path: str) -> int:
        response = await self.page.goto(f"{self.console}{path}")
        assert response is not None
        return response.status

    async def check(self, name: str) -> None:
        """Screenshot the page, check its accessibility and that every URL it emits is under
        the console's path."""
        self.seen.append(name)
        await self.page.screenshot(path=SCREENSHOTS / f"{name}.png", full_page=True)
        urls = await self.page.eval_on_selector_all(
            "a[href], form[action], link[href], script[src], img[src]",
            "els => els.map(e => e.getAttribute('href') || e.getAttribute('action')"
            " || e.getAttribute('src'))",
        )
        # A link within the page (the skip link) stays on it.
        outside = [u for u in urls if not u.startswith((f"{CONSOLE_PATH}/", "#"))]
        assert not outside, f"{name}: URLs outside {CONSOLE_PATH}: {outside}"
        await self.page.add_script_tag(path=str(self.axe))
        result: dict[str, Any] = await self.page.evaluate(
            "async () => await axe.run(document, {resultTypes: ['violations']})"
        )
        blocking = [
            {"id": v["id"], "impact": v["impact"], "nodes": [n["target"] for n in v["nodes"]]}
            for v in result["violations"]
            if v["impact"] in BLOCKING_IMPACTS
        ]
        assert not blocking, f"{name}: {json.dumps(blocking)}"


@pytest.fixture
async def visitor(
    browser: Browser, console_stack: Stack, axe_script: Path
) -> AsyncIterator[Visitor]:
    """A fresh browser context (no cookies), closed after the test. CSP is bypassed only so that
    axe can be injected; the policy itself is checked on the responses."""
    context = await browser.new_context(bypass_csp=True, locale="en-US")
    page = await context.new_page()
    yield Visitor(context, page, console_stack, axe_script)
    await context.close()
