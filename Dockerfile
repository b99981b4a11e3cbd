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

FROM python:3.11-slim AS build
ARG GPUGOV_PIP_SPEC=.
ARG GPUGOV_EXTRAS=cluster,notify,agent
COPY . /src
RUN set -eu; \
    case "$GPUGOV_PIP_SPEC" in \
      .) spec="/src[$GPUGOV_EXTRAS]" ;; \
      gpugov*) spec="gpugov[$GPUGOV_EXTRAS]${GPUGOV_PIP_SPEC#gpugov}" ;; \
      *) echo "GPUGOV_PIP_SPEC must be ., gpugov==VERSION or 'gpugov @ git+URL@TAG'" >&2; exit 1 ;; \
    esac; \
    case "$spec" in *git+*) \
      apt-get update -qq && apt-get install -y -qq --no-install-recommends git > /dev/null ;; \
    esac; \
    python -m venv /opt/gpugov; \
    /opt/gpugov/bin/pip install --no-cache-dir "$spec"; \
    mkdir /config; \
    for folder in tenants policies hardware; do cp -r "/src/$folder" /config/; done

FROM python:3.11-slim
COPY --from=build /opt/gpugov /opt/gpugov
COPY --from=build /config /config
ENV PATH=/opt/gpugov/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1
# The CronJob's and DaemonSet's securityContext (runAsNonRoot, runAsUser 65532, read-only root).
USER 65532:65532
WORKDIR /config
ENTRYPOINT ["gpugov"]
