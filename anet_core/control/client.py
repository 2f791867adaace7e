"""The CLI's side of the control plane: a small synchronous client with the control token."""

from __future__ import annotations

import http.client
import json
from typing import Any

from anet_core.errors import AnetError
from anet_core.settings import DataPaths

NOT_RUNNING_HINT = "start it with `anet up`"


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
        parsed = json.loads(data) if data and "json" in response.getheader("Content-Type", "") \
            else {"message": data.decode(errors="replace").strip()}
        if response.status >= 400:
            if isinstance(parsed, dict) and "error" in parsed:
                raise AnetError(parsed["error"], parsed.get("message", ""),
                                hint=parsed.get("hint", ""), detail=parsed.get("detail", ""))
            raise AnetError("daemon-error",
                            f"{method} {path} answered {response.status}: {parsed.get('message')}")
        return parsed

    def get(self, path: str) -> Any:
        return self.request("GET", path)

    def post(self, path: str, body: Any = None) -> Any:
        return self.request("POST", path, {} if body is None else body)
