"""A small fake of the GitHub REST endpoints of FORMATS.md §3, on 127.0.0.1, for the tests.

It serves issues, comments and labels from memory, paginates with Link headers, answers
`If-None-Match` with 304, checks the token, and records every request it receives. Faults
(a status, headers, a delay) can be queued for a method and path pattern.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlencode, urlsplit

TOKEN = "ghp_FAKEtoken1234567890secretvalue"
LOGIN = "loop-bot"

#: The loop's marker comment on a blocked issue, as the tests' fakes post it.
CREDENTIALS_NOTE = (
    "Blocked (credentials): SFTP_PASSWORD is not set.\n"
    "Needed: an operator provides SFTP_PASSWORD.\n\n"
    "AGENT_TASK_STATUS: blocked\nAGENT_BLOCK_CATEGORY: credentials\n"
)


@dataclass
class Request:
    method: str
    #: The raw path as sent (still URL-encoded), without the query.
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: object = None
    #: The status the fake answered with.
    status: int = 0


@dataclass
class Fault:
    method: str
    pattern: str
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    times: int = 1
    delay: float = 0.0
    body: object = None
    #: Carry out the request first, then delay and answer normally (a response that is lost
    #: when the client times out, after the server did the work).
    after: bool = False


class FakeGithub:
    def __init__(self, token: str = TOKEN, login: str = LOGIN, page_size: int = 100) -> None:
        self.tokens = {token: login}
        self.page_size = page_size
        self.issues: dict[str, dict[int, dict]] = {}
        self.comments: dict[tuple[str, int], list[dict]] = {}
        self.orgs: dict[str, list[dict]] = {}
        self.requests: list[Request] = []
        self.faults: list[Fault] = []
        self.lock = threading.Lock()
        self._clock = datetime(2026, 11, 28, 9, 0, tzinfo=UTC)
        self._next_id = 1000
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # keep test output quiet
                pass

            def do_GET(self) -> None:
                fake._handle(self, "GET")

            def do_POST(self) -> None:
                fake._handle(self, "POST")

            def do_DELETE(self) -> None:
                fake._handle(self, "DELETE")

        class Server(ThreadingHTTPServer):
            def handle_error(self, request: object, client_address: object) -> None:
                pass  # a client that timed out and hung up is expected in these tests

        self.server = Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def start(self) -> FakeGithub:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    # -- data ------------------------------------------------------------------------------

    def _tick(self) -> str:
        self._clock += timedelta(minutes=1)
        return self._clock.strftime("%Y-%m-%dT%H:%M:%SZ")

    def add_issue(
        self,
        repo: str,
        number: int,
        title: str = "A task",
        body: str = "",
        labels: tuple[str, ...] = (),
        pull_request: bool = False,
        state: str = "open",
    ) -> dict:
        now = self._tick()
        issue = {
            "number": number,
            "title": title,
            "body": body,
            "state": state,
            "labels": [{"name": name} for name in labels],
            "html_url": f"https://github.example/{repo}/issues/{number}",
            "comments": 0,
            "created_at": now,
            "updated_at": now,
            "user": {"login": "someone"},
        }
        if pull_request:
            issue["pull_request"] = {"url": f"{self.url}/repos/{repo}/pulls/{number}"}
        self.issues.setdefault(repo, {})[number] = issue
        self.comments.setdefault((repo, number), [])
        return issue

    def add_comment(
        self, repo: str, number: int, body: str, author: str = LOGIN, association: str = "NONE"
    ) -> dict:
        with self.lock:
            return self._add_comment(repo, number, body, author, association)

    def _add_comment(self, repo: str, number: int, body: str, author: str, association: str):
        self._next_id += 1
        now = self._tick()
        comment = {
            "id": self._next_id,
            "body": body,
            "user": {"login": author},
            "author_association": association,
            "created_at": now,
            "updated_at": now,
            "html_url": f"https://github.example/{repo}/issues/{number}#c{self._next_id}",
        }
        self.comments[(repo, number)].append(comment)
        issue = self.issues[repo][number]
        issue["comments"] += 1
        issue["updated_at"] = now
        return comment

    def labels_of(self, repo: str, number: int) -> list[str]:
        return [label["name"] for label in self.issues[repo][number]["labels"]]

    def set_labels(self, repo: str, number: int, names: list[str]) -> None:
        with self.lock:
            issue = self.issues[repo][number]
            issue["labels"] = [{"name": n} for n in names]
            issue["updated_at"] = self._tick()

    def fail(self, method: str, pattern: str, status: int = 500, **kwargs: object) -> Fault:
        fault = Fault(method, pattern, status, **kwargs)  # type: ignore[arg-type]
        self.faults.append(fault)
        return fault

    def sent(self, method: str | None = None, pattern: str = "") -> list[Request]:
        return [
            r
            for r in self.requests
            if (method is None or r.method == method) and re.search(pattern, r.path)
        ]

    # -- serving ---------------------------------------------------------------------------

    def _handle(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        parts = urlsplit(handler.path)
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        length = int(handler.headers.get("content-length") or 0)
        raw = handler.rfile.read(length) if length else b""
        body = json.loads(raw) if raw else None
        headers = {k.lower(): v for k, v in handler.headers.items()}
        record = Request(method, parts.path, query, headers, body)
        with self.lock:
            self.requests.append(record)
            fault = self._fault(method, parts.path + ("?" + parts.query if parts.query else ""))
        if fault is not None and fault.after:
            fault, delay = None, fault.delay
        else:
            delay = 0.0
        if fault is not None:
            if fault.delay:
                time.sleep(fault.delay)
            self._send(
                handler, record, fault.status, fault.body or {"message": "fault"}, fault.headers
            )
            return
        auth = headers.get("authorization", "")
        token = auth.split(" ", 1)[1] if " " in auth else ""
        login = self.tokens.get(token)
        if login is None:
            self._send(handler, record, 401, {"message": "Bad credentials"})
            return
        with self.lock:
            status, data, extra = self._route(method, parts.path, query, body, login)
        if delay:
            time.sleep(delay)
        if method == "GET" and status == 200:
            data, link = self._page(parts.path, query, data)
            if link:
                extra["Link"] = link
        self._send(handler, record, status, data, extra, etag=method == "GET" and status == 200)

    def _fault(self, method: str, target: str) -> Fault | None:
        for fault in self.faults:
            if fault.times > 0 and fault.method == method and re.search(fault.pattern, target):
                fault.times -= 1
                return fault
        return None

    def _page(self, path: str, query: dict[str, str], data: object) -> tuple[object, str | None]:
        if not isinstance(data, list):
            return data, None
        per_page = min(int(query.get("per_page", 30)), self.page_size)
        page = int(query.get("page", 1))
        chunk = data[(page - 1) * per_page : page * per_page]
        link = None
        if page * per_page < len(data):
            nxt = {**query, "page": str(page + 1)}
            link = f'<{self.url}{path}?{urlencode(nxt)}>; rel="next"'
        return chunk, link

    def _route(
        self, method: str, path: str, query: dict, body: object, login: str
    ) -> tuple[int, object, dict]:
        if method == "GET" and path == "/user":
            return 200, {"login": login, "id": 1}, {}
        m = re.fullmatch(r"/orgs/([^/]+)/repos", path)
        if m and method == "GET":
            if m.group(1) not in self.orgs:
                return 404, {"message": "Not Found"}, {}
            return 200, self.orgs[m.group(1)], {}
        m = re.fullmatch(
            r"/repos/([^/]+/[^/]+)/issues(?:/(\d+))?(/comments|/labels(?:/(.+))?)?", path
        )
        if not m:
            return 404, {"message": "Not Found"}, {}
        repo, number, tail, label = m.group(1), m.group(2), m.group(3), m.group(4)
        if repo not in self.issues:
            return 404, {"message": "Not Found"}, {}
        if number is None:
            if method != "GET":
                return 405, {"message": "no"}, {}
            items = sorted(self.issues[repo].values(), key=lambda i: -i["number"])
            state = query.get("state", "open")
            if state != "all":
                items = [i for i in items if i["state"] == state]
            if query.get("labels"):
                wanted = {w.strip() for w in query["labels"].split(",")}
                items = [i for i in items if wanted <= {x["name"] for x in i["labels"]}]
            return 200, items, {}
        issue = self.issues[repo].get(int(number))
        if issue is None:
            return 404, {"message": "Not Found"}, {}
        n = int(number)
        if tail is None and method == "GET":
            return 200, issue, {}
        if tail == "/comments":
            if method == "GET":
                return 200, list(self.comments[(repo, n)]), {}
            if method == "POST" and isinstance(body, dict) and isinstance(body.get("body"), str):
                return 201, self._add_comment(repo, n, body["body"], login, "OWNER"), {}
            return 422, {"message": "Validation Failed"}, {}
        if tail == "/labels" and method == "POST":
            names = body.get("labels") if isinstance(body, dict) else None
            if not isinstance(names, list):
                return 422, {"message": "Validation Failed"}, {}
            for name in names:
                if name not in [x["name"] for x in issue["labels"]]:
                    issue["labels"].append({"name": name})
            issue["updated_at"] = self._tick()
            return 200, issue["labels"], {}
        if tail and tail.startswith("/labels/") and method == "DELETE":
            name = unquote(label)
            if name not in [x["name"] for x in issue["labels"]]:
                return 404, {"message": "Label does not exist"}, {}
            issue["labels"] = [x for x in issue["labels"] if x["name"] != name]
            issue["updated_at"] = self._tick()
            return 200, issue["labels"], {}
        return 404, {"message": "Not Found"}, {}

    def _send(
        self,
        handler: BaseHTTPRequestHandler,
        record: Request,
        status: int,
        data: object,
        headers: dict | None = None,
        etag: bool = False,
    ) -> None:
        payload = json.dumps(data).encode()
        out = {"Content-Type": "application/json", **(headers or {})}
        if etag:
            tag = '"' + hashlib.sha1(payload + out.get("Link", "").encode()).hexdigest() + '"'
            out["ETag"] = tag
            if record.headers.get("if-none-match") == tag:
                # Like GitHub, a 304 has no body; it omits Link too, to prove the cache keeps it.
                status, payload = 304, b""
                out.pop("Link", None)
                out.pop("Content-Type", None)
        record.status = status
        handler.send_response(status)
        for key, value in out.items():
            handler.send_header(key, value)
        handler.send_header("Content-Length", str(len(payload)))
        handler.end_headers()
        if payload:
            handler.wfile.write(payload)
