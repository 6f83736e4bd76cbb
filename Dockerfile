# The brisk image for Kubernetes (and any container runtime): the one
# binary on a small Debian. The same image runs the scheduler, the workers
# and the operator (`brisk scheduler`, `brisk worker`, `brisk operator`).
#
#   docker build -t registry.example/brisk:0.1 .
#   brisk k8s operator --image registry.example/brisk:0.1 | kubectl apply -f -
#
# Build stage: the workspace, release profile, the lock file as committed.
FROM rust:1.91-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p brisk \
    && strip target/release/brisk

# Run stage: glibc and CA certificates (the operator talks TLS to the API
# server), nothing else. brisk runs as an unprivileged user.
FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --create-home --uid 1000 brisk
COPY --from=build /src/target/release/brisk /usr/local/bin/brisk
USER brisk
WORKDIR /home/brisk
# 8786: workers and clients; 8787: HTTP (health, dashboard API, scaling API).
EXPOSE 8786 8787
ENTRYPOINT ["brisk"]
CMD ["--help"]
