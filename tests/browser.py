"""Debian's Chromium for the tests that look at pages (report.html's first screen, the
results site): where it is, and the flags it needs on a machine with no network."""

from __future__ import annotations

import shutil

CHROMIUM = next(
    filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None
)
NO_CHROMIUM = "no Chromium: apt-get install chromium (Debian) to take it"
# Without the background ones it tries to reach its services and logs each refused
# connection. No --headless: the caller adds it (playwright does, with headless=True).
FLAGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
