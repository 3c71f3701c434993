"""An evidence package opened in a real browser (Debian's chromium, driven by selenium through Debian's
chromedriver; .ci/setup installs both): every page loads without a console error, and every link and resource of
every page resolves to a file inside the package (with its ``#anchor`` where it names one)."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
# links out of the package that the tools' own reports carry: gcovr's attribution in its footer
ALLOWED_EXTERNAL = re.compile(r"^https?://gcovr\.com/")
# Chromium's flags on a machine without network (no background connections, no first-run set-up)
FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--window-size=1400,1000", "--allow-file-access-from-files")

needs_browser = pytest.mark.skipif(not (Path(CHROMIUM).is_file() and Path(CHROMEDRIVER).is_file()),
                                   reason="chromium or chromium-driver not installed; run .ci/setup")


def open_browser(profile: Path):
    from selenium import webdriver

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=CHROMEDRIVER))


def check_package(root: Path, screenshots: dict[str, str] | None = None) -> dict[str, list[str]]:
    """Open every HTML page of the package at ``root``; return the problems found per page (empty when none):
    console errors, links or resources outside the package or to missing files or anchors, external links other
    than the allowed ones. ``screenshots`` (page -> PNG path) are taken on the way."""
    root = root.resolve()
    problems: dict[str, list[str]] = {}
    profile = Path(tempfile.mkdtemp(prefix="assay-chromium-"))
    driver = open_browser(profile)
    try:
        for page in sorted(root.rglob("*.html")):
            found = []
            driver.get(page.as_uri())
            urls = driver.execute_script(
                "return Array.from(document.querySelectorAll('a[href],link[href],script[src],img[src]'))"
                ".map(e => e.href || e.src)")
            for url in urls:
                found += _check_url(url, root)
            found += [f"console {entry['level']}: {entry['message']}" for entry in driver.get_log("browser")
                      if entry["level"] in ("SEVERE", "WARNING")]
            relative = page.relative_to(root).as_posix()
            if screenshots and relative in screenshots:
                driver.save_screenshot(screenshots[relative])
            if found:
                problems[relative] = found
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
    return problems


def _check_url(url: str, root: Path) -> list[str]:
    parsed = urlparse(url)
    if parsed.scheme in ("http", "https"):
        return [] if ALLOWED_EXTERNAL.match(url) else [f"external link {url}"]
    if parsed.scheme == "data" or url.startswith("javascript:"):
        return []
    if parsed.scheme != "file":
        return [f"link of scheme {parsed.scheme}: {url}"]
    target = Path(unquote(parsed.path))
    if not target.is_relative_to(root):
        return [f"link outside the package: {url}"]
    if not target.is_file():
        return [f"link to a missing file: {target.relative_to(root)}"]
    if parsed.fragment and target.suffix == ".html":
        text = target.read_text(errors="replace")
        if f'id="{parsed.fragment}"' not in text and f'name="{parsed.fragment}"' not in text:
            return [f"link to a missing anchor: {target.relative_to(root)}#{parsed.fragment}"]
    return []


def screenshot_dir() -> Path | None:
    """Where to keep the screenshots (``ASSAY_SCREENSHOTS``, e.g. docs/images/evidence), or None."""
    folder = os.environ.get("ASSAY_SCREENSHOTS")
    return Path(folder) if folder else None
