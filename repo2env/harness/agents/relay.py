"""A loopback relay inside a sandbox: ``127.0.0.1:PORT`` to the proxy's unix socket.

A harness inside the sandbox speaks HTTP to a TCP address; the sandbox has no network, only its own
loopback, and the episode's proxy socket mounted read-only. This relay joins the two byte for byte
(no parsing), so the harness reaches its episode's proxy and nothing else. It runs under the
image's system ``python3 -I -S`` (3.9 and newer, standard library only), as the agent user,
started by the harness's command; ``READY`` is written once it listens. Never imported by repo2env.

argv: port, socket path, ready file.
"""

import os
import socket
import sys
import threading


def pump(source, target):
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            target.sendall(data)
    except OSError:
        pass
    finally:
        for sock, how in ((target, socket.SHUT_WR), (source, socket.SHUT_RD)):
            try:
                sock.shutdown(how)
            except OSError:
                pass


def serve(client, socket_path):
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(socket_path)
    except OSError:
        client.close()
        upstream.close()
        return
    client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    back = threading.Thread(target=pump, args=(upstream, client), daemon=True)
    back.start()
    pump(client, upstream)
    back.join()
    client.close()
    upstream.close()


def main():
    port, socket_path, ready = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    with open(ready + ".tmp", "w") as handle:
        handle.write(str(os.getpid()))
    os.replace(ready + ".tmp", ready)
    while True:
        client, _ = listener.accept()
        threading.Thread(target=serve, args=(client, socket_path), daemon=True).start()


if __name__ == "__main__":
    main()
