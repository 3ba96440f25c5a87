"""An MCP client that no one here wrote -- the official Python SDK (PyPI `mcp`) -- driving
`hcp mcp` over stdio. crates/hcp/tests/mcp.rs runs it with the test world's environment:

    python3 mcp_client.py HCP_BIN            # the owner, a client without elicitation
    python3 mcp_client.py --person HCP_BIN   # an agent's session, a client whose person
                                             # accepts the first question and declines the next

    python3 mcp_client.py --modern HCP_BIN   # `Client(mode="auto")`: discovers and speaks
                                             # 2026-07-28; its person accepts, then declines
    python3 mcp_client.py --http URL TOKEN [auto|legacy]
                                             # the same over Streamable HTTP, the session
                                             # token as the bearer header

It prints one JSON object on stdout: what the server answered at each step, for the Rust
test to assert on. `python3 mcp_client.py --probe` exits 0 when the SDK is importable.
`python3 mcp_client.py --bench HCP_BIN N` measures N calls (BENCHMARKS.md, "MCP").
"""

import asyncio
import json
import os
import sys


def probe() -> int:
    try:
        import mcp  # noqa: F401
        from importlib.metadata import version

        print(version("mcp"))
        return 0
    except Exception as e:  # the Rust test prints the reason it skips
        print(f"the python package `mcp` is not importable: {e}", file=sys.stderr)
        return 1


def texts(result) -> list:
    return [c.text for c in result.content if getattr(c, "type", None) == "text"]


async def drive(hcp: str) -> dict:
    from mcp import ClientSession, StdioServerParameters, MCPError
    from mcp.client.stdio import stdio_client

    out: dict = {}
    params = StdioServerParameters(command=hcp, args=["mcp"], env=dict(os.environ), cwd=os.getcwd())
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            out["server"] = init.server_info.name
            out["tools_list_changed"] = bool(init.capabilities.tools and init.capabilities.tools.list_changed)

            listed = await session.list_tools()
            out["tools"] = sorted(t.name for t in listed.tools)
            by_name = {t.name: t for t in listed.tools}
            for name in ["transit.find", "echo.echo.write"]:
                t = by_name.get(name)
                if t is not None:
                    out[f"tool {name}"] = {
                        "description": t.description,
                        "inputSchema": t.input_schema,
                        "annotations": t.annotations.model_dump(by_alias=True, exclude_none=True)
                        if t.annotations
                        else None,
                    }

            # A read, with a tenant in _meta that must change nothing.
            r = await session.call_tool("transit.find", {"query": "central"}, meta={"tenant": "someone-else"})
            out["read"] = {"isError": r.is_error, "structured": r.structured_content, "text": texts(r)}

            # A confirm write without confirm: refused, exactly `confirm required`.
            r = await session.call_tool("echo.echo.write", {"name": "note.txt", "text": "hello"})
            out["write_unconfirmed"] = {
                "isError": r.is_error,
                "text": texts(r),
                "code": (r.structured_content or {}).get("code"),
            }
            out["file_after_refusal"] = os.path.exists("note.txt")

            # The same with confirm: true runs.
            r = await session.call_tool("echo.echo.write", {"name": "note.txt", "text": "hello", "confirm": True})
            out["write_confirmed"] = {"isError": r.is_error, "structured": r.structured_content}
            with open("note.txt") as f:
                out["file_after_confirm"] = f.read()

            # An unknown tool is a protocol error, not a result.
            try:
                await session.call_tool("nope.nothing", {})
                out["unknown_tool"] = "no error"
            except MCPError as e:
                out["unknown_tool"] = {"code": e.error.code, "message": e.error.message}
    return out


async def person(hcp: str) -> dict:
    """An agent's session (HCP_SESSION in the environment) through a client that declares
    elicitation: the SDK's callback plays the person, accepting once and declining once.
    The SDK checks every successful result against the tool's outputSchema itself."""
    import mcp.types as t
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    answers = iter(["accept", "decline"])
    seen: list = []

    async def on_elicit(context, params):
        seen.append({"mode": params.mode, "message": params.message, "schema": params.requested_schema})
        action = next(answers, "cancel")
        if action == "accept":
            return t.ElicitResult(action="accept", content={"run": True})
        return t.ElicitResult(action=action)

    out: dict = {}
    params = StdioServerParameters(command=hcp, args=["mcp"], env=dict(os.environ), cwd=os.getcwd())
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, elicitation_callback=on_elicit) as session:
            init = await session.initialize()
            out["protocol"] = init.protocol_version
            listed = await session.list_tools()
            out["tools"] = [x.name for x in listed.tools]
            by_name = {x.name: x for x in listed.tools}
            say = by_name.get("echo.echo.say")
            out["say outputSchema"] = say.output_schema if say else None
            wr = by_name.get("echo.echo.write")
            out["write properties"] = sorted((wr.input_schema.get("properties") or {}).keys()) if wr else None

            r = await session.call_tool("echo.echo.say", {"text": "hi"})
            out["say"] = {"isError": r.is_error, "structured": r.structured_content}
            r = await session.call_tool("echo.echo.write", {"name": "a.txt", "text": "accepted"})
            out["write accepted"] = {"isError": r.is_error, "text": texts(r)[:1]}
            out["a.txt"] = open("a.txt").read() if os.path.exists("a.txt") else None
            r = await session.call_tool("echo.echo.write", {"name": "b.txt", "text": "declined"})
            out["write declined"] = {"isError": r.is_error, "text": texts(r)[:1],
                                     "code": (r.structured_content or {}).get("code")}
            out["b.txt exists"] = os.path.exists("b.txt")
            # Not listed for this session: refused by the gate when called by name.
            r = await session.call_tool("transit.find", {"query": "central"})
            out["unlisted"] = {"isError": r.is_error, "code": (r.structured_content or {}).get("code")}
    out["asked"] = seen
    return out


