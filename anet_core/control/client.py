"""The CLI's side of the control plane: a small synchronous client with the control token."""

from __future__ import annotations

import http.client
import json
from typing import Any

from anet_core.errors import AnetError
from anet_core.settings import DataPaths

NOT_RUNNING_HINT = "start it with `anet up`"


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

    def _endpoint(self) -> tuple[str, int, str]:
        try:
            address = self.paths.control_addr.read_text().strip()
            token = self.paths.control_token.read_text().strip()
        except FileNotFoundError:
            raise AnetError("daemon-not-running",
                            f"the node in {self.paths.root} is not running",
                            hint=NOT_RUNNING_HINT) from None
        host, _, port = address.rpartition(":")
        return host, int(port), token

    def request(self, method: str, path: str, body: Any = None) -> Any:
        host, port, token = self._endpoint()
        headers = {"Host": f"{host}:{port}", "Authorization": f"Bearer {token}"}
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
            raise AnetError("daemon-not-running",
                            f"the node in {self.paths.root} is not running "
                            f"(nothing listens on {host}:{port})", hint=NOT_RUNNING_HINT) from None
        except OSError as error:
            raise AnetError("daemon-unreachable",
                            f"the daemon at {host}:{port} did not answer: {error}",
                            hint="see the log with `tail logs/anetd.log` in the data "
                                 "directory") from None
        finally:
            connection.close()
        return answer(method, path, response.status, response.getheader("Content-Type", ""),
                      data)

    def get(self, path: str) -> Any:
        return self.request("GET", path)

    def post(self, path: str, body: Any = None) -> Any:
        return self.request("POST", path, {} if body is None else body)
