# zarrd: build with the locked dependencies, run as a non-root user in a small image.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock openapi.yaml ./
COPY build.rs ./
COPY vendor ./vendor
COPY src ./src
COPY benches ./benches
RUN cargo build --release --locked --bin zarrd

FROM debian:bookworm-slim
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates curl \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --no-create-home --shell /usr/sbin/nologin zarrd
COPY --from=build /src/target/release/zarrd /usr/local/bin/zarrd
USER 10001
ENV ZARRD_LISTEN=0.0.0.0:8000 \
    ZARRD_LOG_FORMAT=json
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=3s --start-period=5s CMD ["curl", "-fsS", "http://127.0.0.1:8000/healthz"]
ENTRYPOINT ["zarrd"]
CMD ["serve", "/data"]
