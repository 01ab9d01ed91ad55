# Builds one of the project's binaries (cmd/<BINARY>) into a static, non-root, distroless image:
#   docker build --build-arg BINARY=sharestate-operator -t sharestate-operator .
#   docker build --build-arg BINARY=sharestate-sidecar  -t sharestate-sidecar .
FROM golang:1.26 AS builder
ARG BINARY=sharestate-operator
ARG TARGETOS=linux
ARG TARGETARCH=amd64
WORKDIR /workspace

# Dependencies first, so a source change does not download them again.
COPY go.mod go.sum ./
RUN go mod download

COPY api/ api/
COPY cmd/ cmd/
COPY controllers/ controllers/
COPY internal/ internal/
COPY pkg/ pkg/
RUN CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags="-s -w" -o /out/app ./cmd/${BINARY}

FROM gcr.io/distroless/static:nonroot
COPY --from=builder /out/app /app
USER 65532:65532
ENTRYPOINT ["/app"]
