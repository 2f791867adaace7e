"""Clients of the control plane, with the control token: a synchronous one for the CLI and an
asynchronous one (``anet mcp``, anything that follows a task while it runs)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from anet_core.errors import AnetError
from anet_core.settings import DataPaths

if TYPE_CHECKING:
    import aiohttp

NOT_RUNNING_HINT = "start it with `anet up`"
UNREACHABLE_HINT = "see the log with `tail logs/anetd.log` in the data directory"
SETTLED_POLL_S = 0.2
"""How often :meth:`ControlClient.settled_task` asks while a task is on its way."""
EVENT_KEEPALIVE_S = 15.0
"""How often the daemon writes a comment on an idle event stream (``: keep-alive``), so that
both ends notice a connection that died."""


def _endpoint(paths: DataPaths) -> tuple[str, int, str]:
    try:
        address = paths.control_addr.read_text().strip()
        token = paths.control_token.read_text().strip()
    except FileNotFoundError:
        raise AnetError("daemon-not-running", f"the node in {paths.root} is not running",
                        hint=NOT_RUNNING_HINT) from None
    host, _, port = address.rpartition(":")
    return host, int(port), token


def _not_listening(paths: DataPaths, host: str, port: int) -> AnetError:
    return AnetError("daemon-not-running", f"the node in {paths.root} is not running "
                     f"(nothing listens on {host}:{port})", hint=NOT_RUNNING_HINT)


def _unreachable(host: str, port: int, error: Exception) -> AnetError:
    return AnetError("daemon-unreachable", f"the daemon at {host}:{port} did not answer: {error}",
                     hint=UNREACHABLE_HINT)


def _headers(host: str, port: int, token: str) -> dict[str, str]:
    return {"Host": f"{host}:{port}", "Authorization": f"Bearer {token}"}


def answer(method: str, path: str, status: int, content_type: str, data: bytes) -> Any:
    """The body of a control-plane answer; a refusal becomes the :class:`AnetError` the route
    raised (``{"error", "message", "hint", "detail"}``), which the CLI prints in one place."""
    try:
        parsed = json.loads(data) if data and "json" in content_type \
            else {"message": data.decode(errors="replace").strip()}
    except ValueError:
        parsed = {"message": f"an answer that is not JSON: {data[:200]!r}"}
        status = max(status, 500)
    if status < 400:
        return parsed
    if isinstance(parsed, dict) and isinstance(parsed.get("error"), str):
        raise AnetError(parsed["error"], parsed.get("message", ""), hint=parsed.get("hint", ""),
                        detail=parsed.get("detail", ""))
    message = parsed.get("message") if isinstance(parsed, dict) else parsed
    raise AnetError("daemon-error", f"{method} {path} answered {status}: {message}")


class ControlClient:
    """Calls the running daemon. Every failure is an :class:`AnetError` the user can act on."""

    def __init__(self, paths: DataPaths, *, timeout: float = 30.0) -> None:
        self.paths = paths
        self.timeout = timeout

    def request(self, method: str, path: str, body: Any = None) -> Any:
        import http.client  # with ssl: for a command that calls the daemon, not for --help

        host, port, token = _endpoint(self.paths)
        headers = _headers(host, port, token)
        payload = None
        if body is not None:
            payload = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        connection = http.client.HTTPConnection(host, port, timeout=self.timeout)
        try:
            connection.request(method, path, body=payload, headers=headers)
            response = connection.getresponse()
            data = response.read()
        except ConnectionRefusedError:
            raise _not_listening(self.paths, host, port) from None
        except OSError as error:
            raise _unreachable(host, port, error) from None
        finally:
            connection.close()
        return answer(method, path, response.status, response.getheader("Content-Type", ""),
                      data)

    def get(self, path: str) -> Any:
        return self.request("GET", path)

    def post(self, path: str, body: Any = None) -> Any:
        return self.request("POST", path, {} if body is None else body)

    def settled_task(self, task_id: str, *, timeout_s: float) -> dict[str, Any]:
        """The task this node sent once it ended or asks for input, or as it is when
        ``timeout_s`` ran out (``anet send --wait``, ``anet pay``)."""
        import time

        from anet_core.wire import TaskState

        deadline = time.monotonic() + timeout_s
        task: dict[str, Any] = self.get(f"/tasks/task/{task_id}")
        while not TaskState(task["status"]["state"]).is_settled \
                and time.monotonic() < deadline:
            time.sleep(SETTLED_POLL_S)
            task = self.get(f"/tasks/task/{task_id}")
        return task


class AsyncControlClient:
    """The same calls on the event loop, and :meth:`events` to follow a stream of server-sent
    events (``GET /tasks/task/<id>/events``). The address and token are read afresh for every
    call, so a daemon started (or restarted) after this client was made is found."""

    def __init__(self, paths: DataPaths, *, timeout: float = 30.0) -> None:
        self.paths = paths
        self.timeout = timeout
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> AsyncControlClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _client(self) -> aiohttp.ClientSession:
        import aiohttp  # the CLI's synchronous client does without it

        if self._session is None:
            self._session = aiohttp.ClientSession()
        return self._session

    def _failed(self, host: str, port: int, error: Exception) -> AnetError:
        import aiohttp

        refused = isinstance(error, aiohttp.ClientConnectorError) \
            and isinstance(error.os_error, ConnectionRefusedError)
        return _not_listening(self.paths, host, port) if refused else \
            _unreachable(host, port, error)

    async def request(self, method: str, path: str, body: Any = None) -> Any:
        import aiohttp

        host, port, token = _endpoint(self.paths)
        try:
            async with self._client().request(
                    method, f"http://{host}:{port}{path}", json=body,
                    headers=_headers(host, port, token),
                    timeout=aiohttp.ClientTimeout(total=self.timeout)) as response:
                data = await response.read()
        except (aiohttp.ClientError, TimeoutError) as error:
            raise self._failed(host, port, error) from None
        return answer(method, path, response.status, response.headers.get("Content-Type", ""),
                      data)

    async def get(self, path: str) -> Any:
        return await self.request("GET", path)

    async def post(self, path: str, body: Any = None) -> Any:
        return await self.request("POST", path, {} if body is None else body)

    async def events(self, path: str) -> AsyncIterator[dict[str, Any]]:
        """Each ``data:`` event of a server-sent event stream, parsed, until the daemon ends the
        stream. Leaving the ``async for`` closes the connection and nothing else."""
        import aiohttp

        host, port, token = _endpoint(self.paths)
        # No total timeout: the stream lasts as long as the task; the daemon's keep-alive
        # comments keep the connection busy, so a read that stalls means a dead daemon.
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=self.timeout,
                                        sock_read=self.timeout + EVENT_KEEPALIVE_S)
        try:
            async with self._client().get(f"http://{host}:{port}{path}", timeout=timeout,
                                          headers=_headers(host, port, token)) as response:
                if response.status >= 400:
                    answer("GET", path, response.status,
                           response.headers.get("Content-Type", ""), await response.read())
                data: list[str] = []
                async for raw in response.content:
                    line = raw.decode().rstrip("\r\n")
                    if line.startswith("data:"):
                        data.append(line[5:].removeprefix(" "))
                    elif not line and data:
                        yield json.loads("\n".join(data))
                        data = []
        except (aiohttp.ClientError, TimeoutError) as error:
            raise self._failed(host, port, error) from None
