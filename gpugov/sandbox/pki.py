"""Throw-away PKI for the sandbox control plane.

kube-apiserver needs a serving certificate, a CA for client certificates and a
service-account key pair. We mint our own (instead of letting the apiserver
self-sign) so that clients can verify the server against a known CA and log
in with an admin client certificate in the ``system:masters`` group, which
RBAC always allows: the same setup envtest uses.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# Long enough for a `gpugov sandbox up` left running for a while; the files
# never leave the sandbox's own directory.
_VALIDITY = datetime.timedelta(days=365)
# Tolerate small clock differences between cert creation and first use.
_BACKDATE = datetime.timedelta(hours=1)

ADMIN_USER = "gpugov-admin"
ADMIN_GROUP = "system:masters"

# First address of --service-cluster-ip-range (10.0.0.0/24): the ClusterIP of
# the `kubernetes` Service, which the serving cert should cover.
SERVICE_IP = "10.0.0.1"


@dataclass(frozen=True)
class PKIFiles:
    """Paths of all PEM files the control plane and its clients use."""

    ca_cert: Path
    serving_cert: Path
    serving_key: Path
    admin_cert: Path
    admin_key: Path
    sa_public_key: Path
    sa_private_key: Path
    # The aggregation layer: the apiserver proxies to extension API servers (Kueue's
    # visibility API) with this client cert, which they check against the front-proxy CA.
    front_proxy_ca_cert: Path
    front_proxy_client_cert: Path
    front_proxy_client_key: Path


def _new_key() -> ec.EllipticCurvePrivateKey:
    # EC P-256: as safe as RSA-2048 for this purpose and much faster to generate.
    return ec.generate_private_key(ec.SECP256R1())


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attributes.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attributes)


def _builder(subject: x509.Name, issuer: x509.Name, public_key: object) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)  # type: ignore[arg-type]
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + _VALIDITY)
    )


def _leaf_key_usage() -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        key_encipherment=False,
        content_commitment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=False,
        crl_sign=False,
        encipher_only=False,
        decipher_only=False,
    )


FRONT_PROXY_CLIENT = "front-proxy-client"


def _make_ca(common_name: str = "gpugov-sandbox-ca") -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = _new_key()
    name = _name(common_name)
    cert = (
        _builder(name, name, key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_encipherment=False,
                content_commitment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )
    return cert, key


def _make_leaf(
    ca_cert: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    subject: x509.Name,
    usage: x509.ObjectIdentifier,
    san: list[x509.GeneralName] | None = None,
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = _new_key()
    builder = (
        _builder(subject, ca_cert.subject, key.public_key())
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_leaf_key_usage(), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    )
    if san:
        builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
    return builder.sign(ca_key, hashes.SHA256()), key


def _serving_san() -> list[x509.GeneralName]:
    dns = ["localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"]
    ips = ["127.0.0.1", SERVICE_IP]
    return [x509.DNSName(d) for d in dns] + [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]


def _cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _key_pem(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _write(path: Path, data: bytes, private: bool = False) -> Path:
    path.write_bytes(data)
    if private:
        path.chmod(0o600)
    return path


def generate_pki(directory: Path) -> PKIFiles:
    """Create CA, serving cert, admin client cert and SA keys under ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_cert, ca_key = _make_ca()
    serving_cert, serving_key = _make_leaf(
        ca_cert, ca_key, _name("kube-apiserver"), ExtendedKeyUsageOID.SERVER_AUTH, _serving_san()
    )
    admin_cert, admin_key = _make_leaf(ca_cert, ca_key, _name(ADMIN_USER, ADMIN_GROUP), ExtendedKeyUsageOID.CLIENT_AUTH)
    # Service-account tokens are signed with RSA: every Kubernetes release and
    # every token consumer supports RS256.
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    sa_public = sa_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    proxy_ca_cert, proxy_ca_key = _make_ca("gpugov-sandbox-front-proxy-ca")
    proxy_cert, proxy_key = _make_leaf(
        proxy_ca_cert, proxy_ca_key, _name(FRONT_PROXY_CLIENT), ExtendedKeyUsageOID.CLIENT_AUTH
    )
    _write(directory / "ca.key", _key_pem(ca_key), private=True)  # issues the components' serving certs
    return PKIFiles(
        ca_cert=_write(directory / "ca.crt", _cert_pem(ca_cert)),
        serving_cert=_write(directory / "apiserver.crt", _cert_pem(serving_cert)),
        serving_key=_write(directory / "apiserver.key", _key_pem(serving_key), private=True),
        admin_cert=_write(directory / "admin.crt", _cert_pem(admin_cert)),
        admin_key=_write(directory / "admin.key", _key_pem(admin_key), private=True),
        sa_public_key=_write(directory / "sa.pub", sa_public),
        sa_private_key=_write(directory / "sa.key", _key_pem(sa_key), private=True),
        front_proxy_ca_cert=_write(directory / "front-proxy-ca.crt", _cert_pem(proxy_ca_cert)),
        front_proxy_client_cert=_write(directory / "front-proxy-client.crt", _cert_pem(proxy_cert)),
        front_proxy_client_key=_write(directory / "front-proxy-client.key", _key_pem(proxy_key), private=True),
    )


