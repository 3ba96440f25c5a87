//! TLS through rustls against a real server (`.ci/pg-start --tls`: a test CA, a server
//! certificate for `localhost` only, TLS-only TCP on 127.0.0.1, SCRAM passwords).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use hcp_state_pg::{Failure, MachineId, PgError, PgState, StateConfig};

#[test]
fn sslmodes_verify_what_they_promise() {
    let Some(server) = support::Server::start(true) else {
        return;
    };
    server.psql(
        "CREATE ROLE hcp_tls LOGIN PASSWORD 'pw'; GRANT CREATE ON DATABASE postgres TO hcp_tls;",
    );
    let port = server.tls_port.unwrap();
    let ca = server.ca.as_ref().unwrap().display().to_string();
    let url = |host: &str, q: &str| format!("postgresql://hcp_tls:pw@{host}:{port}/postgres?{q}");
    let schema = support::schema_name("tls");
    let cfg = |u: String| StateConfig::new(u).with_schema(&schema);
    let m = MachineId::generate().unwrap();

    // verify-full with the CA, by name, with channel binding required (SCRAM-SHA-256-PLUS).
    let full = cfg(url(
        "localhost",
        &format!("sslmode=verify-full&sslrootcert={ca}&channel_binding=require"),
    ));
    let report = PgState::migrate(&full).unwrap();
    assert_eq!(report.to, hcp_state_pg::SCHEMA_VERSION);
    let s = PgState::connect(&full, m.clone()).unwrap();
    let info = s.info().unwrap();
    assert!(info.tls);
    assert!(!info.url.contains(":pw@"), "{}", info.url);

    // The certificate names `localhost`, not the address: verify-full refuses it,
    // verify-ca (the chain only) and require (no check) accept it.
    let e = PgState::connect(
        &cfg(url(
            "127.0.0.1",
            &format!("sslmode=verify-full&sslrootcert={ca}"),
        )),
        m.clone(),
    )
    .unwrap_err();
    assert_eq!(e.code(), "state_unavailable");
    assert_eq!(e.failure(), Some(Failure::Tls), "{e:?}");
    PgState::connect(
        &cfg(url(
            "127.0.0.1",
            &format!("sslmode=verify-ca&sslrootcert={ca}"),
        )),
        m.clone(),
    )
    .unwrap();
    PgState::connect(&cfg(url("127.0.0.1", "sslmode=require")), m.clone()).unwrap();

    // Another CA: refused.
    let other = tempfile::NamedTempFile::new().unwrap();
    let made = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=other",
        ])
        .args(["-keyout", "/dev/null", "-out"])
        .arg(other.path())
        .output()
        .unwrap();
    assert!(made.status.success());
    let e = PgState::connect(
        &cfg(url(
            "localhost",
            &format!("sslmode=verify-full&sslrootcert={}", other.path().display()),
        )),
        m.clone(),
    )
    .unwrap_err();
    assert_eq!(e.failure(), Some(Failure::Tls), "{e:?}");

    // A root file that is not there, or holds no certificate: refused before connecting.
    let e = PgState::connect(
        &cfg(url(
            "localhost",
            "sslmode=verify-full&sslrootcert=/nonexistent.pem",
        )),
        m.clone(),
    )
    .unwrap_err();
    assert!(
        matches!(
            e,
            PgError::Unavailable {
                failure: Failure::Tls,
                ..
            }
        ),
        "{e:?}"
    );

    // Plain text over TCP: the server's pg_hba allows TLS only.
    let e = PgState::connect(&cfg(url("localhost", "sslmode=disable")), m.clone()).unwrap_err();
    assert_eq!(e.code(), "state_unavailable");
    // A wrong password over TLS.
    let e = PgState::connect(
        &cfg(format!(
            "postgresql://hcp_tls:nope@localhost:{port}/postgres?sslmode=verify-full&sslrootcert={ca}"
        )),
        m,
    )
    .unwrap_err();
    assert_eq!(e.failure(), Some(Failure::Credentials), "{e:?}");
}
