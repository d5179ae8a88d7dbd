# syntax=docker/dockerfile:1.7
# Image of the connection pooler: PgBouncer from Debian's package, the same release the test
# suite runs the stack through (tests/pooled, `make system-packages`). Build from the root:
#   docker build -f deploy/docker/pgbouncer.Dockerfile -t nemo-pgbouncer:TAG .
# Its configuration is mounted (deploy/k8s/components/pgbouncer): the image holds none.
FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends pgbouncer=1.18.0-1+deb12u1 \
    && rm -rf /var/lib/apt/lists/* /etc/pgbouncer/* \
    && groupadd --system --gid 10001 nemo \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin nemo
USER 10001:10001
EXPOSE 6432
# SIGINT is PgBouncer's safe shutdown: it stops taking clients and exits once every
# transaction in flight has finished (SIGTERM would cut them off).
STOPSIGNAL SIGINT
ENTRYPOINT ["/usr/sbin/pgbouncer"]
CMD ["/etc/pgbouncer/pgbouncer.ini"]
