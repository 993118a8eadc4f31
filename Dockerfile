# One image for every cronbox process: migrate, poller, relay, demo-worker.
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /app
COPY pyproject.toml README.md ./
COPY cronbox ./cronbox
COPY poller ./poller
COPY relay ./relay
COPY sql ./sql
RUN pip install . && useradd --system --no-create-home cronbox
USER cronbox
ENTRYPOINT ["cronbox"]
CMD ["--help"]
