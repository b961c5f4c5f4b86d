# Raftwood broker image.  `docker run IMAGE` runs `raftwood start` (one broker with the
# default settings); any other `raftwood` sub-command works as the container command,
# e.g. `docker compose run --rm broker1 topics list --bootstrap-server broker1:9092`.
# docker-compose.yml builds this image for its 3-broker cluster.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /opt/raftwood
# Only what the package needs: the build context may hold .venv/ and data/.
COPY pyproject.toml README.md ./
COPY protocol ./protocol
COPY storage ./storage
COPY broker ./broker
RUN pip install . && mkdir -p /var/lib/raftwood

# Defaults for a lone container; compose (or `--set`) overrides them per broker.
ENV RAFTWOOD_LISTENERS=PLAINTEXT://0.0.0.0:9092 \
    RAFTWOOD_LOG_DIRS=/var/lib/raftwood
VOLUME ["/var/lib/raftwood"]
# 9092: Kafka protocol; 9093: Raft (controller.quorum.voters) in docker-compose.yml.
EXPOSE 9092 9093
STOPSIGNAL SIGTERM

ENTRYPOINT ["raftwood"]
CMD ["start"]
