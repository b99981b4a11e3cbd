"""Acting as another user, as `kubectl --as/--as-group` does: the Impersonate-User header and one
Impersonate-Group header per group (the API server reads each header line as one group, so a
comma-joined value would name a single group with a comma in it). The caller's own credentials
must hold `impersonate` on those users and groups; the API server then authorizes every request
as the impersonated identity, which is how a platform engineer sees what a tenant sees.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from urllib3 import HTTPHeaderDict

USER_HEADER = "Impersonate-User"
GROUP_HEADER = "Impersonate-Group"


class _Impersonating:
    """A urllib3 pool manager that adds the impersonation headers to every request."""

    def __init__(self, pool: Any, user: str, groups: Sequence[str]) -> None:
        self._pool, self._user, self._groups = pool, user, tuple(groups)

    def request(self, method: str, url: str, *args: Any, headers: Any = None, **kwargs: Any) -> Any:
        sent = HTTPHeaderDict({k: v for k, v in (headers or {}).items()
                               if k.lower() not in (USER_HEADER.lower(), GROUP_HEADER.lower())})
        sent[USER_HEADER] = self._user
        for group in self._groups:
            sent.add(GROUP_HEADER, group)
        return self._pool.request(method, url, *args, headers=sent, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pool, name)


def impersonate(api_client: Any, user: str, groups: Sequence[str] = ()) -> Any:
    """`api_client` (a kubernetes ApiClient), acting as `user` in `groups` from now on."""
    rest = api_client.rest_client
    rest.pool_manager = _Impersonating(rest.pool_manager, user, groups)
    return api_client
