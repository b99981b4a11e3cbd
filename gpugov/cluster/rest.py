"""The Kubernetes API as raw JSON, every answer checked: the one door for observe, apply and prune.

Requests go through the kubernetes client's connection (its kubeconfig, auth, TLS and proxy
settings) but not through its typed models or its discovery: a server that is not a
Kubernetes API (a 404 page, `{}`, an HTML login page behind a proxy, a list of another kind)
must never read as an empty cluster. So every answer is checked against what was asked: a
list must be a `<Kind>List` of the asked apiVersion with an `items` list of named objects, an
object must be that kind with that name, "not found" must be the API's own Status naming the
object. Anything else raises CheckIncomplete with one line naming the method, host and path.

A collection that answers 404 is incomplete too, not "nothing there": on a real API server it
means the kind is not served (Kueue's or Volcano's CRDs are not installed, or not at this
version), and reporting every desired object of it as missing would hide that.

Transient failures (429, 5xx, a broken or stalled connection) are tried again where that is safe,
within the command's retry deadline (gpugov.cluster.retry); the answer that ends the tries is
judged as any other, so a spent deadline reads as incomplete, with the last status.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError, MaxRetryError, NewConnectionError, ProtocolError, ReadTimeoutError

from gpugov.cluster.retry import DeadlineSpent, Stalled, deadline_of, is_safe, retry_for
from gpugov.kube.kinds import Kind
from gpugov.kube.names import KUEUE_GROUP, VOLCANO_GROUP
from gpugov.sources import CheckIncomplete

_T = TypeVar("_T")

TIMEOUT = (10, 20)  # connect, read at most (seconds without a byte); shorter at first: retry.STALL_TIMEOUTS
PAGE_SIZE = 500
APPLY_PATCH = "application/apply-patch+yaml"  # server-side apply (a JSON body is valid YAML)
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
FIELD_MANAGER = "gpugov"
# Who serves the API groups gpugov writes that a bare cluster lacks, for the 404 hint.
PROVIDED_BY = {KUEUE_GROUP: "Kueue (v0.16 or later)", VOLCANO_GROUP: "Volcano"}

Query = Sequence[tuple[str, str]]


class Rejected(Exception):
    """The API server answered, as a Kubernetes API does, and refused the request (Status)."""

    def __init__(self, answer: Answer) -> None:
        super().__init__(f"{answer.status} {answer.status_reason or answer.reason}: {answer.message}".rstrip(": "))
        self.answer = answer


@dataclass(frozen=True)
class Answer:
    method: str
    where: str  # host and path, for the one-line error
    status: int
    reason: str
    body: dict[str, Any] | None  # None: the answer was not a JSON object
    content_type: str = ""
    attempts: int = 1  # how many times it was asked (retry.py): said when the tries ran out

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def is_status(self) -> bool:
        """The API's own Status object (what a Kubernetes API server sends with an error)."""
        return self.body is not None and self.body.get("kind") == "Status" and self.body.get("apiVersion") == "v1"

    @property
    def status_reason(self) -> str:
        return str(self.body.get("reason") or "") if self.is_status and self.body else ""

    @property
    def message(self) -> str:
        return " ".join(str(self.body.get("message") or "").split()) if self.is_status and self.body else ""

    def incomplete(self, why: str) -> CheckIncomplete:
        status = " ".join(filter(None, (str(self.status), self.reason)))
        tries = f" (after {self.attempts} attempts)" if self.attempts > 1 else ""
        return CheckIncomplete(f"{self.method} {self.where}: {status}: {why}{tries}")

    def not_an_api(self, wanted: str) -> CheckIncomplete:
        """The answer is not what a Kubernetes API server sends for this request."""
        if self.body is None:
            got = f"the answer is not JSON ({self.content_type.split(';')[0].strip() or 'no content type'})"
        else:
            got = f"expected {wanted}, got kind {self.body.get('kind')!r} of apiVersion {self.body.get('apiVersion')!r}"
        return self.incomplete(f"{got}; is this a Kubernetes API server?")

    def failed(self, kind: Kind) -> CheckIncomplete:
        """A non-2xx answer to a read: why, in one line."""
        if self.status == 404:
            return self.incomplete(not_served(kind))
        if not self.is_status:
            return self.not_an_api("Status")
        why = self.message or self.status_reason or "refused"
        if self.status in (401, 403):
            why += " (the credentials may not read this kind)"
        return self.incomplete(why)


def not_served(kind: Kind) -> str:
    provider = PROVIDED_BY.get(kind.group)
    hint = f" (is {provider} installed?)" if provider else ""
    return f"the server does not serve {kind.plural} of {kind.api_version}{hint}"


def unserved(api: Api, kind: Kind) -> CheckIncomplete:
    """`kind` is missing from the server's discovery (GET /apis)."""
    return CheckIncomplete(f"GET {api.host}/apis: {not_served(kind)}")


