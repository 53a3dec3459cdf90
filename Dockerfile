# citation-drift-exporter: `citation-exporter run` by default; any subcommand works
# (docker run IMAGE sweep --help). Two stages: dependencies are built in the first, and only
# the virtual environment with the runtime dependencies reaches the second.
ARG PYTHON_VERSION=3.11

FROM python:${PYTHON_VERSION}-slim AS build
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY exporter ./exporter
RUN python -m venv /opt/venv \
    && /opt/venv/bin/pip install --no-cache-dir --upgrade pip \
    && /opt/venv/bin/pip install --no-cache-dir .

FROM python:${PYTHON_VERSION}-slim AS runtime
# version: the package's (pyproject.toml); tests/test_packaging.py holds the two together
LABEL org.opencontainers.image.title="citation-drift-exporter" \
      org.opencontainers.image.description="Prometheus exporter that checks RAG citations against the live document store" \
      org.opencontainers.image.version="0.1.0" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/citation-drift-exporter/citation-drift-exporter" \
      org.opencontainers.image.url="https://github.com/citation-drift-exporter/citation-drift-exporter" \
      org.opencontainers.image.documentation="https://github.com/citation-drift-exporter/citation-drift-exporter/blob/main/docs/index.md" \
      org.opencontainers.image.vendor="citation-drift-exporter"
RUN groupadd --system --gid 10001 exporter \
    && useradd --system --uid 10001 --gid exporter --no-create-home --shell /usr/sbin/nologin exporter
COPY --from=build /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    CITATION_EXPORTER_METRICS_HOST=0.0.0.0 \
    CITATION_EXPORTER_METRICS_PORT=9877
USER 10001:10001
EXPOSE 9877
# the port the exporter really serves on, also when CITATION_EXPORTER_METRICS_PORT moves it
HEALTHCHECK --interval=30s --timeout=3s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('CITATION_EXPORTER_METRICS_PORT', '9877'), timeout=2)"]
ENTRYPOINT ["citation-exporter"]
CMD ["run"]
