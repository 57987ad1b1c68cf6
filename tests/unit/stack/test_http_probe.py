"""The HTTP readiness probe of the S3 and REST catalog services, against a real local HTTP server."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests

from cdclake.stack.base import http_answers
from cdclake.stack.manager import Probe


class _Status(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # the path is the status to answer: /403 answers 403
        self.send_response(int(self.path.strip("/")))
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Status)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_an_expected_status_is_ready(server: str) -> None:
    assert http_answers(f"{server}/200")
    assert http_answers(f"{server}/403", expected=(200, 403))


def test_another_status_raises_naming_it_and_the_url(server: str) -> None:
    with pytest.raises(requests.HTTPError, match=r"/503 answered 503 Service Unavailable \(expected 200\)"):
        http_answers(f"{server}/503")


def test_the_stack_probe_keeps_what_the_http_probe_saw(server: str) -> None:
    class _Catalog:
        name = "iceberg-rest"

        def ready(self) -> bool:
            return http_answers(f"{server}/500")

    probe = Probe(_Catalog())  # type: ignore[arg-type]
    assert not probe()
    assert probe.last.startswith("HTTPError: ") and "answered 500 Internal Server Error" in probe.last
