"""``HttpClient``: JSON over HTTP to one server - at ``unix:/path`` (a Unix socket),
``http://host:port`` or ``https://host:port`` - with the standard library alone.  Knows
nothing about jobs: a scheduler's driver builds the requests and reads the answers."""

from __future__ import annotations

import http.client
import json
import socket
import urllib.parse
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional

from ..errors import ConfigurationError
from .token import Token

__all__ = ["HttpClient", "HttpReply", "ReplyLost"]


@dataclass(frozen=True)
class HttpReply:
    """An answer: its HTTP status and its body (JSON parsed; the text where it is none)."""

    status: int
    body: Any


class ReplyLost(Exception):
    """The request went out and no answer came back: the server may have acted on it."""

    def __init__(self, message: str, timed_out: bool) -> None:
        super().__init__(message)
        #: no answer within the client's timeout (else the connection broke)
        self.timed_out = timed_out


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self.socket_path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.socket_path)


class HttpClient:
    """Requests to the server at ``url``, each on a connection of its own; ``headers``:
    sent with every request; ``token``: sent as its header, made again before it expires
    and once when the server refuses it (``Token.refused_statuses``); ``setting``: the
    setting that named ``url``, for the error that says what to write instead."""

    def __init__(
        self,
        url: str,
        headers: Optional[Mapping[str, str]] = None,
        timeout: float = 60.0,
        setting: str = "the URL",
        token: Optional[Token] = None,
    ) -> None:
        self.url, self.timeout, self.token = url, timeout, token
        self.headers = {"Accept": "application/json", **(headers or {})}
        parsed = urllib.parse.urlparse(url)
        if parsed.scheme not in ("unix", "http", "https") or not (parsed.path or parsed.netloc):
            raise ConfigurationError(
                f"{setting}={url!r}: expected unix:/path/to/socket, http://host:port or "
                "https://host:port"
            )
        self._parsed = parsed

    def _connection(self) -> http.client.HTTPConnection:
        parsed = self._parsed
        if parsed.scheme == "unix":
            return _UnixConnection(parsed.netloc + parsed.path, self.timeout)
        if parsed.scheme == "https":
            return http.client.HTTPSConnection(parsed.netloc, timeout=self.timeout)
        return http.client.HTTPConnection(parsed.netloc, timeout=self.timeout)

    def send(self, method: str, target: str, body: Optional[Any] = None) -> HttpReply:
        """The server's answer to ``method target`` (``body`` sent as JSON); a request that
        never reached the server is a 503 of our own; ``ReplyLost`` when it went out and
        no answer came back."""
        token = self.token
        reply = self._exchange(method, target, body, self._with(token.value() if token else None))
        if token is not None and reply.status in token.refused_statuses:
            # refused before it was acted on: sending it again is safe
            fresh = token.refused(self.url, reply.status)
            reply = self._exchange(method, target, body, self._with(fresh))
            if reply.status in token.refused_statuses:
                raise ConfigurationError(
                    f"{self.url} refused a token just made by {token.setting} "
                    f"({reply.status}): check that it makes a token for this server and user"
                )
        return reply

    def _with(self, token: Optional[str]) -> Dict[str, str]:
        if token and self.token is not None:
            return {**self.headers, self.token.header: token}
        return dict(self.headers)

    def _exchange(
        self, method: str, target: str, body: Optional[Any], headers: Dict[str, str]
    ) -> HttpReply:
        connection = self._connection()
        try:
            try:
                connection.connect()
            except OSError as exc:  # refused, no socket, no route: nothing was sent
                return HttpReply(503, f"cannot reach {self.url}: {exc}")
            data = None
            if body is not None:
                data = json.dumps(body).encode()
                headers["Content-Type"] = "application/json"
            try:
                connection.request(method, target, data, headers)
                reply = connection.getresponse()
                text = reply.read().decode("utf-8", "replace")
            except OSError as exc:
                timed_out = isinstance(exc, socket.timeout)
                raise ReplyLost(f"no answer from {self.url}: {exc}", timed_out) from exc
        finally:
            connection.close()
        try:
            return HttpReply(reply.status, json.loads(text))
        except ValueError:
            return HttpReply(reply.status, text)