def issue_serving_cert(pki_dir: Path, out_dir: Path, dns_names: list[str], ips: list[str]) -> tuple[Path, Path]:
    """A server cert signed by the sandbox CA, written as ``tls.crt``/``tls.key`` in ``out_dir``.

    For the components the apiserver calls back (Kueue's webhooks): their
    webhook configurations carry the sandbox CA as caBundle.
    """
    ca_cert = x509.load_pem_x509_certificate((pki_dir / "ca.crt").read_bytes())
    ca_key = serialization.load_pem_private_key((pki_dir / "ca.key").read_bytes(), password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError(f"{pki_dir / 'ca.key'} is not the sandbox's EC CA key")
    san: list[x509.GeneralName] = [x509.DNSName(d) for d in dns_names]
    san += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
    cert, key = _make_leaf(ca_cert, ca_key, _name(dns_names[0] if dns_names else ips[0]), ExtendedKeyUsageOID.SERVER_AUTH, san)
    out_dir.mkdir(parents=True, exist_ok=True)
    return _write(out_dir / "tls.crt", _cert_pem(cert)), _write(out_dir / "tls.key", _key_pem(key), private=True)


def identity_kubeconfig(admin_kubeconfig: Path, pki_dir: Path, out: Path, user: str, groups: list[str]) -> Path:
    """A copy of the admin kubeconfig that authenticates as ``user`` in ``groups`` (a client cert
    from the sandbox CA): how a component acts under the identity it has in a real cluster
    (Kueue's ServiceAccount, the controller manager's user), which admission policies can tell
    apart from a tenant's."""
    ca_cert = x509.load_pem_x509_certificate((pki_dir / "ca.crt").read_bytes())
    ca_key = serialization.load_pem_private_key((pki_dir / "ca.key").read_bytes(), password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError(f"{pki_dir / 'ca.key'} is not the sandbox's EC CA key")
    subject = x509.Name(
        [x509.NameAttribute(NameOID.COMMON_NAME, user)]
        + [x509.NameAttribute(NameOID.ORGANIZATION_NAME, group) for group in groups]
    )
    cert, key = _make_leaf(ca_cert, ca_key, subject, ExtendedKeyUsageOID.CLIENT_AUTH)
    config = yaml.safe_load(admin_kubeconfig.read_text())
    for entry in config["users"]:
        entry["user"] = {
            "client-certificate-data": base64.b64encode(_cert_pem(cert)).decode(),
            "client-key-data": base64.b64encode(_key_pem(key)).decode(),
        }
    out.parent.mkdir(parents=True, exist_ok=True)
    _write(out, yaml.safe_dump(config, sort_keys=False).encode(), private=True)
    return out


def self_signed_pair(common_name: str) -> tuple[bytes, bytes]:
    """A self-signed server cert and key (PEM) for endpoints nobody verifies."""
    key = _new_key()
    name = _name(common_name)
    cert = (
        _builder(name, name, key.public_key())
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(common_name), x509.DNSName("localhost")]), critical=False)
        .sign(key, hashes.SHA256())
    )
    return _cert_pem(cert), _key_pem(key)
