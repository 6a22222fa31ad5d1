# gpuproof: the analyzer CLI (and, as they land, the App's serve/worker processes).
FROM python:3.11-slim
WORKDIR /srv/gpuproof
COPY pyproject.toml README.md ./
COPY app ./app
RUN pip install --no-cache-dir . && useradd --system gpuproof
USER gpuproof
ENV GPUPROOF_CACHE_DIR=/tmp/gpuproof-cache
ENTRYPOINT ["gpuproof"]
CMD ["--help"]
