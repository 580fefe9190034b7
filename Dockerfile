# One image with the three binaries; the command picks which one runs.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/ ./cmd/paymentsvc ./cmd/reconciler ./cmd/providersim

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/ /usr/local/bin/
USER nonroot
# In a container the services listen on every interface (the binaries'
# defaults are loopback-only, for a developer's machine).
ENV HTTP_ADDR=0.0.0.0:8080 \
    CONSOLE_ADDR=0.0.0.0:8081 \
    SIM_ADDR=0.0.0.0:9300
EXPOSE 8080 8081 9300
# Distroless has no shell and no curl: paymentsvc checks itself (GET
# /healthz on HTTP_ADDR). Containers running the simulator or the
# reconciler override or disable it (see docker-compose.yml).
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
    CMD ["/usr/local/bin/paymentsvc", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/paymentsvc"]
CMD ["serve"]
