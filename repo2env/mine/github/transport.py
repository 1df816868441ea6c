"""How the GitHub source talks to the server: API URLs, the HTTP session, the git credentials.

Every REST GET goes through one requests session that stores responses with their ETags and
revalidates them (:func:`api_session`), counts requests (:class:`ApiMeter`) and waits out rate
limits (:func:`rate_limit_delay`, :class:`RateLimitWaiter`); PyGithub is made to use that session
(:func:`use_session`). The token reaches git only through :func:`git_environment`.
"""

from __future__ import annotations

import base64
import math
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import github
import requests
import requests_cache
from github.GithubObject import NonCompletableGithubObject
from requests.adapters import HTTPAdapter

from repo2env.errors import SourceError
from repo2env.mine.clone import NO_PROMPT

DEFAULT_API_URL = "https://api.github.com"
#: GitHub's reset times are whole seconds of a clock that is not ours: wait a little past them.
RESET_MARGIN_S = 1.0
#: GitHub's advice for a secondary rate limit that names no time: wait at least a minute.
SECONDARY_LIMIT_WAIT_S = 60.0


# -- URLs ------------------------------------------------------------------------------------------


def default_graphql_url(api_url: str) -> str:
    """GitHub's GraphQL endpoint for a REST base URL.

    ``https://api.github.com`` -> ``https://api.github.com/graphql``;
    ``https://HOST/api/v3`` (Enterprise) -> ``https://HOST/api/graphql``.
    """
    parts = urlsplit(api_url.rstrip("/"))
    path = parts.path.rstrip("/").removesuffix("/v3")
    return urlunsplit(parts._replace(path=f"{path}/graphql"))


def default_clone_url(api_url: str, repo: str) -> str:
    """The HTTPS clone URL of ``repo`` on the server behind ``api_url``.

    ``https://api.github.com`` -> ``https://github.com/owner/name.git``;
    ``https://HOST/api/v3`` -> ``https://HOST/owner/name.git``.
    """
    parts = urlsplit(api_url.rstrip("/"))
    host = "github.com" if parts.hostname == "api.github.com" else parts.netloc
    path = parts.path.rstrip("/").removesuffix("/api/v3")
    return urlunsplit((parts.scheme, host, f"{path}/{repo}.git", "", ""))


def origin(url: str) -> tuple[str, str | None, int | None]:
    parts = urlsplit(url)
    return parts.scheme, parts.hostname, parts.port


def _token_may_go_to(clone_url: str, api_url: str, repo: str) -> bool:
    """Whether git may send the API token to ``clone_url``.

    Only to the server the API belongs to (its derived clone host), and over plain HTTP only
    when the API itself is plain HTTP there: a mirror elsewhere must not see the token.
    """
    clone, own = urlsplit(clone_url), urlsplit(default_clone_url(api_url, repo))
    if clone.scheme not in ("http", "https") or clone.hostname != own.hostname:
        return False
    return clone.scheme == "https" or own.scheme == "http"


def git_environment(token: str | None, clone_url: str, api_url: str, repo: str) -> dict[str, str]:
    """Environment for git: no password prompts, and the token as a header where it belongs."""
    environment = dict(NO_PROMPT)
    if not token or not _token_may_go_to(clone_url, api_url, repo):
        return environment
    # GIT_CONFIG_COUNT/KEY/VALUE configure this one command without touching .git/config and
    # keep the token out of the process list; extend any such config the caller already set.
    index = int(os.environ.get("GIT_CONFIG_COUNT") or 0)
    credentials = base64.b64encode(f"x-access-token:{token}".encode()).decode()
    environment |= {
        "GIT_CONFIG_COUNT": str(index + 1),
        f"GIT_CONFIG_KEY_{index}": "http.extraheader",
        f"GIT_CONFIG_VALUE_{index}": f"Authorization: Basic {credentials}",
    }
    return environment


# -- HTTP: PyGithub's objects and errors -----------------------------------------------------------


class RawObject(NonCompletableGithubObject):
    """A REST list item kept as GitHub's JSON.

    PyGithub's typed objects fetch an item again to "complete" any field the list left out (a
    plain issue has no ``pull_request`` key, for one): one hidden call per item.
    """

    def _initAttributes(self) -> None:
        pass

    def _useAttributes(self, attributes: dict[str, Any]) -> None:
        pass


def github_message(error: github.GithubException) -> str:
    data = error.data if isinstance(error.data, dict) else {}
    return str(data.get("message") or error.message or "no message")


# -- HTTP: counting, rate limits, conditional requests ----------------------------------------------


class ApiMeter:
    """Counts HTTP requests to the API; 304s are free on GitHub's quota."""

    def __init__(self) -> None:
        self.calls = 0
        self.charged = 0

    def record(self, status: int) -> None:
        self.calls += 1
        if status != 304:
            self.charged += 1


