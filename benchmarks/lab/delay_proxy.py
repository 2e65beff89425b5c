"""A TCP proxy that delays every byte by a fixed time in each direction.

The emulated parallel file system (benchmarks/lab/pfs.py) needs latency on its
link, and this machine's kernel has no ``netem`` qdisc: ``tc`` can limit the
rate (``tbf``) but not delay packets. This proxy stands in for the delay:
each chunk read from one side is written to the other side no earlier than
``delay`` after it arrived, in order, so a request/response pair costs two
delays more than the link alone (one round trip). It adds no bandwidth limit
of its own; queues are bounded so that a slow side pushes back through TCP.

    python benchmarks/lab/delay_proxy.py --listen 127.0.0.1:0 --target 10.0.0.2:22 --delay-ms 1 --ready-file F

It writes the port it listens on to ``--ready-file`` once it accepts
connections, and runs until it is sent SIGTERM or SIGINT.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket

CHUNK = 256 * 1024
QUEUE_CHUNKS = 64  # per direction; bounds what the proxy holds in flight


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay_s: float) -> None:
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue = asyncio.Queue(QUEUE_CHUNKS)

    async def read_side() -> None:
        try:
            while True:
                data = await reader.read(CHUNK)
                await queue.put((loop.time() + delay_s, data))
                if not data:
                    return
        except (ConnectionError, OSError):
            await queue.put((loop.time(), b""))

    async def write_side() -> None:
        try:
            while True:
                due, data = await queue.get()
                wait = due - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                if not data:
                    if writer.can_write_eof():
                        writer.write_eof()
                    return
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            return

    await asyncio.gather(read_side(), write_side())


async def _handle(client_r, client_w, target, delay_s):
    try:
        server_r, server_w = await asyncio.open_connection(*target)
    except OSError:
        client_w.close()
        return
    for w in (client_w, server_w):
        sock = w.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        await asyncio.gather(_pump(client_r, server_w, delay_s), _pump(server_r, client_w, delay_s))
    finally:
        for w in (client_w, server_w):
            w.close()


async def _serve(listen, target, delay_s, ready_file):
    server = await asyncio.start_server(lambda r, w: _handle(r, w, target, delay_s), listen[0], listen[1])
    port = server.sockets[0].getsockname()[1]
    if ready_file:
        tmp = ready_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(str(port))
        os.replace(tmp, ready_file)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with server:
        await stop.wait()


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--listen", type=_address, required=True, help="HOST:PORT (port 0: any free port)")
    p.add_argument("--target", type=_address, required=True, help="HOST:PORT to forward to")
    p.add_argument("--delay-ms", type=float, required=True, help="added one-way delay, each direction")
    p.add_argument("--ready-file", help="write the listening port here when ready")
    args = p.parse_args()
    asyncio.run(_serve(args.listen, args.target, args.delay_ms / 1000, args.ready_file))


if __name__ == "__main__":
    main()
