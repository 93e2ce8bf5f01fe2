# The harness as an image: `harness worker` members of a fleet (docs/fleets.md), or a
# whole run against a server of your own (--dsn or PG*). `docker run IMAGE harness --version`.
#
# BASE is any image with Python 3.11 or newer and pip. INSTALL is what pip installs: the
# source by default (from PyPI's packages); where no registry is reachable, CI builds the
# base from Debian's packages and installs from a wheelhouse it filled beside
# (.ci/harness-image.sh).
ARG BASE=python:3.11-slim
FROM ${BASE}
ARG INSTALL=/src

COPY . /src
# --break-system-packages: Debian's own Python guards its site-packages (PEP 668); in an
# image of its own the harness is the system.
RUN python3 -m pip install --no-cache-dir --break-system-packages ${INSTALL} && rm -rf /src

# initdb and postgres refuse root; the embedded provider then runs them as `nobody`.
WORKDIR /work
CMD ["harness", "--help"]