class RateLimitWaiter:
    """Sleeps out a rate limit after telling ``on_wait``, up to ``max_wait_s`` per request."""

    def __init__(self, on_wait: Callable[[str], None] | None, max_wait_s: float) -> None:
        self._on_wait = on_wait
        self._max_wait_s = max_wait_s

    def wait(self, delay_s: float, waited_s: float) -> float:
        """Wait ``delay_s`` more for a request that already waited ``waited_s``; the new total."""
        if waited_s + delay_s > self._max_wait_s:
            raise SourceError(
                f"GitHub rate limit reached; the reset is {math.ceil(delay_s)} s away, "
                f"more than the {self._max_wait_s:g} s allowed to wait",
                hint="retry later, allow a longer wait, or use a token with a higher quota: "
                "--token or GITHUB_TOKEN",
            )
        if self._on_wait is not None:
            self._on_wait(f"GitHub rate limit reached; waiting {math.ceil(delay_s)} s until reset")
        time.sleep(delay_s)
        return waited_s + delay_s


def reset_delay(headers: Mapping[str, Any]) -> float | None:
    """Seconds until ``X-RateLimit-Reset`` (plus a margin), or ``None`` without the header."""
    lowered = {key.lower(): value for key, value in headers.items()}
    reset = lowered.get("x-ratelimit-reset")
    if reset is None:
        return None
    return max(float(reset) - time.time(), 0.0) + RESET_MARGIN_S


def rate_limit_delay(status: int, headers: Mapping[str, Any], body: str) -> float | None:
    """How long to wait before retrying a response, or ``None`` if it is not a rate limit.

    GitHub signals a primary limit with 403/429 and ``X-RateLimit-Remaining: 0`` (wait for
    ``X-RateLimit-Reset``), a secondary one with ``Retry-After`` or, failing that, its message.
    """
    if status not in (403, 429):
        return None
    lowered = {key.lower(): value for key, value in headers.items()}
    retry_after = lowered.get("retry-after")
    if retry_after is not None:
        try:
            return max(float(retry_after), 0.0)
        except ValueError:
            pass
    if str(lowered.get("x-ratelimit-remaining")) == "0":
        return reset_delay(lowered) or SECONDARY_LIMIT_WAIT_S
    if status == 429 or "secondary rate limit" in body.lower():
        return SECONDARY_LIMIT_WAIT_S
    return None


class _QuotaAdapter(HTTPAdapter):
    """Counts every request that reaches the network and waits out rate limits, then retries."""

    def __init__(self, meter: ApiMeter, waiter: RateLimitWaiter) -> None:
        super().__init__()
        self._meter = meter
        self._waiter = waiter

    def send(self, request: requests.PreparedRequest, *args: Any, **kwargs: Any) -> requests.Response:  # type: ignore[override]
        waited = 0.0
        while True:
            response = super().send(request, *args, **kwargs)
            self._meter.record(response.status_code)
            delay = rate_limit_delay(response.status_code, response.headers, response.text)
            if delay is None:
                return response
            response.close()
            waited = self._waiter.wait(delay, waited)


def _keep_headers(request: requests.PreparedRequest) -> requests.PreparedRequest:
    # A session without auth would let requests replace PyGithub's Authorization header with
    # ~/.netrc credentials; PyGithub guards against this the same way.
    return request


def api_session(cache_path: Path, meter: ApiMeter, waiter: RateLimitWaiter) -> requests.Session:
    """A requests session that stores GET responses with their ETags and revalidates each use."""
    session = requests_cache.CachedSession(
        str(cache_path),
        backend="sqlite",
        # Never answer from the cache unasked: every GET goes out with If-None-Match, and only a
        # 304 (free on GitHub's quota) lets the stored body be used.
        expire_after=requests_cache.EXPIRE_IMMEDIATELY,
        allowable_methods=("GET",),
        allowable_codes=(200,),
        cache_control=False,
    )
    adapter = _QuotaAdapter(meter, waiter)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    session.auth = _keep_headers
    return session


def use_session(client: github.Github, session: requests.Session) -> None:
    """Make ``client`` send its requests through ``session``.

    PyGithub's only public hook for its transport, ``Requester.injectConnectionClasses``, is
    process-wide; setting the connection class on this client's requester leaves every other
    PyGithub client in the process as it was.
    """
    requester = client.requester
    attribute = "_Requester__connectionClass"
    base = getattr(requester, attribute, None)
    if base is None:
        raise RuntimeError("this PyGithub version has no per-client connection class; pin pygithub<3")

    def init(connection: Any, *args: Any, **kwargs: Any) -> None:
        base.__init__(connection, *args, **kwargs)
        connection.session.close()
        connection.session = session

    setattr(requester, attribute, type("CachedSessionConnection", (base,), {"__init__": init}))
