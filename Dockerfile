# syntax=docker/dockerfile:1
# The runnerguard image: /runnerguard (the webhooks) and /vitals (the sidecar
# the injector adds), static, on an empty base, running as uid 65532.
# hack/image.sh builds the same file set without a Docker engine, for
# linux/amd64 and linux/arm64 as one reproducible index; that is what
# releases publish (make release). Here: docker buildx build --platform
# linux/amd64,linux/arm64 --build-arg VERSION=... --build-arg COMMIT=...
# --build-arg DATE=... .

FROM --platform=$BUILDPLATFORM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/root/go/pkg/mod go mod download
COPY . .
ARG TARGETOS=linux TARGETARCH=amd64 VERSION=dev COMMIT=unknown DATE=unknown
RUN --mount=type=cache,target=/root/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    v=github.com/runnerguard/runnerguard/internal/version \
    && CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath \
    -ldflags "-s -w -buildid= -X $v.Version=$VERSION -X $v.Commit=$COMMIT -X $v.Date=$DATE" \
    -o /rootfs/ ./cmd/runnerguard ./cmd/vitals
# An /etc/passwd entry names uid 65532, and an empty /tmp: what the
# distroless "nonroot" user would give, without the rest of a distribution.
RUN mkdir -p /rootfs/etc /rootfs/tmp && chmod 1777 /rootfs/tmp \
    && echo 'nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin' > /rootfs/etc/passwd \
    && echo 'nonroot:x:65532:' > /rootfs/etc/group

FROM scratch
COPY --from=build /rootfs/ /
USER 65532:65532
ENTRYPOINT ["/runnerguard"]
