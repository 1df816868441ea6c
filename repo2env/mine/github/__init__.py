"""Merged pull requests from GitHub's API (github.com or GitHub Enterprise): :class:`GitHubSource`.

Cost is the design constraint: GitHub allows 5,000 REST calls and 5,000 GraphQL points an hour,
and a repository can have tens of thousands of PRs. So:

* **GraphQL first.** One ``MergedPullRequests`` query returns a page of 50 merged PRs with their
  commits, the issues they close (``closingIssuesReferences``) and those issues' comments: the
  whole mining input for a page in one call. Issues that arrived this way are kept in memory and
  :meth:`GitHubSource.issue` answers from there.
* **REST fallback** when GraphQL is unavailable (no token, 401/403/404 on the endpoint, or an
  Enterprise server whose schema lacks a field): closed PRs, every issue and every comment come
  from three paginated bulk lists of 100 items per page, never one call per PR.
* **Conditional requests.** Every REST GET is stored on disk with its ETag
  (``workdir/http-cache``, through requests-cache) and revalidated with ``If-None-Match``, so a
  re-run costs 304s, which GitHub does not charge. GraphQL is a POST without ETags: not cached.
* **Rate limits are waited out**, not failed on: a 403/429 with ``X-RateLimit-Remaining: 0`` or
  ``Retry-After`` (or a GraphQL ``RATE_LIMITED`` error) sleeps until the reset and retries,
  telling ``on_wait`` first; a wait beyond ``max_wait_s`` is a :class:`SourceError`.

What each mode knows (the miner copes with both):

======================  =====================================  ====================================
field                   GraphQL                                REST fallback
======================  =====================================  ====================================
PRs listed              merged only (the funnel's not_merged   every closed PR, ``merged`` set
                        count stays 0)
``linked_issues``       closing references to issues of this   ``None``: the miner parses the texts
                        repository
``commit_messages``     the first 100 commits' messages        empty
``first_commit_at``     earliest authored date of those        ``None``
issue comments          the first 50 per linked issue          all of them
======================  =====================================  ====================================

``squashed`` is always ``False``: the API does not say how a PR was merged.

The package: :mod:`~repo2env.mine.github.paging` (the source, paging through GraphQL and REST),
:mod:`~repo2env.mine.github.records` (GitHub's JSON to the miner's records, pure) and
:mod:`~repo2env.mine.github.transport` (URLs, the HTTP session, rate limits, git credentials); the
clone is made by :mod:`repo2env.mine.clone`, shared with the local source.
"""

from __future__ import annotations

from repo2env.mine.github.paging import (
    DEFAULT_PAGE_SIZE,
    MERGED_PULL_REQUESTS_QUERY,
    MIN_PAGE_SIZE,
    GitHubSource,
)
from repo2env.mine.github.records import GHOST
from repo2env.mine.github.transport import (
    DEFAULT_API_URL,
    RESET_MARGIN_S,
    SECONDARY_LIMIT_WAIT_S,
    default_clone_url,
    default_graphql_url,
    rate_limit_delay,
)

__all__ = [
    "DEFAULT_API_URL", "DEFAULT_PAGE_SIZE", "GHOST", "MERGED_PULL_REQUESTS_QUERY", "MIN_PAGE_SIZE", "RESET_MARGIN_S",
    "SECONDARY_LIMIT_WAIT_S", "GitHubSource", "default_clone_url", "default_graphql_url", "rate_limit_delay",
]
