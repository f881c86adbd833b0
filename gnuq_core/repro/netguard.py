"""Refuse network connections to anything but this machine.

The book and the tests must never fetch anything (models, data, fonts). ``install()``
patches ``socket.socket.connect`` so that a connection to a non-loopback address raises
:class:`NetworkBlocked` naming the address. The test suite installs it in its own
process and, through ``tests/netguard/sitecustomize.py``, in every Python subprocess it
starts (chapter kernels included).
"""

from __future__ import annotations

import ipaddress
import socket

_original_connect = socket.socket.connect


class NetworkBlocked(ConnectionError):
    """A connection to a non-local address was attempted."""


def _is_local(address: object) -> bool:
    if not isinstance(address, tuple):  # AF_UNIX paths and the like
        return True
    host = str(address[0])
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name other than localhost would need DNS: not local


def _guarded_connect(self: socket.socket, address: object) -> None:
    if not _is_local(address):
        raise NetworkBlocked(f"network access to {address!r} attempted while the network guard is on; "
                             "gnuq must not fetch anything during `make book` or `make test` "
                             "(set HF_HUB_OFFLINE=1 and load models and data from local files)")
    return _original_connect(self, address)


def install() -> None:
    """Turn the guard on in this process."""
    socket.socket.connect = _guarded_connect  # type: ignore[method-assign]


def uninstall() -> None:
    """Turn the guard off."""
    socket.socket.connect = _original_connect  # type: ignore[method-assign]
