"""A certificate authority of the tests' own, made with ``cryptography``: server certificates for
127.0.0.1 and client certificates, as PEM files an engine (NATS, PostgreSQL) and the hub load."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALID = datetime.timedelta(days=2)


@dataclass(frozen=True)
class Issued:
    cert: Path
    key: Path


@dataclass
class CertificateAuthority:
    """``CertificateAuthority.create(directory)``; ``ca`` is the file a client trusts."""

    directory: Path
    key: ec.EllipticCurvePrivateKey
    certificate: x509.Certificate

    @property
    def ca(self) -> Path:
        return self.directory / "ca.pem"

    @classmethod
    def create(cls, directory: Path) -> CertificateAuthority:
        directory.mkdir(parents=True, exist_ok=True)
        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "anet test CA")])
        now = datetime.datetime.now(datetime.UTC)
        certificate = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
                       .public_key(key.public_key()).serial_number(x509.random_serial_number())
                       .not_valid_before(now - VALID).not_valid_after(now + VALID)
                       .add_extension(x509.BasicConstraints(ca=True, path_length=None),
                                      critical=True)
                       .sign(key, hashes.SHA256()))
        made = cls(directory, key, certificate)
        made.ca.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
        return made

    def issue(self, name: str, *, server: bool) -> Issued:
        """A certificate for 127.0.0.1 (``server``) or a client named ``name``."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = (x509.CertificateBuilder()
                   .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
                   .issuer_name(self.certificate.subject).public_key(key.public_key())
                   .serial_number(x509.random_serial_number())
                   .not_valid_before(now - VALID).not_valid_after(now + VALID)
                   .add_extension(x509.ExtendedKeyUsage([usage]), critical=False))
        if server:
            builder = builder.add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        certificate = builder.sign(self.key, hashes.SHA256())
        issued = Issued(self.directory / f"{name}.pem", self.directory / f"{name}.key")
        issued.cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
        issued.key.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                                 serialization.PrivateFormat.PKCS8,
                                                 serialization.NoEncryption()))
        issued.key.chmod(0o600)
        return issued
