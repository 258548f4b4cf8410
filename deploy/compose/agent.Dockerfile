# The agent of compose.yaml: kici-agent from kici:local (build that first,
# see docs/deploy.md) in a Debian image, because build steps need a shell
# (bash, else sh) and the tools they call. Add your build tools to the
# apt-get line. Unlike kici:local, this image downloads packages when built.
FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates git \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 65532 kici-agent \
 && useradd --system --uid 65532 --gid 65532 --home-dir /var/lib/kici-agent \
      --create-home --shell /usr/sbin/nologin kici-agent
COPY --from=kici:local /usr/local/bin/kici-agent /usr/local/bin/kici-agent
USER 65532:65532
ENV HOME=/var/lib/kici-agent
WORKDIR /var/lib/kici-agent
ENTRYPOINT ["/usr/local/bin/kici-agent"]
