"""A deployment shaped like ZeroClaw's published A2A surface, as its documentation shows it
(https://github.com/zeroclaw-labs/zeroclaw, docs/book/src/gateway/a2a-discovery.md): the catalog
at /.well-known/agents-card.json, a card per alias, and POST /a2a/{alias} answering only
SendMessage, with its responses and errors byte for byte where the documentation gives them.

``python -m tests.a2a.zeroclaw_peer --port N --token-file FILE [--log FILE]``: every request it
receives is appended to the log as one JSON line (method, path, Authorization present, body).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

from aiohttp import web

VERSION = "0.8.6"
ALIASES = {
    "agent_alpha": [
        {"id": "zeroclaw", "name": "zeroclaw",
         "description": "Help users operate and interact with their ZeroClaw agent instance.",
         "tags": ["operations", "cli", "gateway"]},
        {"id": "changelog-generation", "name": "changelog-generation",
         "description": "Changelog generation for ZeroClaw releases.",
         "tags": ["changelog", "release", "automation"]},
    ],
    "agent_beta": [
        {"id": "github-issue-triage", "name": "github-issue-triage",
         "description": "Issue triage and lifecycle management agent for ZeroClaw.",
         "tags": ["github", "issues", "triage"]},
    ],
}
UNAUTHORIZED = {"error": "Unauthorized — pair first via POST /pair, then send Authorization: "
                         "Bearer <token>"}
CAPABILITIES = {"streaming": False, "pushNotifications": False, "extendedAgentCard": False}
TOKEN = web.AppKey("token", str)
BASE = web.AppKey("base", str)
LOG = web.AppKey("log", Path)


def _interface(url: str, binding: str = "JSONRPC") -> dict[str, str]:
    return {"url": url, "protocolBinding": binding, "protocolVersion": "1.0"}


def catalog(base: str) -> dict[str, Any]:
    return {
        "name": "ZeroClaw agents",
        "description": "Discovery catalog enumerating published A2A agents on this ZeroClaw "
                       "install. Not a runnable agent; each entry below has its own A2A card "
                       "and endpoint. Skills are aggregated from published agents and tagged "
                       "with the alias that owns them.",
        "supportedInterfaces": [_interface(f"{base}/.well-known/agents-card.json", "catalog")]
        + [_interface(f"{base}/a2a/{alias}") for alias in sorted(ALIASES)],
        "version": VERSION,
        "capabilities": CAPABILITIES,
        "defaultInputModes": ["text"],
        "defaultOutputModes": ["text"],
        "skills": [{**skill, "id": f"{alias}/{skill['id']}", "tags": [*skill["tags"], alias]}
                   for alias, skills in sorted(ALIASES.items()) for skill in skills],
    }


def alias_card(base: str, alias: str) -> dict[str, Any]:
    return {"name": alias, "description": f"ZeroClaw agent '{alias}'.",
            "supportedInterfaces": [_interface(f"{base}/a2a/{alias}")], "version": VERSION,
            "capabilities": CAPABILITIES, "defaultInputModes": ["text"],
            "defaultOutputModes": ["text"], "skills": ALIASES[alias]}


def rpc_error(request_id: Any, code: int, message: str, status: int = 200,
              data: Any = None) -> web.Response:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return web.json_response({"jsonrpc": "2.0", "id": request_id, "error": error},
                             status=status)


def _log(request: web.Request, body: bytes) -> None:
    entry = {"method": request.method, "path": request.path,
             "authorized": "Authorization" in request.headers,
             "body": body.decode(errors="replace")}
    with open(request.app[LOG], "a", encoding="utf-8") as log:
        log.write(json.dumps(entry) + "\n")


async def task(request: web.Request) -> web.Response:
    body = await request.read()
    _log(request, body)
    if request.headers.get("Authorization") != f"Bearer {request.app[TOKEN]}":
        return web.json_response(UNAUTHORIZED, status=401)
    alias = request.match_info["alias"]
    if alias not in ALIASES:
        return web.Response(status=404)
    try:
        call = json.loads(body)
        assert isinstance(call, dict) and "method" in call
    except (ValueError, AssertionError):
        return rpc_error(None, -32700, "Parse error: expected a JSON-RPC 2.0 request", 400)
    request_id = call.get("id")
    if call.get("jsonrpc") != "2.0":
        return rpc_error(request_id, -32600, 'Invalid request: jsonrpc must be "2.0"', 400)
    version = request.headers.get("A2A-Version", "")
    if version != "1.0":
        return rpc_error(request_id, -32602, f"Unsupported A2A version '{version}': this server "
                         "only speaks A2A 1.0", data={"reason": "VERSION_NOT_SUPPORTED"})
    if call["method"] != "SendMessage":
        return rpc_error(request_id, -32601,
                         "Method not found: only SendMessage is supported on this build")
    message = (call.get("params") or {}).get("message") or {}
    texts = [part["text"] for part in message.get("parts", [])
             if isinstance(part, dict) and part.get("text")]
    if not texts:
        return rpc_error(request_id, -32602, "Invalid params: message has no text parts")
    prompt = "\n".join(texts)
    answer = "PONG" if prompt == "Reply with PONG" else f"{alias}: {prompt}"
    return web.json_response({"id": request_id, "jsonrpc": "2.0", "result": {"task": {
        "id": str(uuid.uuid4()), "contextId": f"a2a_{alias}_{uuid.uuid4()}",
        "status": {"state": "TASK_STATE_COMPLETED"},
        "artifacts": [{"artifactId": str(uuid.uuid4()), "parts": [{"text": answer}]}]}}})


async def dashboard(request: web.Request) -> web.Response:
    """ZeroClaw answers any other GET with its web dashboard."""
    return web.Response(text="<!doctype html><title>ZeroClaw</title>", content_type="text/html")


def build_app(base: str, token: str, log: Path) -> web.Application:
    app = web.Application()
    app[TOKEN], app[BASE], app[LOG] = token, base, log

    async def catalog_route(request: web.Request) -> web.Response:
        _log(request, b"")
        return web.json_response(catalog(request.app[BASE]))

    async def card_route(request: web.Request) -> web.Response:
        _log(request, b"")
        alias = request.match_info["alias"]
        if alias not in ALIASES:
            return web.Response(status=404)
        return web.json_response(alias_card(request.app[BASE], alias))

    app.add_routes([
        web.get("/.well-known/agents-card.json", catalog_route),
        web.get("/a2a/.well-known/agents-card.json", catalog_route),
        web.get("/a2a/{alias}/.well-known/agent-card.json", card_route),
        web.post("/a2a/{alias}", task),
        web.get("/{tail:.*}", dashboard),
    ])
    return app


async def serve(port: int, token: str, log: Path) -> None:
    runner = web.AppRunner(build_app(f"http://127.0.0.1:{port}", token, log))
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    await asyncio.Event().wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--token-file", type=Path, required=True)
    parser.add_argument("--log", type=Path, required=True)
    args = parser.parse_args()
    asyncio.run(serve(args.port, args.token_file.read_text().strip(), args.log))
