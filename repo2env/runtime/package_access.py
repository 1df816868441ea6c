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

    def describe(self) -> dict[str, str]:
        """What will be passed, for ``repo2env doctor``."""
        return {
            "ca_bundle": f"{self.ca_bundle} (from {self.ca_source})" if self.ca_bundle else "none",
            "index_url": self.index_url or "pip default (PyPI)",
            "extra_index_url": self.extra_index_url or "none",
        }
