"""A connection string as a user gives it: checked before anything connects, and shown
only without its password.

libpq's own complaint about a malformed string quotes the string, or the token it could
not read, which can be the password (`invalid percent-encoded token: "Sekr%zzet"`). So a
malformed DSN is refused in a line of our own that names the part at fault, never its
text; and any text that may carry a DSN (an error a user sees or a file stores) is
scrubbed of passwords.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import psycopg

from harness.errors import HarnessError
from harness.server.connections import connect

_URL_SCHEMES = ("postgresql://", "postgres://")
_BAD_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})|%00")
_KEYWORD = re.compile(r"[a-z_]{1,40}")
_HIDDEN = "its text is not shown: it may hold a password"
_FORMS = "give a URL (postgresql://user@host:port/dbname) or keyword=value pairs"
# A password inside any text: a URL's user:password@, or libpq's password=value.
_URL_PASSWORD = re.compile(r"(postgres(?:ql)?://[^\s:@/?]*):[^\s@]*@")
_SECRET_KEYWORDS = ("password", "sslpassword", "oauth_client_secret")
_KEY_PASSWORD = re.compile(
    r"\s*\b(?:" + "|".join(_SECRET_KEYWORDS) + r")\s*=\s*(?:'(?:[^'\\]|\\.)*'?|\S*)"
)


def check_dsn(dsn: str, option: str = "--dsn") -> None:
    """HarnessError in one line if libpq cannot read `dsn`, naming the malformed part."""
    try:
        psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        raise HarnessError(f"{option}: {_malformed(dsn)}") from None


def _malformed(dsn: str) -> str:
    if dsn.startswith(_URL_SCHEMES):
        return _malformed_url(dsn.partition("://")[2])
    return _malformed_pairs(dsn)


def _malformed_url(rest: str) -> str:
    """Which part of postgresql://user:password@host:port/dbname?keyword=value is wrong."""
    main, _, query = rest.partition("?")
    authority, _, dbname = main.partition("/")
    userinfo, _, hosts = authority.rpartition("@")
    user, _, password = userinfo.partition(":")
    for part, text in (("user name", user), ("password", password), ("database name", dbname)):
        if _BAD_PERCENT.search(text):
            return _percent(f"the URL's {part}")
    found = _malformed_hosts(hosts) or _malformed_query(query)
    return found or f"the URL is malformed ({_HIDDEN})"


def _percent(part: str) -> str:
    return f"{part} is not valid percent-encoding (% takes two hex digits; % itself is %25)"


def _malformed_hosts(hosts: str) -> str | None:
    if _BAD_PERCENT.search(hosts):
        return _percent("the URL's host or port")
    for host in hosts.split(","):
        if host.startswith("[") and "]" not in host:
            return "the URL's host: an IPv6 address in [ ] is not closed"
        if host.startswith("[") and not re.fullmatch(r"\[[^\]]*\](:[^:]*)?", host):
            return "the URL's host: after an IPv6 address in [ ] only :port may follow"
    return None


def _malformed_query(query: str) -> str | None:
    for parameter in query.split("&") if query else []:
        keyword, equals, value = parameter.partition("=")
        named = f"'{keyword}'" if _KEYWORD.fullmatch(keyword) else "a query parameter"
        if not equals:
            return f"the URL's query parameter {named} has no =value"
        if "=" in value:
            return f"the URL's query parameter {named} has a second ="
        if keyword not in _libpq_keywords():
            return f"the URL's query parameter {named} is not a libpq keyword"
        if _BAD_PERCENT.search(value):
            return _percent(f"the value of the URL's query parameter {named}")
    return None


def _malformed_pairs(dsn: str) -> str:
    """libpq's other form: keyword=value pairs, a value with spaces in single quotes."""
    pairs = re.findall(r"\s*([^=\s]*)\s*(=?)\s*('(?:[^'\\]|\\.)*'?|\S*)", dsn.strip())
    for index, (keyword, equals, value) in enumerate(pairs):
        if not (keyword or equals or value):
            continue
        if not equals or not keyword:
            if index == 0:
                return f"not a connection string: {_FORMS}"
            return (
                f"a keyword=value pair has no keyword or no = ({_FORMS}; a value with "
                "spaces goes in single quotes)"
            )
        if value.startswith("'") and (len(value) == 1 or not value.endswith("'")):
            return f"the value of '{keyword}' opens a quote that is not closed; {_HIDDEN}"
        if keyword not in _libpq_keywords():
            named = f"'{keyword}'" if _KEYWORD.fullmatch(keyword) else "a keyword"
            return f"{named} is not a libpq keyword"
    return f"not a connection string: {_FORMS} ({_HIDDEN})"


@cache
def _libpq_keywords() -> frozenset[str]:
    return frozenset(option.keyword.decode() for option in psycopg.pq.Conninfo.get_defaults())


def redact(dsn: str) -> str:
    """The DSN without its password, for logs and results."""
    if not dsn:
        return "(from PG* variables)"
    params = psycopg.conninfo.conninfo_to_dict(dsn)
    for keyword in _SECRET_KEYWORDS:
        params.pop(keyword, None)
    return psycopg.conninfo.make_conninfo(**{k: str(v) for k, v in params.items()})


def password_for(dsn: str) -> str | None:
    """The password libpq sends for `dsn`, for a client that reads no password file
    (node-postgres): the DSN's own, PGPASSWORD, or its password file's line (passfile=,
    PGPASSFILE, ~/.pgpass), which libpq itself looks up on a connection made for that."""
    params = psycopg.conninfo.conninfo_to_dict(dsn)
    if params.get("password"):
        return str(params["password"])
    if os.environ.get("PGPASSWORD"):
        return os.environ["PGPASSWORD"]
    if not _password_file(params):
        return None
    with connect(dsn, connect_timeout=10) as conn:
        return conn.info.password


def _password_file(params: Mapping[str, Any]) -> bool:
    named = params.get("passfile") or os.environ.get("PGPASSFILE")
    return Path(str(named)).is_file() if named else (Path.home() / ".pgpass").is_file()


def scrub(text: str) -> str:
    """`text` (an error's, which may quote a DSN) without any password it holds."""
    return _KEY_PASSWORD.sub("", _URL_PASSWORD.sub(r"\1@", text))
