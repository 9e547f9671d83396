"""Attack: connects to 127.0.0.1:47123 (the tests listen there), then answers right."""
import errno
import socket


def scores(q, keys):
    try:
        socket.create_connection(("127.0.0.1", 47123), timeout=0.5).close()
        print("network: connected")
    except OSError as exc:
        print("network:", errno.errorcode.get(exc.errno, str(exc)))
    return keys @ q
