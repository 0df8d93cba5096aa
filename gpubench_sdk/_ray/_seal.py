"""Secrets for the workers, sealed so that Ray only ever carries ciphertext.

Whatever a Ray actor receives as an argument travels through Ray's object store and GCS (and
``runtime_env`` is shown in the dashboard and logs), so an API key must not be an argument in
clear. Each worker makes an X25519 key pair when it starts; its private key never leaves the
worker's process. The driver seals the plan and the secret values to the worker's public key
with a one-time key (X25519 + HKDF-SHA256 + ChaCha20-Poly1305: the construction of libsodium's
sealed boxes and of HPKE's base mode), and only that worker can open them.

Primitives from ``cryptography`` (https://cryptography.io/en/latest/hazmat/primitives/
asymmetric/x25519/ and .../aead/); the construction is documented in RFC 9180 (HPKE).
"""

from __future__ import annotations

import json
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

_INFO = b"gpubench ray sealed plan v1"
_NONCE = bytes(12)  # every key seals exactly one message, so a fixed nonce is safe


def _key(shared: bytes, sender: bytes, recipient: bytes) -> bytes:
    return HKDF(
        algorithm=hashes.SHA256(), length=32, salt=None, info=_INFO + sender + recipient
    ).derive(shared)


def _raw(public: X25519PublicKey) -> bytes:
    return public.public_bytes(Encoding.Raw, PublicFormat.Raw)


class Opener:
    """A worker's key pair: ``public`` is sent to the driver, ``open`` reads what it sealed."""

    def __init__(self) -> None:
        self._private = X25519PrivateKey.generate()
        self.public = _raw(self._private.public_key())

    def open(self, sealed: bytes) -> Any:
        sender, box = sealed[:32], sealed[32:]
        shared = self._private.exchange(X25519PublicKey.from_public_bytes(sender))
        plain = ChaCha20Poly1305(_key(shared, sender, self.public)).decrypt(_NONCE, box, None)
        return json.loads(plain)

    def __repr__(self) -> str:
        return f"Opener(public={self.public.hex()[:16]}...)"


def seal(recipient: bytes, value: Any) -> bytes:
    """``value`` (JSON-able) sealed to the worker whose public key is ``recipient``."""
    ephemeral = X25519PrivateKey.generate()
    sender = _raw(ephemeral.public_key())
    shared = ephemeral.exchange(X25519PublicKey.from_public_bytes(recipient))
    plain = json.dumps(value).encode()
    return sender + ChaCha20Poly1305(_key(shared, sender, recipient)).encrypt(_NONCE, plain, None)
