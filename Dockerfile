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
EXPOSE 8080 9300
ENTRYPOINT ["/usr/local/bin/paymentsvc"]
CMD ["serve"]
