# The image of the web server and the workers: docker compose up (see compose.yaml, docs/deploy.md).
# TORCH selects the build: the default is the CPU wheel; the GPU worker is built with
#   --build-arg EXTRAS=gpu,ray --build-arg TORCH_INDEX=https://download.pytorch.org/whl/cu128
FROM python:3.11-slim

ARG EXTRAS=cpu,models
ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 ROLLOUTLAB_CACHE=/data/cache STORAGE_ROOT=/data/storage

RUN apt-get update && apt-get install -y --no-install-recommends git && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY pyproject.toml README.md manage.py ./
COPY workers workers
COPY platform platform
COPY templates templates
COPY static static
COPY examples examples
RUN pip install --extra-index-url "$TORCH_INDEX" -e ".[$EXTRAS]"
# the static files under hashed names with gzip and brotli copies, which WhiteNoise serves (var/static)
RUN python manage.py collectstatic --noinput -v0

RUN useradd --create-home rolloutlab && mkdir -p /data && chown rolloutlab /data
USER rolloutlab
EXPOSE 8000
CMD ["daphne", "-b", "0.0.0.0", "-p", "8000", "rolloutlab.asgi:application"]