async def through_client(server, mode: str) -> dict:
    """The SDK's high-level `Client` (2.x): `auto` discovers the server and speaks the
    newest revision both know (2026-07-28 with hcp, where the person is asked through an
    input-required result the SDK answers by retrying); `legacy` uses the `initialize`
    handshake (the person asked with `elicitation/create`). The person accepts the first
    question and declines the second."""
    import mcp.types as t
    from mcp import Client

    answers = iter(["accept", "decline"])
    seen: list = []

    async def on_elicit(context, params):
        seen.append({"message": params.message})
        action = next(answers, "cancel")
        if action == "accept":
            return t.ElicitResult(action="accept", content={"run": True})
        return t.ElicitResult(action=action)

    out: dict = {}
    async with Client(server, mode=mode, elicitation_callback=on_elicit) as client:
        out["protocol"] = client.protocol_version
        listed = await client.list_tools()
        out["tools"] = [x.name for x in listed.tools]
        r = await client.call_tool("transit.find", {"query": "central"})
        out["read"] = {"isError": r.is_error, "structured": r.structured_content}
        r = await client.call_tool("echo.echo.write", {"name": "a.txt", "text": "accepted"})
        out["write accepted"] = {"isError": r.is_error, "text": texts(r)[:1]}
        out["a.txt"] = open("a.txt").read() if os.path.exists("a.txt") else None
        r = await client.call_tool("echo.echo.write", {"name": "b.txt", "text": "declined"})
        out["write declined"] = {"isError": r.is_error, "text": texts(r)[:1],
                                 "code": (r.structured_content or {}).get("code")}
        out["b.txt exists"] = os.path.exists("b.txt")
    out["asked"] = len(seen)
    return out


def modern_stdio(hcp: str) -> dict:
    from mcp import StdioServerParameters

    params = StdioServerParameters(command=hcp, args=["mcp"], env=dict(os.environ), cwd=os.getcwd())
    return asyncio.run(through_client(params, "auto"))


def over_http(url: str, token: str, mode: str) -> dict:
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    return asyncio.run(through_client(streamable_http_client(url, http_client=http), mode))


def bench(hcp: str, n: int) -> dict:
    """Sequential calls of `echo.echo.say` through one `hcp mcp` (raw JSON-RPC, so no SDK
    cost is counted), and the same verb through `hcp exec --json` (one process a call).
    Run with HCP_HOME holding the echo pack, active."""
    import statistics
    import subprocess
    import time

    srv = subprocess.Popen([hcp, "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)

    def rpc(i: int, method: str, params: dict) -> dict:
        srv.stdin.write(json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}) + "\n")
        srv.stdin.flush()
        while True:
            m = json.loads(srv.stdout.readline())
            if m.get("id") == i:
                return m

    rpc(0, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}})
    srv.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
    args = {"name": "echo.echo.say", "arguments": {"text": "hi"}}
    for i in range(10):  # warm-up
        assert rpc(1000 + i, "tools/call", args)["result"]["isError"] is False
    mcp_ms = []
    t0 = time.perf_counter()
    for i in range(n):
        t = time.perf_counter()
        r = rpc(2000 + i, "tools/call", args)
        mcp_ms.append((time.perf_counter() - t) * 1000)
        assert r["result"]["isError"] is False, r
    wall = time.perf_counter() - t0
    srv.stdin.close()
    srv.wait()
    exec_ms = []
    for i in range(n):
        t = time.perf_counter()
        subprocess.run([hcp, "exec", "echo.echo.say", "hi", "--json"], check=True, capture_output=True)
        exec_ms.append((time.perf_counter() - t) * 1000)
    q = lambda xs, p: sorted(xs)[min(len(xs) - 1, int(len(xs) * p))]
    return {
        "calls": n,
        "mcp_calls_per_s": round(n / wall, 1),
        "mcp_ms_median": round(statistics.median(mcp_ms), 2),
        "mcp_ms_p90": round(q(mcp_ms, 0.9), 2),
        "exec_ms_median": round(statistics.median(exec_ms), 2),
        "exec_ms_p90": round(q(exec_ms, 0.9), 2),
        "mcp_minus_exec_ms_median": round(statistics.median(mcp_ms) - statistics.median(exec_ms), 2),
    }


def main() -> int:
    if len(sys.argv) == 2 and sys.argv[1] == "--probe":
        return probe()
    if len(sys.argv) == 3 and sys.argv[1] == "--person":
        print(json.dumps(asyncio.run(person(sys.argv[2])), sort_keys=True))
        return 0
    if len(sys.argv) == 3 and sys.argv[1] == "--modern":
        print(json.dumps(modern_stdio(sys.argv[2]), sort_keys=True))
        return 0
    if len(sys.argv) in (4, 5) and sys.argv[1] == "--http":
        mode = sys.argv[4] if len(sys.argv) == 5 else "auto"
        print(json.dumps(over_http(sys.argv[2], sys.argv[3], mode), sort_keys=True))
        return 0
    if len(sys.argv) == 4 and sys.argv[1] == "--bench":
        print(json.dumps(bench(sys.argv[2], int(sys.argv[3])), sort_keys=True))
        return 0
    if len(sys.argv) != 2:
        print("usage: mcp_client.py HCP_BIN | --person HCP_BIN | --probe", file=sys.stderr)
        return 2
    out = asyncio.run(drive(sys.argv[1]))
    print(json.dumps(out, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
