"""``evopolicy-mcp serve``: the MCP server over stdio or streamable HTTP, from the command line."""

from __future__ import annotations

import argparse
import logging
import os
import socket
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import anyio

from evopolicy_mcp.cli.judge import detached_judge
from evopolicy_mcp.cli.options import add_run_arguments, run_rule_arguments
from evopolicy_mcp.host.authority import Host
from evopolicy_mcp.kernel.sandbox import Isolation
from evopolicy_mcp.server.app import build_server
from evopolicy_mcp.server.echoes import BoundedLines
from evopolicy_mcp.server.stdio import run_stdio
from evopolicy_mcp.store.database import default_data_dir

__all__ = ["add_serve_arguments", "cmd_serve", "serve"]

log = logging.getLogger(__name__)

HTTP_MAX_RUNS = 32  # a server on a port: anyone who reaches it could start runs


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``evopolicy-mcp serve``."""
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="where run records live (default: $EVOPOLICY_DATA_DIR or ~/.local/share/evopolicy-mcp)",
    )
    parser.add_argument(
        "--tasks-dir",
        type=Path,
        action="append",
        default=[],
        help="extra directory of task files (repeatable; also $EVOPOLICY_TASKS)",
    )
    parser.add_argument("--task", help="with --run: bind this server to one run of this task")
    parser.add_argument("--run", help="with --task: the name of the bound run")
    parser.add_argument(
        "--max-runs",
        type=int,
        default=None,
        help=f"most runs agents may start (default: {HTTP_MAX_RUNS} over HTTP, no cap over stdio)",
    )
    parser.add_argument(
        "--seed", type=int, default=None, help="fixed seed for reproducible benchmark runs"
    )
    parser.add_argument(
        "--program-root",
        type=Path,
        default=None,
        help="submit_policy's program_dir must lie in this folder (default: the working "
        "directory the server starts in)",
    )
    run_rule_arguments(parser)
    parser.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    parser.add_argument("--host", default="127.0.0.1", help="HTTP address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8765, help="HTTP port (default 8765)")
    parser.add_argument(
        "--fd",
        type=int,
        default=None,
        help="HTTP: serve on this inherited listening socket instead of --host/--port "
        "(how `agent run` starts a run's server)",
    )
    parser.add_argument(
        "--token",
        action="append",
        default=None,
        help="HTTP bearer token (default: $EVOPOLICY_TOKEN; generated when --host is not "
        "loopback); repeat it to give each client a token of its own: each client's runs "
        "are then its own",
    )
    parser.add_argument(
        "--clients-from-stdin",
        action="store_true",
        help="HTTP: serve only the runs bound, one JSON line each on stdin, to their clients' "
        "tokens by the launcher that started this server; stop when stdin closes (how "
        "`agent sweep` serves all its agents from one server)",
    )
    add_run_arguments(parser)


def socket_address(fd: int) -> tuple[str, int]:
    """The address a listening TCP socket, open as ``fd``, is bound to."""
    with socket.socket(fileno=os.dup(fd)) as sock:
        host, port = sock.getsockname()[:2]
    return str(host), int(port)


def cmd_serve(args: argparse.Namespace) -> int:
    return serve(args)


def _log_to_stderr() -> None:
    # Before MCPServer configures logging, so ours wins; stdout is the stdio wire.
    # Every line is bounded: a log line never repeats much of what a client sent.
    if not logging.getLogger().handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(BoundedLines("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        logging.basicConfig(level=logging.INFO, handlers=[handler])


def _host_factory(args: argparse.Namespace) -> Callable[[], Host]:
    data_dir = (args.data_dir or default_data_dir()).expanduser().resolve()
    bind = (args.task, args.run) if args.task is not None else None
    shared = bool(getattr(args, "clients_from_stdin", False))
    program_root = (args.program_root or Path.cwd()).expanduser().resolve()

    from evopolicy_mcp.server.http_auth import is_loopback

    def make() -> Host:
        return Host(
            data_dir,
            tasks_dirs=tuple(args.tasks_dir),
            workers=args.workers,
            executor=args.executor,
            ray_address=args.ray_address,
            seed=args.seed,
            finish=args.finish,
            storage_mb=args.storage_mb,
            bind=bind,
            bound_clients=shared,
            max_runs=args.max_runs
            if args.max_runs is not None or args.transport != "http"
            else HTTP_MAX_RUNS,
            isolation=Isolation(strict=args.isolation == "strict"),
            # Over HTTP beyond loopback the client is elsewhere: its paths mean nothing here.
            allow_program_dir=args.transport == "stdio" or is_loopback(args.host),
            program_root=program_root,
            # Judging outlives this server: a client may quit right after finalize. A shared
            # server judges itself, on its one executor: its launcher keeps it up meanwhile.
            hand_off=None if shared else detached_judge(data_dir, args.tasks_dir, args),
        )

    return make


def _leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def serve(args: argparse.Namespace) -> int:
    """Run the MCP server until the client disconnects (stdio) or it is interrupted."""
    from evopolicy_mcp.server.http_auth import resolve_token, serve_http

    _log_to_stderr()
    if (args.task is None) != (args.run is None):
        print("evopolicy-mcp serve: --task and --run go together", file=sys.stderr)
        return 2
    root = args.program_root
    if root is not None and not root.expanduser().is_dir():
        print(f"evopolicy-mcp serve: error: program root {root} is not a folder", file=sys.stderr)
        return 1
    if args.fd is not None:
        if args.transport != "http":
            print("evopolicy-mcp serve: --fd needs --transport http", file=sys.stderr)
            return 2
        try:
            args.host, args.port = socket_address(args.fd)
        except OSError as exc:
            print(f"evopolicy-mcp serve: --fd {args.fd}: {exc.strerror}", file=sys.stderr)
            return 2
    if args.clients_from_stdin and (
        args.transport != "http" or args.token or args.task is not None
    ):
        print(
            "evopolicy-mcp serve: --clients-from-stdin needs --transport http, and takes "
            "neither --token nor --task/--run (each client's run comes on stdin)",
            file=sys.stderr,
        )
        return 2
    factory = _host_factory(args)
    try:
        if args.clients_from_stdin:
            return _serve_bound_clients(args, factory)
        if args.transport == "stdio":
            # The host starts once the transport has moved fd 1 off the wire, so policy
            # processes it forks cannot inherit the protocol stream.
            anyio.run(run_stdio, build_server(factory))
            return 0
        given = args.token or [t for t in [os.environ.get("EVOPOLICY_TOKEN")] if t]
        token, generated = resolve_token(args.host, given[0] if len(given) == 1 else None)
        tokens = given if len(given) > 1 else [token] if token else []
        with factory() as host:
            if generated:
                print(f"evopolicy-mcp: bearer token for this server: {token}", file=sys.stderr)
            where = f"http://{args.host}:{args.port}/mcp"
            auth = "needs 'Authorization: Bearer <token>'" if tokens else "loopback only, no token"
            print(f"evopolicy-mcp: serving MCP at {where} ({auth})", file=sys.stderr, flush=True)
            served = serve_http(build_server(host), args.host, args.port, tokens, fd=args.fd)
            return 0 if served else 1
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a start-up failure (bad data dir, bad task file) is one line
        leaf = _leaf(exc)
        log.debug("server stopped", exc_info=exc)
        print(f"evopolicy-mcp serve: error: {leaf}", file=sys.stderr)
        return 1


def _serve_bound_clients(args: argparse.Namespace, factory: Callable[[], Host]) -> int:
    """HTTP for the clients its launcher binds on stdin (:mod:`evopolicy_mcp.server.control`)."""
    from evopolicy_mcp.server.control import follow
    from evopolicy_mcp.server.http_auth import Tokens, serve_http

    tokens, stop = Tokens(), threading.Event()
    with factory() as host:
        follow(sys.stdin, host, tokens, stop)
        where = f"http://{args.host}:{args.port}/mcp"
        print(
            f"evopolicy-mcp: serving MCP at {where} to the clients bound on stdin",
            file=sys.stderr,
            flush=True,
        )
        served = serve_http(build_server(host), args.host, args.port, tokens, fd=args.fd, stop=stop)
        return 0 if served else 1
