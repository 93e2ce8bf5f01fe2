# The harness as an image: `harness worker` members of a fleet (docs/fleets.md), or a
# whole run against a server of your own (--dsn or PG*). `docker run IMAGE harness --version`.
#
# BASE is any image with Python 3.11 or newer and pip; where no registry is reachable, CI
# builds one from Debian's packages (.ci/python-image.sh) and passes it here.
ARG BASE=python:3.11-slim
FROM ${BASE}

WORKDIR /src
COPY pyproject.toml README.md hatch_build.py ./
COPY harness ./harness
COPY scenarios ./scenarios
COPY baselines ./baselines
# --break-system-packages: Debian's own Python guards its site-packages (PEP 668); in an
# image of its own the harness is the system.
RUN python3 -m pip install --no-cache-dir --break-system-packages . && rm -rf /src

# initdb and postgres refuse root; the embedded provider then runs them as `nobody`.
WORKDIR /work
CMD ["harness", "--help"]
