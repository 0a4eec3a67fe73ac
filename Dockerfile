# syntax=docker/dockerfile:1

# ---- build ----
FROM golang:1.26-bookworm AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOFLAGS=-buildvcs=false
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    go build -trimpath -ldflags "-s -w" -o /out/paygw ./cmd/paygw

# ---- runtime ----
# distroless static: no shell, CA certificates and tzdata included,
# runs as uid/gid 65532 (nonroot).
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/paygw /paygw
USER nonroot:nonroot
EXPOSE 8080
# admin.addr (metrics, pprof): set it, e.g. PAYGW_ADMIN__ADDR=0.0.0.0:9090, on a network only
# Prometheus reaches; never publish it where the channels can.
EXPOSE 9090
ENTRYPOINT ["/paygw"]
CMD ["serve", "--config", "/etc/paygw/paygw.yaml"]