class Api:
    """Raw JSON requests over a kubernetes ApiClient: its host, credentials, TLS and proxy settings
    (its connection pool), with gpugov's retries (retry.py) in place of the client's."""

    def __init__(self, api_client: client.ApiClient, timeout: tuple[float, float] = TIMEOUT) -> None:
        self.client = api_client
        self.host = str(api_client.configuration.host).rstrip("/")
        self.timeout = timeout

    def call(self, method: str, path: str, query: Query = (), body: Any = None, content_type: str = "") -> Answer:
        """One request, tried again where safe; CheckIncomplete only when no answer came (unreachable,
        timed out, the connection broke, the retry deadline was spent on such failures)."""
        headers = {"Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        where = f"{self.host}{path}"
        try:
            deadline = deadline_of(self.client)
        except ValueError as exc:
            raise CheckIncomplete(str(exc)) from None
        started = time.monotonic()
        try:
            method, url, headers, _, _ = self.client.param_serialize(
                method, path, query_params=list(query), header_params=headers, auth_settings=["BearerToken"],
            )
            retries = retry_for(method, content_type, deadline)
            safe = is_safe(method, content_type)
            while True:
                connect, read = retries.timeouts(safe, *self.timeout)
                try:
                    # The pool itself, not ApiClient.call_api: it reads the body after urllib3's retries
                    # are over, so a connection broken mid-answer could not be tried again.
                    response = self.client.rest_client.pool_manager.request(
                        method, url, body=None if body is None else json.dumps(body).encode(), headers=headers,
                        timeout=urllib3.Timeout(connect=connect, read=read), retries=retries, preload_content=True,
                    )
                    break
                except Stalled as stalled:  # asked again at once, with a longer timeout
                    retries = stalled.retry
                    retries.sleep()
            raw = response.data
        except ApiException as exc:  # requests the client could not build (credentials)
            raise CheckIncomplete(f"{method} {where}: {exc.reason or exc.status}".split("\n")[0]) from exc
        except (HTTPError, OSError) as exc:
            raise CheckIncomplete(f"{method} {where}: {_no_answer(exc, time.monotonic() - started)}") from exc
        history = getattr(response.retries, "history", ()) if response.retries else ()
        return Answer(method, where, response.status, response.reason or "", _json_object(raw),
                      response.headers.get("Content-Type") or "", attempts=len(history) + 1)


def _no_answer(exc: BaseException, seconds: float) -> str:
    """Why no answer came, in a few words: the last failure, and the tries when there were several."""
    attempts = exc.attempts if isinstance(exc, DeadlineSpent) else 1
    reason = exc.reason if isinstance(exc, MaxRetryError) and exc.reason is not None else exc
    if isinstance(reason, ProtocolError):
        why = "the connection broke before the answer was complete"
    elif isinstance(reason, ReadTimeoutError):
        why = "timed out waiting for the answer"
    elif isinstance(reason, (NewConnectionError, OSError)) or not isinstance(reason, HTTPError):
        why = "cluster unreachable or timed out"
    else:
        why = " ".join(str(reason).split())[:200] or "cluster unreachable or timed out"
    tries = f" ({attempts} attempts in {seconds:.0f} s)" if attempts > 1 else ""
    return f"{type(reason).__name__}: {why}{tries}"


def _json_object(raw: bytes | str | None) -> dict[str, Any] | None:
    try:
        value = json.loads(raw or b"")
    except (ValueError, UnicodeDecodeError):
        return None
    return value if isinstance(value, dict) else None


def _is_named(item: Any) -> bool:
    meta = item.get("metadata") if isinstance(item, dict) else None
    return isinstance(meta, dict) and isinstance(meta.get("name"), str) and bool(meta["name"])


def is_object(body: dict[str, Any] | None, kind: Kind, name: str | None = None) -> bool:
    """`body` is an object of `kind` (named `name`, when given), as the API returns it."""
    return (body is not None and body.get("kind") == kind.kind and body.get("apiVersion") == kind.api_version
            and _is_named(body) and (name is None or body["metadata"]["name"] == name))


def read_page(api: Api, kind: Kind, query: Query) -> dict[str, Any]:
    """One page of the collection of `kind`: a well-formed `<Kind>List`, or CheckIncomplete."""
    answer = api.call("GET", kind.collection_path(), query)
    if not answer.ok:
        raise answer.failed(kind)
    page = answer.body
    wanted = f"{kind.kind}List"
    if (page is None or page.get("kind") != wanted or page.get("apiVersion") != kind.api_version
            or not isinstance(page.get("items"), list) or not isinstance(page.get("metadata") or {}, dict)):
        raise answer.not_an_api(f"{wanted} of {kind.api_version}")
    if not all(_is_named(item) for item in page["items"]):
        raise answer.incomplete(f"an item of the {wanted} has no metadata.name")
    return page


def list_all(api: Api, kind: Kind, label_selector: str = "", field_selector: str = "",
             page_size: int = PAGE_SIZE, read_ahead: bool = False) -> Iterator[dict[str, Any]]:
    """Every object of `kind` in all namespaces, page by page (limit/continue). `read_ahead`: the
    next page is asked for and parsed in a thread while the caller works on this one, so the
    server's time on a page and the caller's are spent side by side, not one after the other."""
    pages = _pages(api, kind, label_selector, field_selector, page_size)
    for page in read_ahead_of(pages) if read_ahead else pages:
        for item in page["items"]:
            item.setdefault("apiVersion", kind.api_version)  # list items may leave them out
            item.setdefault("kind", kind.kind)
            yield item


def _pages(api: Api, kind: Kind, label_selector: str, field_selector: str, page_size: int) -> Iterator[dict[str, Any]]:
    token = ""
    while True:
        query = [("limit", str(page_size))]
        if label_selector:
            query.append(("labelSelector", label_selector))
        if field_selector:
            query.append(("fieldSelector", field_selector))
        if token:
            query.append(("continue", token))
        page = read_page(api, kind, query)
        yield page
        token = str((page.get("metadata") or {}).get("continue") or "")
        if not token:
            return


_END = object()


def read_ahead_of(items: Iterator[_T]) -> Iterator[_T]:
    """`items` in order, the next one made in a thread while the caller works on this one (one
    waits ready at most); an error raised making one is raised here, where it would have been.
    A caller that stops early stops the thread at its next item."""
    ready: queue.Queue[tuple[Any, BaseException | None]] = queue.Queue(maxsize=1)
    stopped = threading.Event()

    def offer(entry: tuple[Any, BaseException | None]) -> bool:
        while not stopped.is_set():
            try:
                ready.put(entry, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def make() -> None:
        try:
            for item in items:
                if not offer((item, None)):
                    return
        except BaseException as exc:  # handed to the caller, raised in its thread
            offer((_END, exc))
            return
        offer((_END, None))

    threading.Thread(target=make, name="gpugov-read-ahead", daemon=True).start()
    try:
        while True:
            item, error = ready.get()
            if error is not None:
                raise error
            if item is _END:
                return
            yield item
    finally:
        stopped.set()


def read_object(api: Api, kind: Kind, name: str, namespace: str = "") -> dict[str, Any] | None:
    """The object, None when the API says it does not exist, CheckIncomplete otherwise."""
    answer = api.call("GET", kind.object_path(name, namespace))
    if answer.ok:
        if not is_object(answer.body, kind, name):
            raise answer.not_an_api(f"{kind.kind} {name}")
        return answer.body
    details = (answer.body or {}).get("details") or {}
    if answer.status == 404 and answer.status_reason == "NotFound" and details.get("name") == name:
        return None
    raise answer.failed(kind)


def write(api: Api, method: str, kind: Kind, name: str, namespace: str, body: Any, content_type: str,
          query: Query = ()) -> dict[str, Any]:
    """A PATCH (apply, merge) answered with the object; Rejected when the API refuses it."""
    answer = api.call(method, kind.object_path(name, namespace), query, body, content_type)
    if answer.ok:
        if not is_object(answer.body, kind, name):
            raise answer.not_an_api(f"{kind.kind} {name}")
        assert answer.body is not None
        return answer.body
    if answer.is_status:
        raise Rejected(answer)
    raise answer.not_an_api("Status")


def server_side_apply(api: Api, kind: Kind, obj: dict[str, Any], force: bool = True,
                      field_manager: str = FIELD_MANAGER) -> dict[str, Any]:
    meta = obj["metadata"]
    query = [("fieldManager", field_manager), ("force", "true" if force else "false")]
    return write(api, "PATCH", kind, meta["name"], meta.get("namespace", ""), obj, APPLY_PATCH, query)


def delete(api: Api, kind: Kind, name: str, namespace: str = "") -> None:
    """Ask the server to delete the object (background propagation); gone already is fine."""
    answer = api.call("DELETE", kind.object_path(name, namespace), [("propagationPolicy", "Background")])
    if answer.ok and answer.body is not None:
        return
    if answer.status == 404 and answer.status_reason == "NotFound":
        return
    if answer.is_status:
        raise Rejected(answer)
    raise answer.not_an_api("Status")


def served_versions(api: Api) -> set[str]:
    """Every group/version the server serves ("v1", "kueue.x-k8s.io/v1beta2", ...), from discovery."""
    answer = api.call("GET", "/apis")
    body = answer.body
    if not answer.ok or body is None or body.get("kind") != "APIGroupList" or not isinstance(body.get("groups"), list):
        raise answer.not_an_api("APIGroupList")
    versions = {"v1"}
    for group in body["groups"]:
        for version in (group.get("versions") or []) if isinstance(group, dict) else []:
            if isinstance(version, dict) and version.get("groupVersion"):
                versions.add(str(version["groupVersion"]))
    return versions
