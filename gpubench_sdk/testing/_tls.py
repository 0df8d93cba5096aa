"""HTTPS for an emulator whose provider's SDK will not send credentials over plain HTTP (the
Azure SDK refuses a bearer token to an ``http://`` URL): a throwaway CA and a certificate for
loopback, made with trustme, for ``serve(app, tls=...)``."""

from __future__ import annotations

from pathlib import Path

from ._harness import INSTALL_HINT


def throwaway_tls(directory: str | Path) -> tuple[str, str, str]:
    """A throwaway CA and a certificate for 127.0.0.1/localhost signed by it, written to
    ``directory``: returns the paths of (CA bundle, certificate chain, private key). Serve
    with ``serve(app, tls=paths[1:])``; the client trusts ``paths[0]``. Needs trustme."""
    try:
        import trustme
    except ImportError as exc:
        raise ImportError(f"the emulator's TLS needs trustme: {INSTALL_HINT}") from exc
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    paths = root / "ca.pem", root / "server.pem", root / "server.key"
    ca.cert_pem.write_to_path(str(paths[0]))
    cert.private_key_pem.write_to_path(str(paths[2]))
    with paths[1].open("wb") as chain:
        for blob in cert.cert_chain_pems:
            chain.write(blob.bytes())
    return str(paths[0]), str(paths[1]), str(paths[2])
