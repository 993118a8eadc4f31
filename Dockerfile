# One image for every cronbox process: migrate, poller, relay, web, worker, demo-worker.
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /app
COPY pyproject.toml README.md ./
COPY cronbox ./cronbox
COPY poller ./poller
COPY relay ./relay
COPY web ./web
COPY sql ./sql
RUN pip install . && useradd --system --uid 10001 --no-create-home cronbox
# numeric, so Kubernetes can check runAsNonRoot
USER 10001
ENTRYPOINT ["cronbox"]
CMD ["--help"]
