#!/usr/bin/env bash
# Makes sure a Docker engine answers, installing and starting one where we are root on Debian/Ubuntu.
# Used by `make engine` (and so by `make demo` / `make test`) and by .ci/run. Idempotent.
set -euo pipefail

log=${REPO2ENV_DOCKERD_LOG:-/tmp/repo2env-dockerd.log}

need_packages=()
command -v dockerd >/dev/null 2>&1 || need_packages+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || need_packages+=(debootstrap)

if docker info >/dev/null 2>&1 && [ ${#need_packages[@]} -eq 0 ]; then
  exit 0
fi

if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  if docker info >/dev/null 2>&1; then
    echo "note: debootstrap is missing; it is only needed when no registry serves python:X.Y-slim" >&2
    exit 0
  fi
  cat >&2 <<'MSG'
No Docker engine answers, and this script can only install one as root on Debian/Ubuntu.
Do this instead:
  1. install Docker Engine (https://docs.docker.com/engine/install/) and start it
     (systemctl start docker, or Docker Desktop);
  2. let your user reach it: sudo usermod -aG docker "$USER" (then log in again);
  3. check: docker info
  4. run the make target again.
MSG
  exit 1
fi

if [ ${#need_packages[@]} -gt 0 ]; then
  echo "installing ${need_packages[*]} (apt-get)" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need_packages[@]}" >/dev/null
fi

if ! docker info >/dev/null 2>&1; then
  echo "starting dockerd (log: $log)" >&2
  # systemd is not PID 1 in containers and CI machines, so start the daemon directly.
  nohup dockerd >"$log" 2>&1 &
  for _ in $(seq 1 60); do
    docker info >/dev/null 2>&1 && break
    sleep 1
  done
fi

if ! docker info >/dev/null 2>&1; then
  echo "dockerd did not come up within 60 s; last lines of $log:" >&2
  tail -n 20 "$log" >&2 || true
  exit 1
fi
echo "docker engine: $(docker version --format '{{.Server.Version}}')" >&2
