"""The server log of anet's aiohttp listeners.

aiohttp logs every request it could not parse (a request line or header over its limit, bytes
that are not HTTP) with a full traceback, although the client has already been answered 400,
and so too a body it could not decode (``Content-Encoding: gzip`` on bytes that are not gzip)
when it reads what the handler left unread: a client's mistake, not the server's. This log
writes those as one line and keeps the traceback of everything else.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web import RequestPayloadError


class ServerLog(logging.LoggerAdapter[logging.Logger]):
    """Pass as ``logger=`` to ``web.AppRunner``."""

    def exception(self, msg: object, *args: object, exc_info: Any = True,
                  stack_info: bool = False, stacklevel: int = 1,
                  extra: Mapping[str, object] | None = None) -> None:
        if isinstance(exc_info, HttpProcessingError):
            detail = (exc_info.message or type(exc_info).__name__).splitlines()[0][:200]
            self.warning("event=request-refused status=%d detail=%r context=%r", exc_info.code,
                         detail, str(msg) % args)
            return
        if isinstance(exc_info, RequestPayloadError):
            detail = " ".join(str(exc_info).split())[:200]
            self.warning("event=request-body-unreadable detail=%r context=%r", detail,
                         str(msg) % args)
            return
        super().exception(msg, *args, exc_info=exc_info, stack_info=stack_info,
                          stacklevel=stacklevel, extra=extra)


SERVER_LOG = ServerLog(logging.getLogger("aiohttp.server"), {})
