# SPDX-License-Identifier: MIT
"""A user-space Ethernet switch that delays every frame: the "delayed link" of run.sh where
the kernel has no netem. Runs in the bridge namespace in place of the kernel bridge, on the
namespace's ends of the nodes' veth pairs:
    relay.py <one-way delay ms> <port> [port...]
Each frame received on a port is sent, <delay> ms later and in arrival order, to the port
its destination MAC was last seen on (every other port while unknown or broadcast).
Frames are read and written with the virtio-net header (PACKET_VNET_HDR): veth hands over
TCP segmentation-offloaded packets and unfinished checksums, which the header carries on to
the other veth as they are. Ends on SIGTERM."""
import collections
import select
import signal
import socket
import sys
import time

SOL_PACKET, PACKET_VNET_HDR, PACKET_OUTGOING, ETH_P_ALL = 263, 15, 4, 0x0003
SO_RCVBUFFORCE = 33
VNET_HDR = 10  # struct virtio_net_hdr


def main():
    delay = float(sys.argv[1]) / 1000.0
    ports = sys.argv[2:]
    socks = []
    for name in ports:
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        s.setsockopt(SOL_PACKET, PACKET_VNET_HDR, 1)
        # room for a burst while this process is busy: the kernel drops what does not fit,
        # and TCP then waits for a retransmission timeout (200 ms at least)
        s.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 64 << 20)
        s.bind((name, 0))
        s.setblocking(False)
        socks.append(s)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    where = {}  # MAC -> port index
    queue = collections.deque()  # (due, from port, frame with its vnet header)
    print("relay: %d ports, %.1f ms one way" % (len(ports), delay * 1000), flush=True)
    while True:
        timeout = max(0.0, queue[0][0] - time.monotonic()) if queue else 1.0
        ready, _, _ = select.select(socks, [], [], timeout)
        now = time.monotonic()
        for s in ready:
            i = socks.index(s)
            while True:
                try:
                    frame, addr = s.recvfrom(70000)
                except BlockingIOError:
                    break
                if addr[2] == PACKET_OUTGOING:  # what this relay sent on this port
                    continue
                where[frame[VNET_HDR + 6:VNET_HDR + 12]] = i
                queue.append((now + delay, i, frame))
        while queue and queue[0][0] <= time.monotonic():
            _, i, frame = queue.popleft()
            dst = frame[VNET_HDR:VNET_HDR + 6]
            targets = [where[dst]] if dst in where else range(len(socks))
            for j in targets:
                if j != i:
                    try:
                        socks[j].send(frame)
                    except OSError as e:  # a full queue drops the frame, as a switch would
                        print("relay: %s: %s" % (ports[j], e), file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
