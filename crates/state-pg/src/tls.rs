//! TLS to the server through rustls (ring), with libpq's meaning of `sslmode`.
//!
//! | `sslmode` | TLS | certificate |
//! |---|---|---|
//! | `disable` | never | — |
//! | `allow`, `prefer` (the default) | when the server offers it | not checked |
//! | `require` | always | not checked, unless `sslrootcert` is given: then as `verify-ca` |
//! | `verify-ca` | always | chain checked against `sslrootcert` |
//! | `verify-full` | always | chain and host name checked |
//!
//! `sslrootcert` is a PEM file or `system` (the operating system's roots); with
//! `verify-*` and no `sslrootcert`, libpq's default `~/.postgresql/root.crt` is read.
//! Unix-domain sockets never use TLS (as with libpq): the kernel is the transport.

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use std::path::PathBuf;
use std::sync::Arc;

/// How the server's certificate is checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verify {
    /// Not at all (`prefer`, `require` without `sslrootcert`): encryption against a
    /// passive listener only, as libpq.
    None,
    /// The chain against these roots, not the host name (`verify-ca`).
    Chain(Roots),
    /// The chain and the host name (`verify-full`).
    Full(Roots),
}

/// Where the trusted roots come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Roots {
    /// A PEM file of CA certificates.
    File(PathBuf),
    /// The operating system's roots (`sslrootcert=system`).
    System,
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn root_store(roots: &Roots) -> Result<RootCertStore, String> {
    let mut store = RootCertStore::empty();
    match roots {
        Roots::File(path) => {
            let certs = CertificateDer::pem_file_iter(path)
                .map_err(|e| format!("cannot read `sslrootcert` `{}`: {e}", path.display()))?;
            for cert in certs {
                let cert = cert.map_err(|e| format!("`sslrootcert` `{}`: {e}", path.display()))?;
                store
                    .add(cert)
                    .map_err(|e| format!("`sslrootcert` `{}`: {e}", path.display()))?;
            }
        }
        Roots::System => {
            let found = rustls_native_certs::load_native_certs();
            for cert in found.certs {
                // A system root rustls cannot parse is skipped, as browsers do.
                let _ = store.add(cert);
            }
        }
    }
    if store.is_empty() {
        return Err("`sslrootcert` holds no CA certificate".into());
    }
    Ok(store)
}

/// The rustls configuration for `verify`.
///
/// # Errors
/// A lowercase reason when the roots cannot be read or hold no certificate.
pub(crate) fn client_config(verify: &Verify) -> Result<ClientConfig, String> {
    let provider = provider();
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("tls: {e}"))?;
    let config = match verify {
        Verify::Full(roots) => builder
            .with_root_certificates(root_store(roots)?)
            .with_no_client_auth(),
        Verify::Chain(roots) => {
            let inner =
                WebPkiServerVerifier::builder_with_provider(Arc::new(root_store(roots)?), provider)
                    .build()
                    .map_err(|e| format!("tls: {e}"))?;
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(ChainOnly { inner }))
                .with_no_client_auth()
        }
        Verify::None => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Unchecked { provider }))
            .with_no_client_auth(),
    };
    Ok(config)
}

/// `verify-ca`: the web PKI verifier, with a name mismatch forgiven.
#[derive(Debug)]
struct ChainOnly {
    inner: Arc<WebPkiServerVerifier>,
}

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self.inner.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// `prefer` / `require`: any certificate, but the handshake's signatures are still
/// checked against it (so the channel binding of SCRAM-SHA-256-PLUS means something).
#[derive(Debug)]
struct Unchecked {
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}
