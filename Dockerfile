# The manager image. The binary is built on the host (`make docker-build` runs `make build`
# first), so building the image needs no registry: FROM scratch pulls nothing. The manager is a
# static Go binary; it talks to the API server and to the container engine's socket only.
FROM scratch
COPY bin/manager /manager
ENTRYPOINT ["/manager"]
