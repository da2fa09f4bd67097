# syntax=docker/dockerfile:1
# The extauthz service image: a static binary on an empty base, run as a
# non-root user.
#
#   docker build -t extauthz --build-arg VERSION=$(git describe --tags --always) .
#   docker run -e JWT_SECRET=... -p 9191:9191 -p 9090:9090 extauthz
#
# The default command runs the built-in configuration, which needs
# JWT_SECRET (at least 32 random bytes): without it, or a configuration
# file, the service refuses to start, since its development secret is
# public and may only serve loopback.
#
# Listeners bind all interfaces in the container: gRPC ext_authz on 9191,
# ops (/healthz, /readyz, /metrics; read-only) on 9090; add --http-addr
# 0.0.0.0:9193 for the HTTP forward-auth front end (nginx, Traefik, Caddy).
# The admin API stays on the container's loopback (127.0.0.1:9092; use
# `docker exec CONTAINER /extauthz admin stats`) unless given
# --admin-token-file or mTLS (docs/admin.md). Pass a
# configuration with
#   -v ./config.yaml:/etc/extauthz/config.yaml:ro ... serve --config /etc/extauthz/config.yaml ...

FROM golang:1.26 AS build
WORKDIR /src
# Modules first, so that a source change does not download them again.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG VERSION=devel
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -buildvcs=false \
      -ldflags "-s -w -X github.com/extauthz/extauthz/internal/app.Version=${VERSION}" \
      -o /out/extauthz ./cmd/extauthz

# No shell, no package manager: the binary and the CA roots it needs to
# fetch signing keys and exchange tokens over TLS.
FROM scratch
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/extauthz /extauthz
USER 65532:65532
EXPOSE 9191 9090 9193
ENTRYPOINT ["/extauthz"]
CMD ["serve","--grpc-addr","0.0.0.0:9191","--ops-addr","0.0.0.0:9090"]
