# The image a Cluster's `operations.image` names (policies/clusters.yaml): gpugov with the extras
# the in-cluster commands import, and this repository's declarations at /config.
#   - the drift CronJob runs `gpugov drift /config --cluster ... --agent-url ...`: the cluster
#     and notify extras (kubernetes, requests);
#   - the agent DaemonSet runs `gpugov agent --listen 0.0.0.0:9402`: the agent extra
#     (nvidia-ml-py, prometheus-client). NVML itself is the driver's, mounted by the NVIDIA
#     container runtime (the DaemonSet's runtimeClassName: nvidia).
#
#   docker build -t registry.example.com/platform/gpugov-config:main .
#
# gpugov's own repository installs its source tree (GPUGOV_PIP_SPEC=.). A config repository
# (declarations only) copies this file and .dockerignore, and pins a release, without extras:
#   docker build --build-arg GPUGOV_PIP_SPEC="gpugov==0.1.0" -t ... .
#   docker build --build-arg GPUGOV_PIP_SPEC="gpugov @ git+https://github.com/ORG/gpugov@v0.1.0" -t ... .
# Build and push it on every merge: the CronJob checks the cluster against the /config it holds.
#
# Behind a firewall (README, "Installing without internet"), every source is a build argument:
#   BASE_IMAGE          the Python 3.11+ image both stages start from, e.g. a mirror's copy:
#                       --build-arg BASE_IMAGE=harbor.example.cn/library/python:3.11-slim
#   GPUGOV_INDEX_URL    a PyPI mirror pip installs from (--index-url), e.g.
#                       --build-arg GPUGOV_INDEX_URL=https://mirrors.example.cn/pypi/simple
#   GPUGOV_TRUSTED_HOST that mirror's host when it serves plain HTTP or a private CA (--trusted-host)
#   GPUGOV_WHEELHOUSE   a folder of the build context made by `make wheelhouse`: pip then installs
#                       from it alone (--no-index), no index at all; GPUGOV_PIP_SPEC=. installs the
#                       gpugov wheel in it (build the wheelhouse with the base image's Python and CPU).
#   docker build --build-arg BASE_IMAGE=... --build-arg GPUGOV_WHEELHOUSE=wheelhouse -t ... .

ARG BASE_IMAGE=python:3.11-slim

FROM ${BASE_IMAGE} AS build
ARG GPUGOV_PIP_SPEC=.
ARG GPUGOV_EXTRAS=cluster,notify,agent
ARG GPUGOV_INDEX_URL=
ARG GPUGOV_TRUSTED_HOST=
ARG GPUGOV_WHEELHOUSE=
COPY . /src
RUN set -eu; \
    case "$GPUGOV_PIP_SPEC" in \
      .) spec="/src[$GPUGOV_EXTRAS]" ;; \
      gpugov*) spec="gpugov[$GPUGOV_EXTRAS]${GPUGOV_PIP_SPEC#gpugov}" ;; \
      *) echo "GPUGOV_PIP_SPEC must be ., gpugov==VERSION or 'gpugov @ git+URL@TAG'" >&2; exit 1 ;; \
    esac; \
    set --; \
    if [ -n "$GPUGOV_WHEELHOUSE" ]; then \
      [ -d "/src/$GPUGOV_WHEELHOUSE" ] || { echo "GPUGOV_WHEELHOUSE: no folder $GPUGOV_WHEELHOUSE in the build context" >&2; exit 1; }; \
      set -- --no-index --find-links "/src/$GPUGOV_WHEELHOUSE"; \
      case "$spec" in /src*) spec="gpugov[$GPUGOV_EXTRAS]" ;; esac; \
    fi; \
    if [ -n "$GPUGOV_INDEX_URL" ]; then set -- "$@" --index-url "$GPUGOV_INDEX_URL"; fi; \
    if [ -n "$GPUGOV_TRUSTED_HOST" ]; then set -- "$@" --trusted-host "$GPUGOV_TRUSTED_HOST"; fi; \
    case "$spec" in *git+*) \
      apt-get update -qq && apt-get install -y -qq --no-install-recommends git > /dev/null ;; \
    esac; \
    python -m venv /opt/gpugov; \
    /opt/gpugov/bin/pip install --no-cache-dir "$@" "$spec"; \
    mkdir /config; \
    for folder in tenants policies hardware; do cp -r "/src/$folder" /config/; done

FROM ${BASE_IMAGE}
COPY --from=build /opt/gpugov /opt/gpugov
COPY --from=build /config /config
ENV PATH=/opt/gpugov/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1
# The CronJob's and DaemonSet's securityContext (runAsNonRoot, runAsUser 65532, read-only root).
USER 65532:65532
WORKDIR /config
ENTRYPOINT ["gpugov"]
