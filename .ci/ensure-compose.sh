#!/usr/bin/env bash
# Makes sure `docker compose` (Compose v2, the CLI plugin) answers: Harbor's docker environment runs
# every trial through it. Used by `make compose` (and so by `make test`) and by .ci/run. Idempotent.
#
# Debian 12 packages only Compose v1 (docker-compose 1.29, Python), which Harbor cannot use; Debian 13
# (trixie) packages v2 as `docker-compose`. Where apt offers no v2, the trixie package is fetched
# with apt itself under a private configuration (its own lists and cache in a temp dir, the system's
# sources and installed packages untouched; apt checks the archive's signature) and only its binary
# is unpacked, as a per-user CLI plugin: ${DOCKER_CONFIG:-$HOME/.docker}/cli-plugins/docker-compose.
set -euo pipefail

if docker compose version >/dev/null 2>&1; then
  exit 0
fi

plugins="${DOCKER_CONFIG:-$HOME/.docker}/cli-plugins"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
if ! command -v apt-get >/dev/null 2>&1 || [ ! -f "$keyring" ]; then
  cat >&2 <<'MSG'
`docker compose` (Compose v2) is missing, and this script can only fetch it on Debian/Ubuntu.
Install the Compose plugin (https://docs.docker.com/compose/install/linux/), then check:
  docker compose version
MSG
  exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial" "$work/cache/archives/partial"
echo "deb [signed-by=$keyring] http://deb.debian.org/debian trixie main" >"$work/sources.list"
apt_private=(-o "Dir::Etc::SourceList=$work/sources.list" -o Dir::Etc::SourceParts=/dev/null
             -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache" -o Dir::State::status=/dev/null
             -o APT::Sandbox::User=root)
echo "fetching Compose v2 (Debian trixie's docker-compose package) into $plugins" >&2
apt-get "${apt_private[@]}" update -qq
(cd "$work" && apt-get "${apt_private[@]}" download -qq docker-compose)
dpkg-deb -x "$work"/docker-compose_*.deb "$work/root"
mkdir -p "$plugins"
install -m 0755 "$work/root/usr/libexec/docker/cli-plugins/docker-compose" "$plugins/docker-compose"
docker compose version >&2
