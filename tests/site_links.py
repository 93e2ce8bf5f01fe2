"""Every link a built site's pages make to a file of the site (href and src, in the
HTML as written), for the tests of `harness site`: each must name a file in the site."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found += [value for name, value in attrs if name in ("href", "src") and value]


def internal(link: str) -> bool:
    """A link to a file of the site: no scheme, no host, not a fragment of the page."""
    parts = urlsplit(link)
    return not parts.scheme and not parts.netloc and bool(parts.path)


def target(page: Path, link: str) -> Path:
    return (page.parent / unquote(urlsplit(link).path)).resolve()


def broken_links(site: Path) -> list[str]:
    """`page: link` for each internal link of each page that names no file of the site."""
    root, broken = site.resolve(), []
    for page in sorted(site.rglob("*.html")):
        parser = _Links()
        parser.feed(page.read_text(encoding="utf-8"))
        for link in filter(internal, parser.found):
            found = target(page, link)
            if not (found.is_file() and found.is_relative_to(root)):
                broken.append(f"{page.relative_to(site)}: {link}")
    return broken


def internal_links(site: Path) -> int:
    """How many internal links the pages make in all (a test that checks none checks
    nothing)."""
    count = 0
    for page in site.rglob("*.html"):
        parser = _Links()
        parser.feed(page.read_text(encoding="utf-8"))
        count += sum(map(internal, parser.found))
    return count
