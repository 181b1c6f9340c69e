# agentpen/workbench: the episode server (workspace role: `workbench serve`) and the grader
# (server role: `workbench grader`), one static Go binary on a Debian + python3 base.
#
# Nothing here needs the network: the binary is built outside (make build, CGO_ENABLED=0) and
# copied in, and the base is a build argument. With a registry, the defaults work as they are:
#   docker build -t agentpen/workbench:dev .
# Without one (CI, these machines), make images builds a local base with debootstrap and
# docker import, and passes it, never pulling:
#   docker build --build-arg PYTHON_BASE=agentpen/python-base:bookworm \
#                --build-arg SANDBOX_PYTHON=/usr/bin/python3 -t agentpen/workbench:dev .
ARG PYTHON_BASE=python:3.11-slim-bookworm
FROM ${PYTHON_BASE}

# The interpreter episode code runs under; it must be readable by the sandbox uids.
ARG SANDBOX_PYTHON=/usr/local/bin/python3
ENV WORKBENCH_SANDBOX_PYTHON=${SANDBOX_PYTHON} \
    LANG=C.UTF-8 \
    PYTHONDONTWRITEBYTECODE=1

COPY bin/workbench /usr/local/bin/workbench
# Root-only: episode code runs as sandbox uids and must not read the binary, which carries the task
# generator (in a campaign the answer keys live only with the grader).
RUN chmod 0700 /usr/local/bin/workbench

# io.agentpen.workbench names the workbench version the image carries (make images passes it):
# agentpen images and GET /v1/images list the images that carry one.
ARG WORKBENCH_VERSION=dev
LABEL io.agentpen.image="workbench" \
      io.agentpen.workbench="${WORKBENCH_VERSION}"
ENTRYPOINT ["/usr/local/bin/workbench"]
CMD ["serve", "--listen", "unix:///run/workbench/wb.sock"]
