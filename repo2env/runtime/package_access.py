"""How containers reach a package index: the CA bundle and index URLs passed into builds.

Behind a TLS-intercepting proxy (this machine, most corporate networks) pip inside a container
fails unless it trusts the host's CA bundle. One setting covers every build: the bundle is copied
into images at a fixed path and the pip/requests/OpenSSL variables point at it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

#: Where the host's CA bundle is placed inside images.
CONTAINER_CA_PATH = "/etc/ssl/certs/repo2env-host-ca.crt"

_CA_VARIABLES = ("REPO2ENV_CA_BUNDLE", "PIP_CERT", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")
_DEFAULT_CA_PATHS = ("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem")

#: The system bundles old setuptools' easy_install verifies against (``setuptools/ssl_support.py``
#: ``cert_paths``, the first that exists wins). It reads no variable: a ``setup_requires`` it
#: fetches fails behind a TLS-intercepting proxy unless the bundle itself holds the proxy's CA.
EASY_INSTALL_CA_PATHS = (
    "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/certs/ca-certificates.crt", "/usr/share/ssl/certs/ca-bundle.crt",
    "/usr/local/share/certs/ca-root.crt", "/etc/ssl/cert.pem", "/usr/local/share/certs/ca-root-nss.crt",
    "/etc/ssl/ca-bundle.pem",
)


@dataclass(frozen=True)
class PackageAccess:
    """The CA bundle and package index settings that builds inherit from the host."""

    ca_bundle: Path | None = None
    ca_source: str = "none"
    index_url: str | None = None
    extra_index_url: str | None = None
    trusted_host: str | None = None

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> PackageAccess:
        """Read the settings: ``REPO2ENV_CA_BUNDLE`` / ``REPO2ENV_INDEX_URL`` first, then pip's own
        variables, then the system CA bundle. ``REPO2ENV_CA_BUNDLE=none`` passes no bundle."""
        environ = os.environ if environ is None else environ
        ca_bundle, ca_source = None, "none"
        if environ.get("REPO2ENV_CA_BUNDLE", "").lower() != "none":
            for variable in _CA_VARIABLES:
                candidate = environ.get(variable)
                if candidate and Path(candidate).is_file():
                    ca_bundle, ca_source = Path(candidate), variable
                    break
            else:
                for candidate in _DEFAULT_CA_PATHS:
                    if Path(candidate).is_file():
                        ca_bundle, ca_source = Path(candidate), "system"
                        break
        return cls(
            ca_bundle=ca_bundle,
            ca_source=ca_source,
            index_url=environ.get("REPO2ENV_INDEX_URL") or environ.get("PIP_INDEX_URL") or None,
            extra_index_url=environ.get("REPO2ENV_EXTRA_INDEX_URL") or environ.get("PIP_EXTRA_INDEX_URL") or None,
            trusted_host=environ.get("PIP_TRUSTED_HOST") or None,
        )

    def container_env(self) -> dict[str, str]:
        """Environment variables for a container whose image carries the bundle at CONTAINER_CA_PATH."""
        env: dict[str, str] = {}
        if self.ca_bundle is not None:
            for variable in ("PIP_CERT", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "UV_NATIVE_TLS"):
                env[variable] = CONTAINER_CA_PATH if variable != "UV_NATIVE_TLS" else "1"
        if self.index_url:
            env["PIP_INDEX_URL"] = env["UV_INDEX_URL"] = self.index_url
        if self.extra_index_url:
            env["PIP_EXTRA_INDEX_URL"] = env["UV_EXTRA_INDEX_URL"] = self.extra_index_url
        if self.trusted_host:
            env["PIP_TRUSTED_HOST"] = self.trusted_host
        return env

    def trusting_system_bundles(self, command: str) -> str:
        """``command`` (one shell line, a Dockerfile RUN) run with the extra CA bundle appended to each
        system bundle of :data:`EASY_INSTALL_CA_PATHS` that exists, and every one of them restored
        (content, mode, times) when the shell exits, failing or not: no layer keeps the build
        host's CA. ``command`` unchanged when no extra bundle is configured.

        The bundle appended is the one the ``SSL_CERT_FILE`` build argument names (nothing happens
        without it), so that tools that read no variable (old setuptools' easy_install fetching a
        ``setup_requires``) trust the proxy too, during this step only."""
        if self.ca_bundle is None:
            return command
        saved = "repo2env_ca_saved"
        steps = [
            f'{saved}="$(mktemp -d)"', f': > "${saved}/list"',
            f'repo2env_ca_restore() {{ while read -r copy bundle; do cp -p "$copy" "$bundle"; done < "${saved}/list"; '
            f'rm -rf "${saved}"; }}',
            "trap repo2env_ca_restore EXIT",
            'repo2env_ca="${SSL_CERT_FILE:-}"', "repo2env_ca_seen=' '",
            # A listed path may be a link to another (one bundle, appended once).
            f"for path in {' '.join(EASY_INSTALL_CA_PATHS)}; do "
            '[ -s "$repo2env_ca" ] && [ -f "$path" ] || continue; bundle="$(readlink -f "$path")"; '
            'case "$repo2env_ca_seen" in *" $bundle "*) continue;; esac; '
            '[ "$bundle" != "$(readlink -f "$repo2env_ca")" ] || continue; '
            'repo2env_ca_seen="$repo2env_ca_seen$bundle "; '
            f'copy="${saved}/$(printf %s "$bundle" | tr / _)"; cp -p "$bundle" "$copy"; '
            f'echo "$copy $bundle" >> "${saved}/list"; {{ echo; cat "$repo2env_ca"; }} >> "$bundle"; done',
        ]
        return "set -e; " + "; ".join(steps) + "; " + command

    def describe(self) -> dict[str, str]:
        """What will be passed, for ``repo2env doctor``."""
        return {
            "ca_bundle": f"{self.ca_bundle} (from {self.ca_source})" if self.ca_bundle else "none",
            "index_url": self.index_url or "pip default (PyPI)",
            "extra_index_url": self.extra_index_url or "none",
        }
